#!/usr/bin/env bash
# A sender that dies in the middle of a series (its association ends by an
# error, not a release) leaves the series waiting interrupted_seconds of
# quiet for the resend instead of stable_seconds: the part that arrived is
# not processed as if it were the whole series. The resend clears the mark
# and the series completes with every instance.
. "$(dirname "$0")/lib.sh"
write_config "stable_seconds = 1" "interrupted_seconds = 8" \
    "[rule hold]" "action = discard"
"$MKSERIES" --out "$T/s" --rows 256 --cols 256 --slices 300 > /dev/null || fail "mkseries"
uid=$(dcmdump -q +P 0020,000e "$T/s/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
start_daemon
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm > "$T/storescu.log" 2>&1 &
sender=$!
await_instances 10
kill -9 "$sender"
wait "$sender" 2>/dev/null
cut=$(db_instances)
[ "$cut" -lt 300 ] || fail "the sender finished before it was stopped"
noted() { grep -q "series $uid: its association from STORESCU .* ended by an abort or an error" \
    "$T/ldctd.log"; }
wait_until 10 "the interruption is logged" noted
state() { sql "SELECT state FROM series WHERE series_uid = '$uid'"; }
sleep 3 # three times stable_seconds
[ "$(state)" = receiving ] || fail "a series cut off after $cut instances is $(state) after 3 s"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm || fail "resend"
stable() { grep -q "series $uid is stable with 300 instance(s)" "$T/ldctd.log"; }
wait_until 10 "stable with every instance after the resend" stable
[ "$(grep -c "series $uid is stable" "$T/ldctd.log")" = 1 ] ||
    fail "the partial series was taken as complete: $(grep "series $uid is stable" "$T/ldctd.log")"
stop_daemon || fail "exit code $?"
