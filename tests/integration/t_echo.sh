#!/usr/bin/env bash
# C-ECHO works; an association to another called AE title is refused with
# reason "called AE title not recognized" and a log line; a second ldctd on
# the same state directory refuses to start and leaves the first alone,
# also on the same port; one on a taken port with a new state directory
# refuses before it creates anything.
. "$(dirname "$0")/lib.sh"
start_daemon
# A new database is one line, not one per schema step.
grep -Eq "$LOG_HEAD info: database created \(schema version [0-9]+\)$" "$T/ldctd.log" ||
    fail "no line for the new database: $(grep database "$T/ldctd.log")"
grep -q "migrated to schema" "$T/ldctd.log" && fail "a new database logged as migrated"
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "C-ECHO failed"
out=$(echoscu -aec SOMEONEELSE 127.0.0.1 "$PORT" 2>&1) && fail "wrong called AE accepted"
echo "$out" | grep -q "Called AE Title Not Recognized" || fail "wrong reject reason: $out"
grep -q "rejected: called AE title not recognised (this node is LDCTNODE)" "$T/ldctd.log" || fail "no log line for the refusal"
sed "s/^port = .*/port = $(free_port)/" "$T/ldctd.conf" > "$T/second.conf"
"$LDCTD" --config "$T/second.conf" > "$T/second.log" 2>&1 && fail "second ldctd started"
grep -q "another ldctd (pid $DAEMON_PID) uses" "$T/second.log" || fail "no reason: $(cat "$T/second.log")"
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "first daemon disturbed"
"$LDCTD" --config "$T/ldctd.conf" > "$T/same-port.log" 2>&1 && fail "second ldctd on the same port started"
grep -q "another ldctd (pid $DAEMON_PID) uses" "$T/same-port.log" ||
    fail "same port, no reason: $(cat "$T/same-port.log")"
printf '[node]\nport = %s\nstate_dir = %s\n' "$PORT" "$T/fresh" > "$T/taken.conf"
"$LDCTD" --config "$T/taken.conf" > "$T/taken.log" 2>&1
rc=$?
[ $rc = 1 ] || fail "ldctd on a taken port exited $rc: $(cat "$T/taken.log")"
grep -q "cannot listen on port $PORT: .*; free the port or choose another" "$T/taken.log" ||
    fail "taken port, no reason: $(cat "$T/taken.log")"
[ -e "$T/fresh" ] && fail "ldctd refused for a taken port created its state directory"
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "first daemon disturbed by the second and third"
stop_daemon || fail "exit code $? after SIGTERM"
