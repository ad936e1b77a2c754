#!/usr/bin/env bash
# A series becomes stable after stable_seconds of quiet; a late instance
# reopens it; and it becomes stable again.
. "$(dirname "$0")/lib.sh"
write_config "stable_seconds = 2"
start_daemon
"$MKSERIES" --out "$T/s" --rows 64 --cols 64 --slices 3 || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/IMG0001.dcm "$T"/s/IMG0002.dcm || fail storescu
state() { sqlite3 "$STATE/ldct.db" "SELECT state FROM series"; }
[ "$(state)" = receiving ] || fail "not receiving: $(state)"
sleep 3.5
[ "$(state)" = stable ] || fail "not stable after the quiet time: $(state)"
grep -q "is stable with 2 instance" "$T/ldctd.log" || fail "no log line"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/IMG0003.dcm || fail storescu
[ "$(state)" = receiving ] || fail "late instance did not reopen: $(state)"
sleep 3.5
[ "$(state)" = stable ] || fail "not stable again: $(state)"
stop_daemon || fail "exit code $?"
