#!/usr/bin/env bash
# dciodvfy_compare.sh SOURCE.dcm DERIVED.dcm
#
# The design's rule for derived instances: they pass dciodvfy (dicom3tools)
# with no error that the source did not already have. Runs dciodvfy on both
# files, keeps the lines that start with "Error", normalises what may
# legitimately differ between a source and its derived instance (UIDs,
# element values quoted as "= <...>" or "value <...> for", value lengths),
# and prints every error of DERIVED whose normalised text is not among
# SOURCE's. Warnings are ignored.
#
# Exit: 0 no new error; 1 new errors (listed on stdout); 2 usage error or a
# file missing; 77 dciodvfy not installed (the skip code of the test runner).
set -u
DCIODVFY=${DCIODVFY:-dciodvfy}
if [ $# -ne 2 ]; then
    echo "usage: $0 SOURCE.dcm DERIVED.dcm" >&2
    exit 2
fi
command -v "$DCIODVFY" > /dev/null || {
    echo "SKIP: dciodvfy not installed"
    exit 77
}
for f in "$1" "$2"; do
    [ -f "$f" ] || {
        echo "dciodvfy_compare: $f: no such file" >&2
        exit 2
    }
done

# The "Error" lines of dciodvfy's report on $1 (it writes the report on
# stderr and the IOD name on stdout; its exit code only says "some error").
errors_of() { "$DCIODVFY" "$1" 2>&1 | grep '^Error' || true; }

normalise() {
    sed -E -e 's/[0-9]+(\.[0-9]+){2,}/<UID>/g' \
        -e 's/= <[^>]*>/= <VALUE>/g' \
        -e 's/value <[^>]*> for/value <VALUE> for/g' \
        -e 's/(Length invalid for this VR) = [0-9]+/\1 = <N>/g'
}

src_errors=$(errors_of "$1")
dst_errors=$(errors_of "$2")
src_norm=$(printf '%s\n' "$src_errors" | normalise)

new=0
while IFS= read -r line; do
    [ -n "$line" ] || continue
    n=$(printf '%s\n' "$line" | normalise)
    if ! printf '%s\n' "$src_norm" | grep -Fxq -- "$n"; then
        [ $new -eq 0 ] && echo "dciodvfy: errors in $2 that $1 does not have:"
        echo "  $line"
        new=$((new + 1))
    fi
done <<< "$dst_errors"

if [ $new -gt 0 ]; then
    echo "dciodvfy_compare: $new new error(s)"
    exit 1
fi
exit 0
