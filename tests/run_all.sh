#!/usr/bin/env bash
# `make test`: unit tests, then integration tests with real DICOM peers.
# Ends with one plain "N passed, N failed" line for both together.
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
unit_out=$("$here/run_unit.sh" "$build" 2>&1); unit_rc=$?
printf '%s\n' "$unit_out"
int_out=$("$here/integration/run.sh" "$build" 2>&1 | tee /dev/stderr); int_rc=${PIPESTATUS[0]}
count() { printf '%s\n' "$1" | sed -nE "s/.* ([0-9]+) $2.*/\1/p" | tail -n 1; }
p=$(( $(count "$unit_out" passed) + $(count "$int_out" passed) ))
f=$(( $(count "$unit_out" 'failed') + $(count "$int_out" 'failed') ))
echo "$p passed, $f failed"
[ $unit_rc -eq 0 ] && [ $int_rc -eq 0 ]
