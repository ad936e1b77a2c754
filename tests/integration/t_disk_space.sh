#!/usr/bin/env bash
# Below min_free_mb every C-STORE is refused with 0xA700 (out of resources)
# and nothing is written; /metrics counts the refusals and shows free space
# under the floor.
. "$(dirname "$0")/lib.sh"
HTTP=$(free_port)
write_config "min_free_mb = 100000000" "http_port = $HTTP"
start_daemon
"$MKSERIES" --out "$T/s" --rows 64 --cols 64 --slices 2 || fail "mkseries"
out=$(storescu -v -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm 2>&1)
echo "$out" | grep -q "Refused: OutOfResources" || fail "no A700 status: $out"
[ "$(db_instances)" = 0 ] || fail "something was stored"
# Nothing with data: the empty .part files are made ahead (pipeline/tmppool.h).
# An instance file counts even when empty: only .part files are made ahead.
left=$(find "$STATE/spool" -type f \( -name '*.dcm' -o \( -name '*.part' -size +0 \) \) | head -n1)
[ -z "$left" ] || fail "files left behind: $left"
grep -q "out of disk space" "$T/ldctd.log" || fail "no log line"
curl -s "http://127.0.0.1:$HTTP/metrics" > "$T/metrics.txt" || fail "GET /metrics"
# storescu stops at the first refusal: one counted.
grep -qx 'ldct_instances_refused_total{reason="resources"} 1' "$T/metrics.txt" ||
    fail "refusals: $(grep refused "$T/metrics.txt")"
python3 - "$T/metrics.txt" << 'PY' || fail "free space: $(grep free "$T/metrics.txt")"
import sys
m = dict(l.split() for l in open(sys.argv[1]) if l.startswith("ldct_spool_") and "{" not in l)
assert int(m["ldct_spool_free_bytes"]) < int(m["ldct_spool_min_free_bytes"]), m
assert int(m["ldct_spool_min_free_bytes"]) == 100000000 * 1024 * 1024, m
PY
stop_daemon || fail "exit code $?"

# The guard off (min_free_mb = 0) and the spool really full: a dataset cut
# short by our disk is "out of resources" too, never 0xC000 "cannot
# understand" (which tells the sender its data is broken), nothing of it is
# kept, and the association goes on. Needs a small tmpfs on the spool
# (root); skipped otherwise.
SPOOL_MNT=$STATE/spool
mounted_here=0
unmount_spool() { [ "$mounted_here" = 1 ] && umount "$SPOOL_MNT" 2>/dev/null; }
trap '[ -n "$DAEMON_PID" ] && kill -9 "$DAEMON_PID" 2>/dev/null; wait 2>/dev/null; unmount_spool; cleanup' EXIT
mkdir -p "$SPOOL_MNT"
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=4m tmpfs "$SPOOL_MNT" 2>/dev/null; then
    note "no tmpfs mount here: the full-disk half is skipped"
    exit 0
fi
mounted_here=1
write_config "min_free_mb = 0" "dimse_timeout = 30"
start_daemon
# 1.5 MiB free and a 2 MiB instance: the write fails in the middle of the
# dataset. Then a small one in the same association, which fits.
"$MKSERIES" --out "$T/big" --rows 1024 --cols 1024 --slices 1 > /dev/null || fail "mkseries big"
free_kb=$(df -k --output=avail "$SPOOL_MNT" | tail -n 1)
dd if=/dev/zero of="$SPOOL_MNT/fill" bs=1k count=$((free_kb - 1536)) 2>/dev/null
out=$(storescu -v --no-halt -aec LDCTNODE 127.0.0.1 "$PORT" "$T/big/IMG0001.dcm" "$T/s/IMG0001.dcm" 2>&1)
echo "$out" | grep -q "Refused: OutOfResources" || fail "spool full mid-dataset: not A700: $out"
echo "$out" | grep -q "CannotUnderstand" && fail "full spool answered as the sender's fault: $out"
echo "$out" | grep -q "Received Store Response (Success)" || fail "the association did not go on: $out"
[ -z "$(find "$STATE/quarantine" -type f 2>/dev/null | head -n1)" ] ||
    fail "a cut-short instance was quarantined as broken"
grep -q "out of disk space while receiving" "$T/ldctd.log" || fail "no log line for the full spool"
[ "$(db_instances)" = 1 ] || fail "$(db_instances) instances stored, expected the small one"
# The association stored part of what it sent: its series must not count
# as complete after stable_seconds, it waits for the sender's resend like
# the series of an aborted association.
wait_until 10 "no hold for the series of an association with refusals" \
    grep -q "had instances refused for lack of resources (0xA700); it waits for the sender's resend" \
    "$T/ldctd.log"
