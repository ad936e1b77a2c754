#!/usr/bin/env bash
# SIGTERM during a transfer: no new associations, the running one finishes,
# the daemon exits 0 and every instance is stored.
. "$(dirname "$0")/lib.sh"
"$MKSERIES" --out "$T/s" --rows 256 --cols 256 --slices 150 || fail "mkseries"
start_daemon
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm > "$T/storescu.log" 2>&1 &
sender=$!
await_instances 10 0.05
kill -TERM "$DAEMON_PID"
sleep 0.3
echo_out=$(echoscu -aec LDCTNODE 127.0.0.1 "$PORT" 2>&1) && fail "new association accepted while stopping"
rc=0; wait "$DAEMON_PID" || rc=$?
DAEMON_PID=
[ $rc = 0 ] || fail "daemon exit code $rc"
wait "$sender" || fail "storescu failed: $(tail -n 5 "$T/storescu.log")"
[ "$(db_instances)" = 150 ] || fail "expected 150 rows, found $(db_instances)"
grep -q "waiting up to" "$T/ldctd.log" || fail "no log line about the running association"
# A request during the grace period is refused as transient, and the log
# says why (not "max_associations in use": nothing to raise).
if echo "$echo_out" | grep -q "Rejected Transient"; then
    grep -q "rejected: local limit exceeded (the node is shutting down)" "$T/ldctd.log" ||
        fail "refusal while stopping: $(grep rejected "$T/ldctd.log")"
fi
