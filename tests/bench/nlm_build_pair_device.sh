#!/bin/sh
# Runs on the GPU machine (device `run` tool): two builds of the NLM
# kernels against each other at the default configuration. ARCHIVE is a
# tar.xz of base/ and cand/, each with the build's check_gpu_nlm,
# check_gpu_anlm, gpu_bench and gpu_nlm_raw (stripped; one archive, so xz
# stores the common parts once). Runs the candidate's NLM unit tests,
# compares the two builds' outputs bit for bit on random volumes of odd and
# of benchmark size, then benchmarks 512^3 S=5 P=2 alternately (ROUNDS
# rounds of 5 repeats each). Results under $OUT.
# CASES: the kernels and windows compared bit for bit, as CFG:S:P
# (CFG: an LDCT_NLM3D_CFG number, or "default"); default "default:5:2".
# Usage: [CASES="40:5:2 27:6:1 ..."] nlm_build_pair_device.sh ARCHIVE [ROUNDS]
A=${1:?usage: nlm_build_pair_device.sh ARCHIVE [ROUNDS]}
ROUNDS=${2:-3}
OUT=${OUT:-/tmp/pair_out}
mkdir -p /tmp/pair "$OUT"
tar -xJf "$A" -C /tmp/pair || exit 1
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
echo "== candidate check_gpu_anlm, check_gpu_nlm"
/tmp/pair/cand/check_gpu_anlm 2>&1 | tail -3 | tee "$OUT/anlm.log"
/tmp/pair/cand/check_gpu_nlm 2>&1 | tail -3 | tee "$OUT/check.log"
echo "== bit-identity base vs candidate"
for shape in "97 83 61" "61 113 29" "512 512 40" "512 512 512"; do
    set -- $shape
    python3 -c "
import math, random, struct, sys
nx, ny, nz = $1, $2, $3
def value(x, y, z, g):
    return 1000 + 300 * (y % 7 == 0) + 80 * math.sin(x / 9.0 + z / 5.0) + g
try:
    import numpy as np
    z, y, x = np.indices((nz, ny, nx))
    g = np.random.default_rng(7).normal(0, 20, (nz, ny, nx))
    v = 1000 + 300 * ((y % 7) == 0) + 80 * np.sin(x / 9.0 + z / 5.0) + g
    v.astype(np.float32).tofile('/tmp/in.raw')
except ImportError:
    if nx * ny * nz > 20000000:
        sys.exit(3)  # too large without numpy
    random.seed(7)
    with open('/tmp/in.raw', 'wb') as f:
        for z in range(nz):
            f.write(struct.pack('%df' % (nx * ny), *[value(x, y, z, random.gauss(0, 20))
                                                      for y in range(ny) for x in range(nx)]))
"
    rc=$?
    if [ $rc -eq 3 ]; then
        echo "$shape: skipped (no numpy)" | tee -a "$OUT/identity.txt"
        continue
    fi
    [ $rc -eq 0 ] || exit 1
    for case in ${CASES:-default:5:2}; do
        cfg=${case%%:*} win=${case#*:}
        [ "$cfg" = default ] && cfg=
        for b in base cand; do
            env -u LDCT_NLM3D_CFG ${cfg:+LDCT_NLM3D_CFG=$cfg} /tmp/pair/$b/gpu_nlm_raw nlm3d /tmp/in.raw /tmp/out_$b.raw \
                $1 $2 $3 ${win%:*} ${win#*:} 25 1 gpu >/dev/null || exit 1
        done
        if cmp -s /tmp/out_base.raw /tmp/out_cand.raw; then
            echo "$shape $case: identical" | tee -a "$OUT/identity.txt"
        else
            echo "$shape $case: DIFFERENT" | tee -a "$OUT/identity.txt"
            cmp -l /tmp/out_base.raw /tmp/out_cand.raw | wc -l
        fi
    done
done
echo "== bench 512^3 S=5 P=2"
r=0
while [ $r -lt "$ROUNDS" ]; do
    for b in base cand; do
        /tmp/pair/$b/gpu_bench bench nlm3d --size 512x512x512 --search-radius 5 \
            --patch-radius 2 --device gpu --repeat 5 --json | sed "s/^{/{\"build\":\"$b\",/" |
            tee -a "$OUT/bench3.jsonl"
    done
    r=$((r + 1))
done
