#!/bin/sh
# Runs on the GPU machine (device `run` tool): what patch_weighting =
# gaussian costs on the GPU (docs/NOTES-nlmq.md). The NLM unit tests (CUDA
# against the CPU reference, uniform and Gaussian weights), then nlm3d
# 512^3 S=5 P=2 and nlm2d 512x512x500 S=10 P=3 with uniform (v3 kernel for
# nlm3d) and Gaussian (v2 path) weights, JSON lines under $OUT.
# Usage: tests/bench/nlmq_device.sh [DIR-with-check_gpu_nlm-and-gpu_bench]
B=${1:-build/gpucarry}
OUT=${OUT:-/tmp/nlmq_out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total \
    --format=csv | tee "$OUT/gpu.txt"
echo "== unit tests"
"$B/check_gpu_nlm" 2>&1 | tail -5 | tee "$OUT/check.log"
for w in uniform gaussian; do
    echo "== nlm3d 512^3 S=5 P=2, $w"
    "$B/gpu_bench" bench nlm3d --size 512x512x512 --search-radius 5 --patch-radius 2 \
        --patch-weighting "$w" --device gpu --repeat 5 --json | tee -a "$OUT/bench.jsonl"
    echo "== nlm2d 512x512x500 S=10 P=3, $w"
    "$B/gpu_bench" bench nlm2d --size 512x512x500 --search-radius 10 --patch-radius 3 \
        --patch-weighting "$w" --device gpu --repeat 5 --json | tee -a "$OUT/bench.jsonl"
done
