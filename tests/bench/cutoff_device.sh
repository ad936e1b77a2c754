#!/bin/sh
# Runs on the GPU machine (device `run` tool): the NLM distance cutoff on
# the GPU (docs/NOTES-nlmq.md, "Distance cutoff (session 5)"). The NLM unit
# tests (every CUDA kernel against the CPU reference, cutoffs 0 and 1.5 and
# the default), then nlm3d 512^3 S=5 P=2 and nlm2d 512x512x500 S=10 P=3,
# uniform and Gaussian, with the cutoff off (0) and at the default (4):
# what the cutoff costs, and what Gaussian patch weights cost against
# uniform ones (docs/NOTES-nlmq.md). JSON lines (with "cutoff") under $OUT.
# Usage: tests/bench/cutoff_device.sh [DIR-with-check_gpu_nlm-and-gpu_bench]
B=${1:-build/gpucarry}
OUT=${OUT:-/tmp/cutoff_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total \
    --format=csv | tee "$OUT/gpu.txt"
echo "== unit tests"
"$B/check_gpu_nlm" 2>&1 | tail -5 | tee "$OUT/check.log"
for w in uniform gaussian; do
    for c in 0 4; do
        echo "== nlm3d 512^3 S=5 P=2, $w, cutoff $c"
        "$B/gpu_bench" bench nlm3d --size 512x512x512 --search-radius 5 --patch-radius 2 \
            --patch-weighting "$w" --distance-cutoff "$c" --device gpu --repeat 5 --json |
            tee -a "$OUT/bench.jsonl"
        echo "== nlm2d 512x512x500 S=10 P=3, $w, cutoff $c"
        "$B/gpu_bench" bench nlm2d --size 512x512x500 --search-radius 10 --patch-radius 3 \
            --patch-weighting "$w" --distance-cutoff "$c" --device gpu --repeat 5 --json |
            tee -a "$OUT/bench.jsonl"
    done
done
