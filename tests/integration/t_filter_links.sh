#!/usr/bin/env bash
# ldct filter follows links under --in (a folder of links to a series is
# read) but reads each folder once: links back to a folder above them
# (two links to ".", one to its parent) made 2^40 paths before the
# kernel's ELOOP stopped them, and the filter never ended.
. "$(dirname "$0")/lib.sh"
"$MKSERIES" --out "$T/series" --rows 32 --cols 32 --slices 4 --noise 20 > /dev/null || fail "mkseries"
mkdir -p "$T/in/sub"
ln -s "$T/series" "$T/in/linked"
ln -s . "$T/in/a"
ln -s . "$T/in/b"
ln -s .. "$T/in/sub/up"
timeout $((60 * SLOWDOWN)) "$LDCT" filter --algo nlm3d --search-radius 2 --in "$T/in" --out "$T/out" \
    --device cpu > "$T/filter.out" 2> "$T/filter.err"
rc=$?
[ $rc != 124 ] || fail "ldct filter did not end on a folder with links to itself"
[ $rc = 0 ] || fail "ldct filter exited $rc: $(cat "$T/filter.err")"
[ "$(ls "$T/out" | wc -l)" = 4 ] || fail "expected 4 derived files, got $(ls "$T/out" | wc -l)"
[ "$(grep -c ' -> ' "$T/filter.out")" = 1 ] || fail "expected one series: $(cat "$T/filter.out")"
