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

# The guard off (min_free_mb = 0) and the spool really full: a dataset cut
# short by our disk is "out of resources" too, never 0xC000 "cannot
# understand" (which tells the sender its data is broken), and nothing of
# it is kept. Needs a small tmpfs on the spool (root); skipped otherwise.
SPOOL_MNT=$STATE/spool
mounted_here=0
unmount_spool() { [ "$mounted_here" = 1 ] && umount "$SPOOL_MNT" 2>/dev/null; }
trap '[ -n "$DAEMON_PID" ] && kill -9 "$DAEMON_PID" 2>/dev/null; wait 2>/dev/null; unmount_spool; cleanup' EXIT
mkdir -p "$SPOOL_MNT"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=1m tmpfs "$SPOOL_MNT" 2>/dev/null; then
    note "no tmpfs mount here: the full-disk half is skipped"
    exit 0
fi
mounted_here=1
write_config "min_free_mb = 0"
start_daemon
# Fill all but about 8 KiB (one 64x64 instance is about 10 KiB).
free_kb=$(df -k --output=avail "$SPOOL_MNT" | tail -n 1)
dd if=/dev/zero of="$SPOOL_MNT/fill" bs=1k count=$((free_kb - 8)) 2>/dev/null
out=$(storescu -v -aec LDCTNODE 127.0.0.1 "$PORT" "$T/s/IMG0001.dcm" 2>&1)
echo "$out" | grep -q "Refused: OutOfResources" || fail "full spool: not A700: $out"
echo "$out" | grep -q "CannotUnderstand" && fail "full spool answered as the sender's fault: $out"
[ -z "$(find "$STATE/quarantine" -type f 2>/dev/null | head -n1)" ] ||
    fail "a cut-short instance was quarantined as broken"
grep -q "out of disk space while receiving" "$T/ldctd.log" || fail "no log line for the full spool"
rm -f "$SPOOL_MNT/fill"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T/s/IMG0001.dcm" || fail "store after space was freed"
[ "$(db_instances)" = 1 ] || fail "after freeing space: $(db_instances) instances"
stop_daemon || fail "exit code $?"
