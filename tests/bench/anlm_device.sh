#!/bin/sh
# Runs on the GPU machine (device `run` tool): the adaptive NLM unit tests
# (CUDA against the CPU reference, slabs, budget), then the benchmarks of
# issue 7, JSON lines under $OUT. Usage:
#   tests/bench/anlm_device.sh [DIR-with-check_gpu_anlm-and-gpu_bench] [what]
#   what: all (default) | test | bench | cpu   (several, comma-separated)
# bench: 512^3 and 100^3, S = 3, patch radii 1 and 2 with mixing, on the
# GPU (target <= 1 s end to end at 512^3); cpu: the CPU reference at 128^3
# (16 threads of the GPU machine) for the ratio. Carry DIR built with
# `make build/tests/check_gpu_anlm build/tools/gpu_bench` and copied there.
B=${1:-build/gpucarry}
WHAT=${2:-all}
OUT=${OUT:-/tmp/anlm_out}
CFGS=${CFGS:-2 1 0} # sweep kernels of gpu/anlm.cu: 2 column of 4 (default), 1 column of 8, 0 tile
want() { case ",$WHAT," in *",$1,"* | *",all,"*) return 0 ;; esac; return 1; }
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total \
    --format=csv | tee "$OUT/gpu.txt"
status=0
if want test; then
    echo "== unit tests"
    "$B/check_gpu_anlm" 2>&1 | tee "$OUT/check.log"
    grep -q "100%: Checks" "$OUT/check.log" || status=1
fi
if want bench; then
    echo "== anlm S=3, radii 1+2 mixed: 512^3 and 100^3 on the GPU, kernels $CFGS"
    for cfg in $CFGS; do
        for size in 512x512x512 100x100x100; do
            LDCT_ANLM_CFG=$cfg "$B/gpu_bench" bench anlm --size $size --search-radius 3 \
                --device gpu --repeat 5 --json | sed "s/^{/{\"cfg\":$cfg,/" |
                tee -a "$OUT/bench.jsonl" || status=1
        done
    done
    echo "== single passes (radius 1, radius 2) at 512^3, for the split of the time"
    for p in 1 2; do
        "$B/gpu_bench" bench anlm --size 512x512x512 --search-radius 3 --patch-radius $p \
            --device gpu --repeat 3 --json | tee -a "$OUT/bench.jsonl" || status=1
    done
    echo "== Rician model at 512^3"
    "$B/gpu_bench" bench anlm --size 512x512x512 --search-radius 3 --rician --device gpu \
        --repeat 3 --json | tee -a "$OUT/bench.jsonl" || status=1
fi
if want cpu; then
    echo "== CPU reference 128^3 and 100^3 (same parameters)"
    "$B/gpu_bench" bench anlm --size 128x128x128,100x100x100 --search-radius 3 --device cpu \
        --repeat 1 --warmup 0 --json | tee -a "$OUT/cpu.jsonl" || status=1
fi
exit $status
