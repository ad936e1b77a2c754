#!/usr/bin/env bash
# C-ECHO works; an association to another called AE title is refused with
# reason "called AE title not recognized" and a log line; a second ldctd on
# the same state directory refuses to start and leaves the first alone.
. "$(dirname "$0")/lib.sh"
start_daemon
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "C-ECHO failed"
out=$(echoscu -aec SOMEONEELSE 127.0.0.1 "$PORT" 2>&1) && fail "wrong called AE accepted"
echo "$out" | grep -q "Called AE Title Not Recognized" || fail "wrong reject reason: $out"
grep -q "rejected: called AE title not recognised (this node is LDCTNODE)" "$T/ldctd.log" || fail "no log line for the refusal"
sed "s/^port = .*/port = $(free_port)/" "$T/ldctd.conf" > "$T/second.conf"
"$LDCTD" --config "$T/second.conf" > "$T/second.log" 2>&1 && fail "second ldctd started"
grep -q "another ldctd (pid $DAEMON_PID) uses" "$T/second.log" || fail "no reason: $(cat "$T/second.log")"
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "first daemon disturbed"
stop_daemon || fail "exit code $? after SIGTERM"