[ "$(sql "SELECT interrupted_ms > 0 FROM series")" = 1 ] || fail "the series is not held for a resend"
# A refusal holds the sender's series at once, not at the end of the
# association (it may go on for longer than stable_seconds), and also when
# that association stored nothing itself (one association per image).
sql "UPDATE series SET interrupted_ms = 0" # as if the series had come in cleanly
python3 "$ROOT/tests/tools/rawscu.py" 127.0.0.1 "$PORT" store "$T/big/IMG0001.dcm" \
    --calling STORESCU --hold 4 > "$T/raw.out" 2>&1 &
raw=$!
wait_until 10 "the refusal in the held association" grep -q 0xA700 "$T/raw.out"
[ "$(sql "SELECT interrupted_ms > 0 FROM series")" = 1 ] ||
    fail "the sender's receiving series is not held while its association is still open"
grep -q "1 receiving series from STORESCU .* held as well" "$T/ldctd.log" ||
    fail "no log line for the held series"
wait "$raw"
# 1100 KiB free and an instance of 1129 KiB: the write fails in the last
# PDV. Answered at once (DCMTK's own receive would wait dimse_timeout for
# PDVs after the last, then abort the association).
"$MKSERIES" --out "$T/edge" --rows 760 --cols 760 --slices 1 > /dev/null || fail "mkseries edge"
rm -f "$SPOOL_MNT/fill"
free_kb=$(df -k --output=avail "$SPOOL_MNT" | tail -n 1)
dd if=/dev/zero of="$SPOOL_MNT/fill" bs=1k count=$((free_kb - 1100)) 2>/dev/null
out=$(timeout 15 storescu -v -aec LDCTNODE 127.0.0.1 "$PORT" "$T/edge/IMG0001.dcm" 2>&1)
echo "$out" | grep -q "Refused: OutOfResources" || fail "spool full in the last PDV: not A700 at once: $out"
# Nothing free: refused at once.
dd if=/dev/zero of="$SPOOL_MNT/fill2" bs=4k 2>/dev/null
out=$(timeout 15 storescu -v -aec LDCTNODE 127.0.0.1 "$PORT" "$T/s/IMG0002.dcm" 2>&1)
echo "$out" | grep -q "Refused: OutOfResources" || fail "no free space: not A700 at once: $out"
grep -q "refusing C-STORE: out of disk space: 0 MiB free" "$T/ldctd.log" || fail "no log line"
rm -f "$SPOOL_MNT/fill" "$SPOOL_MNT/fill2"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T/s/IMG0001.dcm" || fail "store after space was freed"
[ "$(db_instances)" = 1 ] || fail "after freeing space: $(db_instances) instances"
[ "$(sql "SELECT interrupted_ms > 0 FROM series")" = 0 ] || fail "the resend did not clear the hold"
stop_daemon || fail "exit code $?"

# min_free_mb holds while datasets are written, not only when they begin:
# four 8 MiB instances at once, with 40 MiB free and a floor of 16 MiB,
# may not take the spool down to 8 MiB (each reception checks the space
# after every MiB it writes and fails as on a full disk below the floor).
mount -o remount,size=40m "$SPOOL_MNT" || fail "remount the spool's tmpfs"
write_config "min_free_mb = 16" "dimse_timeout = 30"
start_daemon
"$MKSERIES" --out "$T/huge" --rows 2048 --cols 2048 --slices 4 > /dev/null || fail "mkseries huge"
pids=()
for i in 1 2 3 4; do
    storescu -v -aec LDCTNODE 127.0.0.1 "$PORT" "$T/huge/IMG000$i.dcm" > "$T/huge$i.out" 2>&1 &
    pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
free_mb=$(( $(df -k --output=avail "$SPOOL_MNT" | tail -n 1) / 1024 ))
note "free after four concurrent 8 MiB instances (floor 16 MiB): $free_mb MiB"
[ "$free_mb" -ge 12 ] || fail "the spool went down to $free_mb MiB with min_free_mb = 16"
refused=$(grep -l "Refused: OutOfResources" "$T"/huge?.out | wc -l)
[ "$refused" -ge 1 ] || fail "all four were accepted"
grep -q "out of disk space while receiving (spool full or down to min_free_mb)" "$T/ldctd.log" ||
    fail "no log line for the floor reached while receiving"
stop_daemon || fail "exit code $?"
