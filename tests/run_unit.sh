#!/usr/bin/env bash
# Runs every Check unit test binary in BUILD/tests; prints each one's
# summary and a closing "N passed, N failed" line; exit 1 on any failure.
set -u
build=${1:-build}
passed=0 failed=0
for t in "$build"/tests/check_*; do
    [ -x "$t" ] || continue
    out=$("$t" 2>&1)
    rc=$?
    summary=$(printf '%s\n' "$out" | grep -E '^[0-9]+%: Checks:' | tail -n 1)
    checks=$(printf '%s' "$summary" | sed -E 's/.*Checks: ([0-9]+).*/\1/')
    fails=$(printf '%s' "$summary" | sed -E 's/.*Failures: ([0-9]+), Errors: ([0-9]+).*/\1+\2/')
    checks=${checks:-0}
    fails=$(( ${fails:-0} ))
    if [ $rc -ne 0 ] && [ "$fails" -eq 0 ]; then fails=1; fi
    printf '%-28s %s\n' "$(basename "$t")" "${summary:-exit $rc}"
    [ $rc -ne 0 ] && printf '%s\n' "$out" | grep -E ':[EF]:' | sed 's/^/    /'
    printf '%s\n' "$out" | grep -E '^SKIP' | sed 's/^/    /'
    passed=$((passed + checks - fails))
    failed=$((failed + fails))
done
echo "unit: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
