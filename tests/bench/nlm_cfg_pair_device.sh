#!/bin/sh
# Runs on the GPU machine (device `run` tool): a candidate nlm3d
# configuration against the default. Unpacks ARCHIVE (a tar.xz of
# check_gpu_nlm, check_gpu_anlm, gpu_bench and gpu_nlm_raw, stripped), runs
# the NLM unit tests with the candidate, compares the two configurations'
# outputs bit for bit on a random 97x83x61 volume and on a 512^2 x 40
# slab, then benchmarks 512^3 S=5 P=2 alternately (ROUNDS rounds of 5
# repeats each). Usage: nlm_cfg_pair_device.sh ARCHIVE BASE CAND [ROUNDS]
A=$1
BASE=${2:-40}
CAND=${3:?usage: nlm_cfg_pair_device.sh ARCHIVE BASE CAND [ROUNDS]}
ROUNDS=${4:-3}
OUT=${OUT:-/tmp/pair_out}
B=/tmp/pair_bin
mkdir -p "$B" "$OUT"
tar -xJf "$A" -C "$B" || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
echo "== check_gpu_anlm"
"$B/check_gpu_anlm" 2>&1 | tail -4 | tee "$OUT/anlm.log"
echo "== check_gpu_nlm, cfg $CAND"
LDCT_NLM3D_CFG=$CAND "$B/check_gpu_nlm" 2>&1 | tail -4 | tee "$OUT/check.log"
echo "== bit-identity cfg $BASE vs $CAND"
for shape in "97 83 61" "512 512 40"; do
    set -- $shape
    python3 -c "
import random, struct, sys
random.seed(7)
n = $1 * $2 * $3
sys.stdout.buffer.write(struct.pack('%df' % n, *[1000 + 300 * ((i // $1) % 7 == 0) + random.gauss(0, 20) for i in range(n)]))
" > /tmp/in.raw
    for cfg in $BASE $CAND; do
        LDCT_NLM3D_CFG=$cfg "$B/gpu_nlm_raw" nlm3d /tmp/in.raw /tmp/out$cfg.raw $1 $2 $3 5 2 25 1 gpu
    done
    if cmp -s /tmp/out$BASE.raw /tmp/out$CAND.raw; then
        echo "$shape: identical" | tee -a "$OUT/identity.txt"
    else
        echo "$shape: DIFFERENT" | tee -a "$OUT/identity.txt"
        cmp -l /tmp/out$BASE.raw /tmp/out$CAND.raw | wc -l
    fi
done
echo "== bench 512^3 S=5 P=2"
r=0
while [ $r -lt "$ROUNDS" ]; do
    for cfg in $BASE $CAND; do
        LDCT_NLM3D_CFG=$cfg "$B/gpu_bench" bench nlm3d --size 512x512x512 --search-radius 5 \
            --patch-radius 2 --device gpu --repeat 5 --json | sed "s/^{/{\"cfg\":$cfg,/" |
            tee -a "$OUT/bench3.jsonl"
    done
    r=$((r + 1))
done
