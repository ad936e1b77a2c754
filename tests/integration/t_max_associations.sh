#!/usr/bin/env bash
# With max_associations = 1, a second association while one is running is
# refused (transient, local limit exceeded); once the first ends, it works.
. "$(dirname "$0")/lib.sh"
write_config "max_associations = 1"
"$MKSERIES" --out "$T/s" --rows 256 --cols 256 --slices 300 || fail "mkseries"
start_daemon
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm > "$T/storescu.log" 2>&1 &
sender=$!
await_instances 5
out=$(echoscu -aec LDCTNODE 127.0.0.1 "$PORT" 2>&1) && fail "second association accepted"
echo "$out" | grep -q "Local Limit Exceeded" || fail "wrong reason: $out"
echo "$out" | grep -q "Rejected Transient" || fail "not transient: $out"
grep -q "rejected: local limit exceeded (all max_associations = 1 in use)" "$T/ldctd.log" ||
    fail "the log does not say why: $(grep rejected "$T/ldctd.log")"
wait "$sender" || fail "the first association failed"
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "echo refused after the first ended"
[ "$(db_instances)" = 300 ] || fail "expected 300 rows"
stop_daemon || fail "exit code $?"
