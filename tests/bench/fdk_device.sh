#!/bin/sh
# Runs on the GPU machine (device `run` tool): FDK unit tests (CUDA against
# the CPU reference), then the FDK benchmarks of issue 5 at RabbitCT size,
# JSON lines under $OUT. Usage: tests/bench/fdk_device.sh [DIR] [what]
#   DIR: holds check_gpu_fdk and gpu_bench (default build/fdkcarry)
#   what: all (default) | test | bench | sweep | tune (several, comma-separated;
#         sweep and tune only when named)
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
if [ "$WHAT" != all ] && want tune; then
    echo "== genetic-algorithm tuner at RabbitCT size, then the benchmark with its result"
    rm -f "$OUT/fdk-tune.cache"
    "$B/gpu_bench" tune fdk --rabbitct-size --device gpu --cache "$OUT/fdk-tune.cache" --json |
        tee -a "$OUT/tune.jsonl"
    cfg=$(sed -n 's/.*"tuned_config":"\([0-9,]*\)".*/\1/p' "$OUT/tune.jsonl" | tail -n 1)
    [ -n "$cfg" ] && "$B/gpu_bench" bench fdk --rabbitct-size --device gpu --repeat 5 \
        --config "$cfg" --json | tee -a "$OUT/bench.jsonl"
fi
