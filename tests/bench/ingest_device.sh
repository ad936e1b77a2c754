#!/usr/bin/env bash
# On the GPU machine (device `run` tool), a server with its own disks:
# unpacks the bundle archive made by `BUNDLE_BINS="ldctd ldct tools/mkseries
# tools/flush_floor" BUNDLE_TAR=1 make bundle`, lists the file systems,
# and runs the ingest benchmark (tests/bench/ingest.sh) and the flush cost
# (tests/bench/flush_floor.sh) with the spool on DIR (default /tmp).
# Usage: tests/bench/ingest_device.sh ARCHIVE [N] [ROUNDS] [DIR...]
set -u
archive=$1 n=${2:-500} rounds=${3:-5}
shift 3 2>/dev/null || shift $#
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p /tmp/ldct-b
tar -C /tmp/ldct-b -xJf "$archive"
. /tmp/ldct-b/bundle/env.sh
echo "== file systems"
findmnt -D 2>/dev/null | grep -v -E 'tmpfs|overlay|proc|sys|cgroup' | head -20
for dir in "${@:-/tmp}"; do
    echo "== spool in $dir"
    TMPDIR=$dir bash "$here/ingest.sh" /tmp/ldct-b/bundle/bin "$n" "$rounds" 2>&1 | tail -n 5
    TMPDIR=$dir FLUSH_FLOOR=/tmp/ldct-b/bundle/bin/flush_floor bash "$here/flush_floor.sh" "$n" "$rounds"
done
