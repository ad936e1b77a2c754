#!/usr/bin/env bash
# On the GPU machine (device `run` tool): anlm against nlm3d on the
# varying-noise phantom with the GPU paths (issue 7, quality target), and
# anlm's time at the pipeline's default search radius 5. Unpacks the bundle
# made by
#     BUNDLE_BINS="ldct" BUNDLE_TAR=1 make bundle      (-> build/bundle.tar.xz)
# then: (1) ldct phantom 256x256x16 --patient-scale 1.75 --i0 5e6 on the GPU
# (docs/QUALITY.md's varying-noise input); nlm3d and anlm at their defaults
# on the GPU, each measured against the truth; the verdict (anlm's PSNR
# higher and noise spread lower than nlm3d's) printed; (2) anlm on the CPU
# (16 threads) of the same input and its GPU result compared with it
# (`ldct quality --ref` the CPU result: noise_sd = sd of GPU - CPU, expected
# far under 1 HU; check_gpu_anlm's tolerance is 1e-3 of the range);
# (3) `ldct bench anlm` at 512^3, S = 5 (the pipeline's default now) and
# S = 3 (the issue's speed target), radii 1 and 2 mixed. Results under $OUT.
# Usage: tests/bench/anlmq_device.sh ARCHIVE
set -u
archive=${1:-build/bundle.tar.xz}
OUT=${OUT:-/tmp/anlmq_out}
W=/tmp/ldct-anlmq
mkdir -p "$OUT" /tmp/ldct-b "$W"
tar -C /tmp/ldct-b -xJf "$archive"
. /tmp/ldct-b/bundle/env.sh
LDCT=/tmp/ldct-b/bundle/bin/ldct
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
t() {
    local s rc
    s=$(date +%s.%N)
    "$@"
    rc=$?
    echo "$(awk "BEGIN { printf \"%.2f\", $(date +%s.%N) - $s }") s: $*" | tee -a "$OUT/times.txt"
    return $rc
}
status=0
t "$LDCT" phantom --out "$W/ph" --size 256 --slices 16 --dose 0.25 --seed 1 --patient-scale 1.75 \
    --i0 5e6 --device gpu > "$OUT/phantom.out" 2>&1 || { tail "$OUT/phantom.out"; exit 1; }
"$LDCT" quality --test "$W/ph/low" --ref "$W/ph/truth" --json > "$OUT/low.json"
for run in nlm3d:gpu anlm:gpu anlm:cpu; do
    a=${run%:*} d=${run#*:}
    echo "== $a (defaults) on the $d"
    t "$LDCT" filter --algo "$a" --device "$d" --in "$W/ph/low" --out "$W/${a}_$d" |
        tee "$OUT/filter_${a}_$d.out"
    "$LDCT" quality --test "$W/${a}_$d" --ref "$W/ph/truth" --json > "$OUT/${a}_$d.json" ||
        status=1
done
python3 - "$OUT/low.json" "$OUT/nlm3d_gpu.json" "$OUT/anlm_gpu.json" "$OUT/anlm_cpu.json" \
    << 'PY' | tee "$OUT/verdict.txt" || status=1
import json, sys
low, nlm, anlm, anlm_cpu = (json.load(open(p)) for p in sys.argv[1:5])
for name, d in (("input", low), ("nlm3d gpu", nlm), ("anlm gpu", anlm), ("anlm cpu", anlm_cpu)):
    print("%-9s PSNR %.2f dB, noise %.2f HU, spread %.3f, ROI sd %s" % (name, d["psnr"],
          d["noise_sd"], d["noise_spread"], " ".join("%.1f" % r["sd"] for r in d["rois"])))
ok = anlm["psnr"] > nlm["psnr"] and anlm["noise_spread"] < nlm["noise_spread"]
print("anlm beats nlm3d (PSNR and noise spread) on the GPU: %s" % ("yes" if ok else "NO"))
sys.exit(0 if ok else 1)
PY
echo "== anlm GPU against CPU (noise_sd = sd of the difference)"
"$LDCT" quality --test "$W/anlm_gpu" --ref "$W/anlm_cpu" --phantom "$W/ph/phantom.ini" --json |
    tee "$OUT/anlm_gpu_vs_cpu.json" | cut -c1-200
echo "== ldct bench anlm 512^3, radii 1+2 mixed, S = 5 and 3"
for S in 5 3; do
    "$LDCT" bench anlm --size 512x512x512 --search-radius $S --device gpu --repeat 3 --json |
        tee -a "$OUT/bench.jsonl" || status=1
done
cat "$OUT/times.txt"
exit $status
