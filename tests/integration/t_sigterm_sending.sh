#!/usr/bin/env bash
# SIGTERM while sending to a slow PACS: the send ends after the file in
# flight (not after the whole series), the daemon exits 0 within
# shutdown_grace_seconds, the send is not counted as a failed attempt, and
# after the restart it goes on and every derived instance arrives.
. "$(dirname "$0")/lib.sh"
PACS_PORT=$(free_port)
mkdir -p "$T/pacs"
# 1 s per C-STORE: 8 files would keep one association busy for 8 s.
storescp -aet SLOW --sleep-during 1 -od "$T/pacs" "$PACS_PORT" > "$T/storescp.log" 2>&1 &
write_config "stable_seconds = 1" "devices = cpu" "shutdown_grace_seconds = 5" \
    "[destination slow]" "host = 127.0.0.1" "port = $PACS_PORT" "ae_title = SLOW" \
    "[rule r]" "action = process" "algorithm = nlm2d" "destinations = slow"
start_daemon
"$MKSERIES" --out "$T/s" --rows 32 --cols 32 --slices 8 --noise 20 > /dev/null || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm || fail "storescu"
sending() { [ "$(sends_in sending)" = 1 ] && [ "$(ls "$T/pacs" | wc -l)" -ge 1 ]; }
wait_until 30 "the send under way" sending
start=$(date +%s)
kill -TERM "$DAEMON_PID"
rc=0; wait "$DAEMON_PID" || rc=$?
DAEMON_PID=
took=$(($(date +%s) - start))
[ $rc = 0 ] || fail "daemon exit code $rc"
[ "$took" -le 5 ] || fail "shutdown took $took s"
grep -q "interrupted by the shutdown" "$T/ldctd.log" || fail "no log line about the send"
grep -q "0 job(s) and 1 send(s) still queued; they go on at the next start" "$T/ldctd.log" ||
    fail "no word on what is left: $(tail -n 5 "$T/ldctd.log")"
got=$(ls "$T/pacs" | wc -l)
[ "$got" -lt 8 ] || fail "the whole series went out before the stop ($got files)"
[ "$(sql "SELECT attempts || ' ' || state FROM sends")" = "0 pending" ] ||
    fail "after the stop: $(sql "SELECT attempts || ' ' || state FROM sends") (want 0 pending)"
start_daemon
delivered() { [ "$(sends_in done)" = 1 ]; }
wait_until 40 "the send finished after the restart" delivered
[ "$(sql "SELECT attempts FROM sends")" = 1 ] || fail "attempts $(sql "SELECT attempts FROM sends")"
[ "$(ls "$T/pacs" | wc -l)" = 8 ] || fail "the PACS holds $(ls "$T/pacs" | wc -l) files, not 8"
stop_daemon || fail "exit code $?"
