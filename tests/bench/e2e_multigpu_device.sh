#!/usr/bin/env bash
# On a GPU machine with two or more GPUs (device tool, nvidia-h200-x2):
# unpacks the bundle archive made by `BUNDLE_BINS="ldctd ldct tools/mkseries"
# BUNDLE_TAR=1 make bundle` and runs tests/bench/e2e_multigpu.sh twice: 4
# series with `algorithm = auto` (nlm3d at 1 mm) and 6 with anlm, each
# first with one worker per GPU and then with gpu:0 alone. Results under $OUT.
# Usage: tests/bench/e2e_multigpu_device.sh ARCHIVE
set -u -o pipefail
archive=$1
OUT=${OUT:-/tmp/e2e_mgpu_out}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT" /tmp/ldct-b
tar -C /tmp/ldct-b -xJf "$archive"
. /tmp/ldct-b/bundle/env.sh
nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
rc=0
echo "== 4 series 512x512x200, 1 mm, auto (nlm3d)"
bash "$here/e2e_multigpu.sh" /tmp/ldct-b/bundle/bin 4 512x512x200 1 auto 2> "$OUT/nlm3d.err" |
    tee "$OUT/nlm3d.jsonl" || rc=1
echo "== 6 series 512x512x200, 1 mm, anlm"
bash "$here/e2e_multigpu.sh" /tmp/ldct-b/bundle/bin 6 512x512x200 1 anlm 2> "$OUT/anlm.err" |
    tee "$OUT/anlm.jsonl" || rc=1
grep -v '^mkseries' "$OUT"/*.err | tail -n 20
exit $rc
