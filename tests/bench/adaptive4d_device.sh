#!/bin/sh
# Runs on the GPU machine (device `run` tool): adaptive4d unit tests (CUDA
# against the CPU reference), then the benchmarks of issue 8, JSON lines
# under $OUT. Usage: tests/bench/adaptive4d_device.sh [DIR] [what]
#   DIR: holds check_gpu_adaptive4d, gpu_bench and libfftw3f.so.3 (the CPU
#        reference of the tests needs FFTW; default build/a4dcarry)
#   what: all (default) | test | bench | paper | t100 (several, comma-separated;
#         all = test,bench,paper,t100)
# bench: a small size on GPU and CPU, both back ends forced at two small
# sizes, 256x256x128x20 on the GPU (auto back end, 3 runs);
# t100: 100 time points (issue 8: slabs along t): 256x256x64x100 with the
# automatic budget, then with a 4 GB budget that forces slabs along t;
# paper: the paper's 512x512x445x20 once (input and output take 19 GB of
# host memory; target <= 30 s end to end).
B=${1:-build/a4dcarry}
WHAT=${2:-all}
OUT=${OUT:-/tmp/a4d_out}
want() { case ",$WHAT," in *",$1,"* | *",all,"*) return 0 ;; esac; return 1; }
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$B${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" # libfftw3f for the reference
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv |
    tee "$OUT/gpu.txt"
if want test; then
    echo "== unit tests"
    "$B/check_gpu_adaptive4d" 2>&1 | tee "$OUT/check.log"
    echo "== quality phantom on the GPU (adaptive4d vs nlm3d)"
    [ -x "$B/gpu_a4d_quality" ] && "$B/gpu_a4d_quality" --device gpu 2>&1 | tee "$OUT/quality.txt"
fi
if want bench; then
    echo "== adaptive4d 64x64x32x10 on gpu and cpu"
    "$B/gpu_bench" bench adaptive4d --size 64x64x32x10 --device gpu,cpu --repeat 3 --json |
        tee -a "$OUT/bench.jsonl"
    echo "== adaptive4d back ends: fft and spatial at 64x64x32x10 and 128x128x64x10"
    for size in 64x64x32x10 128x128x64x10; do
        for be in fft spatial; do
            "$B/gpu_bench" bench adaptive4d --size $size --device gpu --backend $be --repeat 1 \
                --json 2>&1 | tee -a "$OUT/backends.jsonl"
        done
    done
    echo "== adaptive4d 256x256x128x20 on gpu"
    "$B/gpu_bench" bench adaptive4d --size 256x256x128x20 --device gpu --repeat 3 --json |
        tee -a "$OUT/bench.jsonl"
fi
if want paper; then
    echo "== adaptive4d 512x512x445x20 (the paper's dataset size) on gpu, once"
    "$B/gpu_bench" bench adaptive4d --size 512x512x445x20 --device gpu --repeat 1 --warmup 0 \
        --json | tee -a "$OUT/bench.jsonl"
fi
if want t100; then
    echo "== adaptive4d 256x256x64x100 on gpu (automatic budget, then 4 GB: slabs along t)"
    "$B/gpu_bench" bench adaptive4d --size 256x256x64x100 --device gpu --repeat 1 --warmup 0 \
        --json | tee -a "$OUT/bench.jsonl"
    "$B/gpu_bench" bench adaptive4d --size 256x256x64x100 --device gpu --repeat 1 --warmup 0 \
        --mem-budget 4096 --json | tee -a "$OUT/bench.jsonl"
fi
