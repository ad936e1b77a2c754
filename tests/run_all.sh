#!/usr/bin/env bash
# `make test`: unit tests, then integration tests with real DICOM peers.
# Ends with one plain "N passed, N failed" line for both together.
set -u
build=${1:-build}
here=$(cd "$(dirname "$0")" && pwd)
unit_out=$("$here/run_unit.sh" "$build" 2>&1); unit_rc=$?
printf '%s\n' "$unit_out"
# Shown as it runs and kept for the count (tee to a file: /dev/stderr would
# reopen, and so truncate, a log file that stderr is redirected to).
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$here/integration/run.sh" "$build" 2>&1 | tee "$log"; int_rc=${PIPESTATUS[0]}
int_out=$(cat "$log")
count() { printf '%s\n' "$1" | sed -nE "s/.* ([0-9]+) $2.*/\1/p" | tail -n 1; }
p=$(( $(count "$unit_out" passed) + $(count "$int_out" passed) ))
f=$(( $(count "$unit_out" 'failed') + $(count "$int_out" 'failed') ))
echo "$p passed, $f failed"
[ $unit_rc -eq 0 ] && [ $int_rc -eq 0 ]
