#!/usr/bin/env bash
# On the GPU machine (device `run` tool): projection data over DICOM on the
# GPU. Unpacks the bundle made by
#   BUNDLE_BINS="ldct tools/mkctpd tools/dcmstat tests/check_gpu_fdk tests/check_recon \
#                tests/check_assemble_proj tests/check_fdk_rebin" BUNDLE_TAR=1 make bundle
# then runs: the CUDA FDK unit test and the reconstruction unit tests; a
# small DICOM-CT-PD series reconstructed by `ldct filter --algo fdk` on the
# GPU and on the CPU (the insert and water HU of both, and their largest
# difference); and the Mayo scanner's size (2304 views of 736x64,
# cylindrical) into 512x512x64 on the GPU (load, FDK and write seconds) and
# 8 of those slices on the CPU for the ratio. Results under $OUT.
# Usage: tests/bench/fdkdicom_device.sh ARCHIVE [what]
#   what: all (default) | test | small | mayo (comma-separated)
set -u
archive=$1
WHAT=${2:-all}
OUT=${OUT:-/tmp/fdkdicom_out}
want() { case ",$WHAT," in *",$1,"* | *",all,"*) return 0 ;; esac; return 1; }
mkdir -p "$OUT" /tmp/ldct-b
tar -C /tmp/ldct-b -xJf "$archive"
. /tmp/ldct-b/bundle/env.sh
W=/tmp/fdkdicom_work
rm -rf "$W" && mkdir -p "$W"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$OUT/gpu.txt"
if want test; then
    echo "== unit tests"
    for t in check_gpu_fdk check_fdk_rebin check_assemble_proj check_recon; do
        "$t" 2>&1 | grep -v '^<' | tail -4 | tee -a "$OUT/check.log"
    done
fi
stat_of() { dcmstat --roi "$1" --slices 4:12 "$2" | tee -a "$OUT/small.txt"; }
if want small; then
    echo "== small series (180 views of 160x16, cylindrical) -> 128x128x16, gpu and cpu"
    mkctpd --out "$W/small" 2> /dev/null
    for d in gpu cpu; do
        ldct filter --algo fdk --in "$W/small" --out "$W/small_$d" --matrix 128 --fov 160 \
            --device "$d" 2>&1 | grep -v '^<7>' | tee -a "$OUT/small.txt"
        echo "$d insert (500 HU):" && stat_of 89,45,6,6 "$W/small_$d"
        echo "$d water (0 HU):" && stat_of 37,77,6,6 "$W/small_$d"
    done
    [ -d "$W/small_gpu" ] && command -v python3 > /dev/null && python3 - "$W/small_gpu" \
        "$W/small_cpu" <<'PY' 2>&1 | tee -a "$OUT/small.txt"
import json, subprocess, sys
# Slice means of the GPU and CPU results (files in slice order), largest difference.
def slices(d):
    out = subprocess.run(["dcmstat", "--per-slice", "--json", d], capture_output=True, text=True)
    return json.loads(out.stdout)["slices"]
g, c = slices(sys.argv[1]), slices(sys.argv[2])
print("max |slice mean gpu - cpu|: %.3f HU over %d slices" %
      (max(abs(a["mean"] - b["mean"]) for a, b in zip(g, c)), len(g)))
PY
fi
if want mayo; then
    echo "== Mayo size: 2304 views of 736x64 cylindrical -> 512x512x64"
    t0=$(date +%s.%N)
    mkctpd --out "$W/mayo" --mayo 2>&1 | tee -a "$OUT/mayo.txt"
    awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "mkctpd: %.1f s\n", b - a }' |
        tee -a "$OUT/mayo.txt"
    du -sh "$W/mayo" | tee -a "$OUT/mayo.txt"
    for r in 1 2; do
        rm -rf "$W/mayo_gpu"
        ldct filter --algo fdk --in "$W/mayo" --out "$W/mayo_gpu" --device gpu 2>&1 |
            grep -v '^<7>' | tee -a "$OUT/mayo.txt"
    done
    dcmstat --roi 250,250,12,12 --slices 28:36 "$W/mayo_gpu" | tee -a "$OUT/mayo.txt"
    echo "-- cpu, 8 slices"
    ldct filter --algo fdk --in "$W/mayo" --out "$W/mayo_cpu" --slices 8 --device cpu 2>&1 |
        grep -v '^<7>' | tee -a "$OUT/mayo.txt"
fi
