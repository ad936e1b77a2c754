#!/usr/bin/env bash
# Runs every tests/integration/t_*.sh (or those named) against BUILD; each
# exits 0 (pass), 77 (skip) or anything else (fail). Prints a closing
# "N passed, N failed, N skipped" line and exits 1 on any failure.
set -u
build=${1:-build}
shift || true
here=$(cd "$(dirname "$0")" && pwd)
export BUILD=$build
# A slower build (LDCT_TEST_SLOWDOWN, see lib.sh) gets as many times the
# 600 s each test may take.
slowdown=${LDCT_TEST_SLOWDOWN:-1}
[[ $slowdown =~ ^[1-9][0-9]{0,2}$ ]] || {
    echo "LDCT_TEST_SLOWDOWN must be a whole number from 1 to 999" >&2
    exit 2
}
passed=0 failed=0 skipped=0 failures=""
tests=("$@")
[ ${#tests[@]} -gt 0 ] || tests=("$here"/t_*.sh)
for t in "${tests[@]}"; do
    name=$(basename "$t" .sh)
    start=$(date +%s)
    out=$(timeout $((600 * slowdown)) bash "$t" 2>&1)
    rc=$?
    secs=$(( $(date +%s) - start ))
    case $rc in
        0) passed=$((passed + 1)); echo "PASS $name (${secs}s)" ;;
        77) skipped=$((skipped + 1)); echo "SKIP $name: $(printf '%s\n' "$out" | grep SKIP | head -n1)" ;;
        *) failed=$((failed + 1)); failures="$failures $name"; echo "FAIL $name (${secs}s, exit $rc)"
           printf '%s\n' "$out" | tail -n 40 | sed 's/^/    /' ;;
    esac
done
[ -n "$failures" ] && echo "failed:$failures"
echo "integration: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
