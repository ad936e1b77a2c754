#!/usr/bin/env bash
# Below min_free_mb every C-STORE is refused with 0xA700 (out of resources)
# and nothing is written.
. "$(dirname "$0")/lib.sh"
write_config "min_free_mb = 100000000"
start_daemon
"$MKSERIES" --out "$T/s" --rows 64 --cols 64 --slices 2 || fail "mkseries"
out=$(storescu -v -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm 2>&1)
echo "$out" | grep -q "Refused: OutOfResources" || fail "no A700 status: $out"
[ "$(db_instances)" = 0 ] || fail "something was stored"
[ -z "$(find "$STATE/spool" -name '*.dcm' -o -name '*.part' | head -n1)" ] || fail "files left behind"
grep -q "out of disk space" "$T/ldctd.log" || fail "no log line"
stop_daemon || fail "exit code $?"
