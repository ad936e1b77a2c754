#!/bin/sh
# Runs on the GPU machine (device `run` tool): NLM unit tests (CUDA against
# the CPU reference), then the NLM benchmarks of issue 3, JSON lines under
# $OUT. Usage: tests/bench/nlm_device.sh [DIR-with-check_gpu_nlm-and-gpu_bench] [what]
#   what: all (default) | test | test3 | bench3 | bench2 | sweep | ncu
#         (several, comma-separated: test,bench3,bench2)
#   CFGS: nlm3d kernels to test and bench, by LDCT_NLM3D_CFG number
#         (default all four: 7 the v2 kernel, 27 v3, 37 v6, 40 v8, the
#         default; see cfg3_pick in gpu/nlm.cu)
#   NCU_CFGS: configurations profiled by `ncu` (one nlm3d launch, 256^3)
B=${1:-build/gpucarry}
WHAT=${2:-all}
CFGS=${CFGS:-7 27 37 40}
NCU_CFGS=${NCU_CFGS:-40}
OUT=${OUT:-/tmp/nlm_out}
NCU=${NCU:-$(command -v ncu || echo /usr/local/cuda/bin/ncu)}
want() { case ",$WHAT," in *",$1,"* | *",all,"*) return 0 ;; esac; return 1; }
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,memory.total \
    --format=csv | tee "$OUT/gpu.txt"
if want test; then
    echo "== unit tests"
    "$B/check_gpu_nlm" 2>&1 | tee "$OUT/check.log"
fi
if want test3; then
    echo "== unit tests per nlm3d configuration"
    for cfg in $CFGS; do
        echo "cfg $cfg"
        LDCT_NLM3D_CFG=$cfg "$B/check_gpu_nlm" 2>&1 | tail -3 | tee -a "$OUT/check3.log"
    done
fi
if want bench3 || want sweep; then
    echo "== nlm3d 512^3 S=5 P=2, block configurations $CFGS"
    for cfg in $CFGS; do
        LDCT_NLM3D_CFG=$cfg "$B/gpu_bench" bench nlm3d --size 512x512x512 --search-radius 5 \
            --patch-radius 2 --device gpu --repeat 5 --json | sed "s/^{/{\"cfg\":$cfg,/" |
            tee -a "$OUT/bench3.jsonl"
    done
fi
if want bench2 || want sweep; then
    echo "== nlm2d 512x512x500 S=10 P=3"
    "$B/gpu_bench" bench nlm2d --size 512x512x500 --search-radius 10 --patch-radius 3 \
        --device gpu --repeat 5 --json | tee -a "$OUT/bench2.jsonl"
fi
if [ "$WHAT" = sweep ]; then # not part of all
    echo "== radii sweep"
    "$B/gpu_bench" bench nlm2d --size 512x512x100 --search-radius 5,10,15 --patch-radius 1,3,5 \
        --device gpu --repeat 3 --json | tee -a "$OUT/sweep.jsonl"
    "$B/gpu_bench" bench nlm3d --size 256x256x256 --search-radius 2,3,5 --patch-radius 1,2 \
        --device gpu --repeat 3 --json | tee -a "$OUT/sweep.jsonl"
fi
if [ "$WHAT" != all ] && want ncu; then # not part of all
    echo "== ncu, nlm3d 256^3 S=5 P=2, configurations $NCU_CFGS"
    for cfg in $NCU_CFGS; do
        LDCT_NLM3D_CFG=$cfg "$NCU" --clock-control none --kernel-name regex:nlm3d \
            --launch-count 1 --section SpeedOfLight --section WarpStateStats \
            --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis \
            --section ComputeWorkloadAnalysis "$B/gpu_bench" bench nlm3d --size 256x256x256 \
            --search-radius 5 --patch-radius 2 --device gpu --repeat 1 --warmup 0 \
            >"$OUT/ncu_$cfg.txt" 2>&1
        grep -E "Duration|Registers Per|Achieved Occupancy|Issue Slots Busy|Issued Ipc|\
Compute \(SM\) Throughput|Memory Throughput|L1/TEX Hit|L2 Hit|Stall|Warp Cycles Per Issued|\
Mem Busy|Max Bandwidth|Executed Ipc|SM Busy" "$OUT/ncu_$cfg.txt" | sed "s/^/cfg $cfg: /"
    done
fi
