#!/usr/bin/env bash
# `ldct bench` prints one JSON line per run with algo, size, device,
# seconds_median and the algorithm's throughput figure, for every
# algorithm (tiny sizes on the CPU), nlm with --patch-weighting gaussian
# and --distance-cutoff too; bad options exit 2 with a message;
# `ldct tune fdk` without a GPU says so and fails.
. "$(dirname "$0")/lib.sh"
check() { # algo throughput-key args...
    local algo=$1 key=$2
    shift 2
    "$LDCT" bench "$algo" "$@" --device cpu --repeat 1 --json > "$T/$algo.json" 2> "$T/$algo.err" ||
        fail "bench $algo: $(cat "$T/$algo.err")"
    python3 - "$T/$algo.json" "$algo" "$key" << 'PY' || fail "bench $algo output: $(cat "$T/$algo.json")"
import json, sys
lines = [l for l in open(sys.argv[1]) if l.strip()]
assert len(lines) == 1, lines
d = json.loads(lines[0])
assert d["algo"] == sys.argv[2] and d["device"] == "cpu", d
assert d["seconds_median"] > 0 and d[sys.argv[3]] > 0, d
assert "size" in d, d
PY
}
check nlm3d voxel_offsets_per_s --size 24x20x12 --search-radius 2 --patch-radius 1
check nlm2d voxel_offsets_per_s --size 32x28x3 --search-radius 3 --patch-radius 1
check nlm3d voxel_offsets_per_s --size 24x20x12 --search-radius 2 --patch-radius 1 \
    --patch-weighting gaussian
grep -q '"gaussian":1' "$T/nlm3d.json" || fail "--patch-weighting gaussian: $(cat "$T/nlm3d.json")"
"$LDCT" bench nlm3d --patch-weighting box --json > /dev/null 2> "$T/err"; rc=$?
[ $rc = 2 ] || fail "a bad patch weighting exits $rc, not 2"
# --distance-cutoff: the JSON line says the applied one (default 4); a bad one exits 2.
check nlm3d voxel_offsets_per_s --size 24x20x12 --search-radius 2 --patch-radius 1
grep -q '"cutoff":4,' "$T/nlm3d.json" || fail "default cutoff: $(cat "$T/nlm3d.json")"
check nlm3d voxel_offsets_per_s --size 24x20x12 --search-radius 2 --patch-radius 1 \
    --distance-cutoff 0.5
grep -q '"cutoff":0.5,' "$T/nlm3d.json" || fail "--distance-cutoff 0.5: $(cat "$T/nlm3d.json")"
# At strength 0.5 with h from the noise the applied cutoff is 4 (0.8 /
# 0.5)^2 = 10.24 (gpu_nlm_effective_cutoff), as in the daemon.
check nlm3d voxel_offsets_per_s --size 24x20x12 --search-radius 2 --patch-radius 1 --strength 0.5
grep -q '"cutoff":10.24,' "$T/nlm3d.json" || fail "strength 0.5: $(cat "$T/nlm3d.json")"
for c in -1 81 nan abc; do
    "$LDCT" bench nlm3d --distance-cutoff "$c" --json > /dev/null 2> "$T/err"; rc=$?
    [ $rc = 2 ] || fail "--distance-cutoff $c exits $rc, not 2"
    grep -q "bad or missing value for --distance-cutoff" "$T/err" || fail "$c: $(cat "$T/err")"
done
check anlm voxel_offsets_per_s --size 20x18x12 --search-radius 2
check adaptive4d mvoxels_per_s --size 16x14x8x5
check fdk gups --size 24x24x24 --projections 30 --detector 48x32
"$LDCT" bench nlm3d --size 0x1x1 --json > /dev/null 2> "$T/err"; rc=$?
[ $rc = 2 ] || fail "a bad size exits $rc, not 2"
grep -q "size" "$T/err" || fail "no message: $(cat "$T/err")"
"$LDCT" bench frobnicate > /dev/null 2>&1; [ $? = 2 ] || fail "unknown algorithm must exit 2"
"$LDCT" --state-dir "$T/state" tune fdk --device cpu > /dev/null 2> "$T/err" && fail "tune on the CPU succeeded"
grep -q "needs a GPU" "$T/err" || fail "tune: $(cat "$T/err")"
exit 0
