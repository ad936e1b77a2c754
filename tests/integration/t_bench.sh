#!/usr/bin/env bash
# `ldct bench` prints one JSON line per run with algo, size, device,
# seconds_median and the algorithm's throughput figure, for every
# algorithm (tiny sizes on the CPU), nlm with --patch-weighting gaussian
# and --distance-cutoff too; bad options exit 2 with a message (sizes and
# counts past int or with trailing junk too: they used to wrap to small
# ones); `ldct --json bench` is `ldct bench ... --json`; `ldct tune fdk`
# without a GPU says so and fails.
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
for bad in "fdk --size 4294967297x2x2" "fdk --detector 8x8x" "fdk --projections 12abc" \
    "fdk --repeat 4294967297" "nlm3d --threads abc" "nlm3d --size 99999999999" \
    "adaptive4d --size 8x8x8x4x2" "anlm --warmup 1.5" "fdk --size 8x8"; do
    read -ra args <<< "$bad"
    "$LDCT" bench "${args[@]}" --device cpu > /dev/null 2> "$T/err"; rc=$?
    [ $rc = 2 ] || fail "bench $bad exits $rc, not 2: $(cat "$T/err")"
    grep -q "bad" "$T/err" || fail "bench $bad: no message: $(cat "$T/err")"
done
"$LDCT" --json bench nlm3d --size 24x20x12 --search-radius 2 --patch-radius 1 --device cpu \
    --repeat 1 > "$T/lead.json" 2> "$T/err" || fail "--json before bench: $(cat "$T/err")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["size"]=="24x20x12", d' \
    "$T/lead.json" || fail "--json before bench: $(cat "$T/lead.json")"
"$LDCT" --config /nonexistent bench nlm3d > /dev/null 2> "$T/err"; rc=$?
[ $rc = 2 ] || fail "--config before bench exits $rc, not 2"
grep -q "not an option of bench" "$T/err" || fail "--config before bench: $(cat "$T/err")"
"$LDCT" bench frobnicate > /dev/null 2>&1; [ $? = 2 ] || fail "unknown algorithm must exit 2"
"$LDCT" --state-dir "$T/state" tune fdk --device cpu > /dev/null 2> "$T/err" && fail "tune on the CPU succeeded"
grep -q "needs a GPU" "$T/err" || fail "tune: $(cat "$T/err")"
exit 0
