#!/usr/bin/env bash
# On the GPU machine (device `run` tool): unpacks the bundle archive made by
# `BUNDLE_TAR=1 make bundle`, runs the GPU unit tests, then the end-to-end
# latency benchmark (tests/bench/e2e.sh) with ldctd on the GPU: a 1 mm
# series (nlm3d) and a 2.5 mm one (nlm2d). Results under $OUT.
# Usage: tests/bench/e2e_device.sh ARCHIVE [RUNS]
set -u
archive=$1
runs=${2:-3}
OUT=${OUT:-/tmp/e2e_out}
mkdir -p "$OUT" /tmp/ldct-b
tar -C /tmp/ldct-b -xJf "$archive"
. /tmp/ldct-b/bundle/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
echo "== GPU unit tests"
[ -x /tmp/ldct-b/bundle/bin/check_gpu_nlm ] && check_gpu_nlm 2>&1 | tail -3 | tee "$OUT/check.log"
[ -x /tmp/ldct-b/bundle/bin/check_process ] && check_process 2>&1 | grep -v '^<' | tail -3 | tee -a "$OUT/check.log"
echo "== e2e 512x512x200, 1 mm (nlm3d)"
bash "$(dirname "$0")/e2e.sh" /tmp/ldct-b/bundle/bin auto "$runs" 512x512x200 1 2> "$OUT/e2e3d.err" |
    tee "$OUT/e2e3d.jsonl"
echo "== e2e 512x512x200, 2.5 mm (nlm2d)"
bash "$(dirname "$0")/e2e.sh" /tmp/ldct-b/bundle/bin auto "$runs" 512x512x200 2.5 2> "$OUT/e2e2d.err" |
    tee "$OUT/e2e2d.jsonl"
tail -5 "$OUT/e2e3d.err"
