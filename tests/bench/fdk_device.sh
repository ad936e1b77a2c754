#!/bin/sh
# Runs on the GPU machine (device `run` tool): FDK unit tests (CUDA against
# the CPU reference), then the FDK benchmarks of issue 5 at RabbitCT size,
# JSON lines under $OUT. Usage: tests/bench/fdk_device.sh [DIR] [what]
#   DIR: holds check_gpu_fdk and gpu_bench (default build/fdkcarry)
#   what: all (default) | test | bench | sweep (several, comma-separated)
#   CFGS: backprojector configurations "I,K,BX,BY ..." for sweep
B=${1:-build/fdkcarry}
WHAT=${2:-all}
CFGS=${CFGS:-"32,4,32,8 16,4,32,8 64,4,32,8 32,2,32,8 32,8,32,8 32,4,64,4 32,4,16,16"}
OUT=${OUT:-/tmp/fdk_out}
want() { case ",$WHAT," in *",$1,"* | *",all,"*) return 0 ;; esac; return 1; }
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libfftw3f for CPU paths
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv |
    tee "$OUT/gpu.txt"
if want test; then
    echo "== unit tests"
    "$B/check_gpu_fdk" 2>&1 | tee "$OUT/check.log"
fi
if want bench; then
    echo "== fdk RabbitCT size (496 x 1248x960 -> 512^3), default configuration"
    "$B/gpu_bench" bench fdk --rabbitct-size --device gpu --repeat 5 --json |
        tee -a "$OUT/bench.jsonl"
fi
if [ "$WHAT" != all ] && want sweep; then
    echo "== backprojector configurations at RabbitCT size"
    for c in $CFGS; do
        "$B/gpu_bench" bench fdk --rabbitct-size --device gpu --repeat 3 --config "$c" --json |
            tee -a "$OUT/sweep.jsonl"
    done
fi
