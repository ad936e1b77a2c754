#!/usr/bin/env bash
# A stop is not held up by peers that do not close: with acse_timeout = 30
# and shutdown_grace_seconds = 2, a caller rejected before the SIGTERM and
# one rejected during the grace (the node is shutting down), both keeping
# their connection open without a word, are closed when the grace ends,
# and ldctd exits 0 within the grace and a few seconds, not after
# acse_timeout. (They once held the stop until acse_timeout: the wait for
# a rejected peer to close ignored the stop.)
. "$(dirname "$0")/lib.sh"
write_config "stable_seconds = 60" "acse_timeout = 30" "shutdown_grace_seconds = 2"
start_daemon
"$MKSERIES" --out "$T/s" --rows 16 --cols 16 --slices 1 > /dev/null || fail "mkseries"
raw() { python3 "$ROOT/tests/tools/rawscu.py" 127.0.0.1 "$PORT" "$@"; }
raw associate --called SOMEONEELSE --wait 60 > "$T/before.out" 2>&1 &
before=$!
raw store "$T"/s/*.dcm --stall 100 --wait 60 > "$T/stall.out" 2>&1 &
stall=$!
rejected_once() { grep -q "^rejected" "$T/before.out"; }
wait_until 10 "the first caller rejected" rejected_once
held() { grep -q "calling RAWSCU) accepted" "$T/ldctd.log"; }
wait_until 10 "the stalled association accepted" held
SECONDS=0
kill -TERM "$DAEMON_PID"
raw associate --wait 60 > "$T/during.out" 2>&1 &
during=$!
rc=0
wait "$DAEMON_PID" || rc=$?
DAEMON_PID=
took=$SECONDS
[ $rc = 0 ] || fail "exit code $rc"
wait "$before" "$stall" "$during"
grep -q "^rejected" "$T/during.out" || fail "during the grace: $(cat "$T/during.out")"
for f in before during stall; do
    grep -q "^closed after" "$T/$f.out" || fail "$f: $(cat "$T/$f.out")"
done
[ "$took" -lt 10 ] || fail "the stop took $took s (grace 2 s, acse_timeout 30 s)"
exit 0
