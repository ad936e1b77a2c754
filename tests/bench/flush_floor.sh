#!/usr/bin/env bash
# What durability costs on this disk, without DICOM: builds
# tests/bench/flush_floor.c and runs each variant ROUNDS times alternately
# (N instances of 525 KB each), then prints the medians, and the disk's raw
# sequential write rate (dd, O_DIRECT, 512 KiB blocks) for the floor.
# FLUSH_FLOOR names a prebuilt binary (no compiler on the GPU machine).
# usage: tests/bench/flush_floor.sh [N] [ROUNDS]
set -eu
n=${1:-500} rounds=${2:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
t=$(mktemp -d "${TMPDIR:-/tmp}/ldct-flush-XXXXXX")
trap 'rm -rf "$t"' EXIT
if [ -n "${FLUSH_FLOOR:-}" ]; then
    cp "$FLUSH_FLOOR" "$t/flush_floor"
else
    cc -O2 -o "$t/flush_floor" "$root/tests/bench/flush_floor.c" -lsqlite3 -lpthread
fi
findmnt -n -o FSTYPE,SOURCE,OPTIONS -T "$t" | awk '{print "disk: " $0}'
variants="write-only serial tmpfile overlapped"
for r in $(seq 1 "$rounds"); do
    for v in $variants; do
        rm -rf "$t/d" && mkdir "$t/d"
        "$t/flush_floor" "$v" "$n" "$t/d"
    done
done > "$t/runs"
for v in $variants; do
    awk -v v="$v" '$1 == v {print $2}' "$t/runs" | sort -g |
        awk -v v="$v" '{a[NR]=$1} END {printf "%-11s median %.3f ms/instance (min %.3f, max %.3f)\n", v, a[int((NR+1)/2)], a[1], a[NR]}'
done
dd if=/dev/zero of="$t/dd" bs=512k count=512 oflag=direct conv=fsync 2>&1 | tail -n1
