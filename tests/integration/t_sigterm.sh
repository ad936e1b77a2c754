#!/usr/bin/env bash
# SIGTERM during a transfer: no new associations, the running one finishes,
# the daemon exits 0 and every instance is stored. SIGHUPs during the start
# do not kill it; a SIGTERM then stops it cleanly.
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
# SIGHUP during the start (a manual or logrotate reload before the loop's
# handler exists) must not kill the daemon (it died of "Hangup", rc 129):
# it is blocked until the handler exists, and the reload then runs. From the
# moment main has blocked it (SigBlk bit 1), a burst of SIGHUPs until
# "ready" must leave the daemon running and end in one reload.
hup_blocked() { [ $((0x$(sed -n 's/^SigBlk:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null || echo 0) & 1)) = 1 ]; }
"$LDCTD" --config "$T/ldctd.conf" >> "$T/ldctd2.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 1 5000); do
    hup_blocked "$DAEMON_PID" && break
    grep -q "ldctd ready" "$T/ldctd2.log" && fail "SIGHUP was never blocked during the start"
done
hups=0
until grep -q "ldctd ready" "$T/ldctd2.log"; do
    kill -HUP "$DAEMON_PID" 2>/dev/null ||
        fail "ldctd died of a SIGHUP during its start: $(tail -n 3 "$T/ldctd2.log")"
    hups=$((hups + 1))
    [ $hups -lt 5000 ] || fail "ldctd did not become ready"
done
note "$hups SIGHUP(s) during the start"
wait_until 5 "the reload asked for during the start" grep -q "configuration reloaded" "$T/ldctd2.log"
kill -0 "$DAEMON_PID" 2>/dev/null || fail "ldctd died after SIGHUPs during its start"
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "no C-ECHO after the SIGHUPs"
stop_daemon || fail "exit code $? after the SIGHUPs"
# SIGTERM during the start is blocked until the handler exists too (SigBlk
# bit 0x4000): the stop then runs as any other, exit 0, instead of the
# default action killing a daemon that may hold half-opened state.
term_blocked() { [ $((0x$(sed -n 's/^SigBlk:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null || echo 0) & 0x4000)) != 0 ]; }
"$LDCTD" --config "$T/ldctd.conf" > "$T/ldctd3.log" 2>&1 &
DAEMON_PID=$!
for _ in $(seq 1 5000); do
    term_blocked "$DAEMON_PID" && break
    grep -q "ldctd ready" "$T/ldctd3.log" && fail "SIGTERM was never blocked during the start"
done
kill -TERM "$DAEMON_PID"
rc=0; wait "$DAEMON_PID" || rc=$?
DAEMON_PID=
[ $rc = 0 ] || fail "exit code $rc after a SIGTERM during the start: $(tail -n 3 "$T/ldctd3.log")"
grep -q "SIGTERM received: shutting down" "$T/ldctd3.log" || fail "the SIGTERM was not handled"
grep -q "ldctd stopped" "$T/ldctd3.log" || fail "no clean stop after a SIGTERM during the start"
