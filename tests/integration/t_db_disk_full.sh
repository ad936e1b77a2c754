#!/usr/bin/env bash
# The database's disk full while the spool has room: every C-STORE is
# refused with 0xA700, no file is left in the spool without its row (no
# one would ever remove it), the failure is not logged per instance, and
# reception works again by itself once space is freed. A start on the
# full disk stops with a message that says so. Needs tmpfs mounts
# (root); skipped otherwise.
. "$(dirname "$0")/lib.sh"
mkdir -p "$STATE"
mounted=""
trap '[ -n "$DAEMON_PID" ] && kill -9 "$DAEMON_PID" 2>/dev/null; wait 2>/dev/null
      for m in $mounted; do umount "$m"; done; cleanup' EXIT
[ "$(id -u)" = 0 ] && mount -t tmpfs -o size=3m tmpfs "$STATE" 2>/dev/null || skip "no tmpfs mount here"
mounted="$STATE"
mkdir -p "$STATE/spool"
mount -t tmpfs -o size=16m tmpfs "$STATE/spool" || fail "mount spool"
mounted="$STATE/spool $STATE"
write_config "stable_seconds = 60"
start_daemon
"$MKSERIES" --out "$T/s" --rows 64 --cols 64 --slices 6 > /dev/null || fail "mkseries"
dd if=/dev/zero of="$STATE/fill" bs=4k 2>/dev/null # the database's disk is full
out=$(storescu -v --no-halt -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm 2>&1)
[ "$(echo "$out" | grep -c "Refused: OutOfResources")" = 6 ] || fail "not 6 x A700: $out"
[ "$(find "$STATE/spool" -name '*.dcm' | wc -l)" = 0 ] ||
    fail "files without rows left in the spool: $(find "$STATE/spool" -name '*.dcm' | wc -l)"
[ "$(grep -c "database or disk is full" "$T/ldctd.log")" -le 2 ] ||
    fail "the full database is logged per instance: $(grep -c "database or disk is full" "$T/ldctd.log")"
rm -f "$STATE/fill"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm || fail "storescu after space was freed"
[ "$(db_instances)" = 6 ] || fail "$(db_instances) instances after space was freed"
[ "$(find "$STATE/spool" -name '*.dcm' | wc -l)" = 6 ] || fail "spool files after space was freed"
stop_daemon || fail "exit code $?"
dd if=/dev/zero of="$STATE/fill" bs=4k 2>/dev/null
rm -f "$STATE/ldct.db-wal" "$STATE/ldct.db-shm" # as after a clean stop on a full disk
rc=0
"$LDCTD" --config "$T/ldctd.conf" > "$T/start.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "start on a full disk: exit $rc"
grep -q "the disk holding $STATE is full (0 KiB free)" "$T/start.log" || fail "no full-disk reason: $(cat "$T/start.log")"
