#!/usr/bin/env bash
# On the GPU machine (device `run` tool): the simulator with FDK on the GPU
# (issue 6). Unpacks the bundle made by
#     BUNDLE_BINS="ldct" BUNDLE_TAR=1 make bundle      (-> build/bundle.tar.xz)
# then: (1) ldct phantom 256x256x16 on the CPU and on the GPU with the same
# seed, timed, and the GPU series compared with the CPU ones (`ldct quality`:
# noise_sd is then the sd of GPU - CPU, expected well under 1 HU: FDK's CUDA
# backprojector agrees with the reference to about 5e-4 relative);
# (2) nlm3d at its defaults on the GPU and on the CPU on the GPU phantom,
# the issue's floors checked by tests/integration/quality_floors.py (all
# nine lesions; docs/QUALITY.md: met on the CPU at this size), and the two
# denoised series compared;
# (3) ldct phantom 512x512x64 on the GPU, timed. Results under $OUT.
# Usage: tests/bench/phantom_device.sh ARCHIVE
set -u
archive=${1:-build/bundle.tar.xz}
OUT=${OUT:-/tmp/phantom_out}
HERE=$(cd "$(dirname "$0")" && pwd)
W=/tmp/ldct-ph
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
for d in cpu gpu; do
    t "$LDCT" phantom --out "$W/$d" --size 256 --slices 16 --seed 1 --device $d \
        > "$OUT/phantom_$d.out" 2>&1 || { echo "phantom on $d failed"; tail "$OUT/phantom_$d.out"; }
done
for s in truth full low; do
    echo "== $s: GPU against CPU"
    "$LDCT" quality --test "$W/gpu/$s" --ref "$W/cpu/$s" --phantom "$W/cpu/phantom.ini" --json |
        tee "$OUT/gpu_vs_cpu_$s.json" | cut -c1-200
done
"$LDCT" quality --test "$W/gpu/low" --ref "$W/gpu/truth" --json > "$OUT/low.json"
for d in gpu cpu; do
    echo "== nlm3d (defaults: S=5 P=2 strength 1) on the $d, floors against the truth"
    t "$LDCT" filter --algo nlm3d --device $d --in "$W/gpu/low" --out "$W/dn_$d" |
        tee "$OUT/filter_$d.out"
    "$LDCT" quality --test "$W/dn_$d" --ref "$W/gpu/truth" --json --png "$OUT/quality_$d.png" \
        > "$OUT/dn_$d.json"
    python3 "$HERE/../integration/quality_floors.py" "$OUT/low.json" "$OUT/dn_$d.json" |
        tee "$OUT/floors_$d.txt"
done
echo "== nlm3d GPU against CPU"
"$LDCT" quality --test "$W/dn_gpu" --ref "$W/dn_cpu" --phantom "$W/gpu/phantom.ini" --json |
    tee "$OUT/nlm_gpu_vs_cpu.json" | cut -c1-200
echo "== ldct phantom 512x512x64 on the GPU"
t "$LDCT" phantom --out "$W/big" --size 512 --slices 64 --seed 1 --device gpu \
    > "$OUT/phantom_big.out" 2>&1
tail -2 "$OUT/phantom_big.out"
cat "$OUT/times.txt"
