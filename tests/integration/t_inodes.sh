#!/usr/bin/env bash
# The spool's file system short of inodes: the temp-file pool makes no
# files into the last TMPPOOL_INODE_RESERVE (the stores get them), below
# INGEST_MIN_FREE_INODES a C-STORE is refused with 0xA700 "out of inodes"
# and nothing is written, what was acknowledged stays, and stores are
# accepted again once inodes are free. Needs a tmpfs with few inodes on
# the spool (root); skipped otherwise.
. "$(dirname "$0")/lib.sh"
SPOOL_MNT=$STATE/spool
mounted_here=0
unmount_spool() { [ "$mounted_here" = 1 ] && umount "$SPOOL_MNT" 2>/dev/null; }
trap '[ -n "$DAEMON_PID" ] && kill -9 "$DAEMON_PID" 2>/dev/null; wait 2>/dev/null; unmount_spool; cleanup' EXIT
mkdir -p "$SPOOL_MNT"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=64m,nr_inodes=400 tmpfs "$SPOOL_MNT" 2>/dev/null; then
    skip "no tmpfs mount here"
fi
mounted_here=1
free_inodes() { stat -f -c %d "$SPOOL_MNT"; }
write_config "stable_seconds = 3600"
start_daemon

# About 395 free inodes, under the pool's reserve: it makes none.
wait_until 10 "no log line for the pool's reserve" grep -q "kept for stores" "$T/ldctd.log"
# The line gives the count there is, not the reserve's size.
line=$(grep -m1 "kept for stores" "$T/ldctd.log")
have=$(echo "$line" | sed -nE 's/.* has ([0-9]+) free inodes, not more than the 4096 kept for stores/\1/p')
[ -n "$have" ] && [ "$have" -gt 300 ] && [ "$have" -lt 400 ] ||
    fail "the pool's line does not give the free inodes: $line"
made=$(find "$SPOOL_MNT/.tmp" -name '*.part' | wc -l)
[ "$made" = 0 ] || fail "the pool made $made files into the reserve"

"$MKSERIES" --out "$T/a" --rows 32 --cols 32 --slices 2 --series-uid 1.2.826.0.1.3680043.9.7.91.1 \
    > /dev/null || fail "mkseries a"
"$MKSERIES" --out "$T/b" --rows 32 --cols 32 --slices 2 --series-uid 1.2.826.0.1.3680043.9.7.91.2 \
    > /dev/null || fail "mkseries b"
out=$(storescu -v -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/a/*.dcm 2>&1)
echo "$out" | grep -q "Refused" && fail "refused with free inodes: $out"
[ "$(db_instances)" = 2 ] || fail "$(db_instances) instances stored, expected 2"

# Fill the inodes until fewer than INGEST_MIN_FREE_INODES (64) are left.
mkdir "$SPOOL_MNT/fill"
n=$(($(free_inodes) - 40))
(cd "$SPOOL_MNT/fill" && seq 1 "$n" | xargs touch) || fail "filling inodes"
[ "$(free_inodes)" -lt 64 ] || fail "still $(free_inodes) free inodes"
out=$(storescu -v -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/b/*.dcm 2>&1)
echo "$out" | grep -q "Refused: OutOfResources" || fail "no A700 without inodes: $out"
grep -q "refusing C-STORE: out of inodes: [0-9]* free, minimum 64" "$T/ldctd.log" ||
    fail "no log line naming the inodes"
[ "$(db_instances)" = 2 ] || fail "$(db_instances) instances after the refusal, expected 2"
assert_stored_identical "$T"/a/*.dcm

# Inodes free again: accepted.
rm -rf "$SPOOL_MNT/fill"
out=$(storescu -v -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/b/*.dcm 2>&1)
echo "$out" | grep -q "Refused" && fail "refused after inodes were freed: $out"
[ "$(db_instances)" = 4 ] || fail "$(db_instances) instances stored, expected 4"
stop_daemon || fail "exit code $?"
