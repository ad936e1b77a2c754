#!/usr/bin/env bash
# ldct filter --progress: a series that takes longer than the interval says
# how far it is on stderr that often ("filtering 52%, 2 s so far"), with
# counted percentages that rise; --progress 0 says nothing; a value that is
# no whole number of seconds in 0..3600 is a usage error.
. "$(dirname "$0")/lib.sh"
# About 6 s on one thread (the length must not depend on the cores):
# 160 x 160 x 64 voxels, a 23^3 search window.
"$MKSERIES" --out "$T/in" --rows 160 --cols 160 --slices 64 --thickness 1 --noise 20 > /dev/null ||
    fail mkseries
slow() { OMP_NUM_THREADS=1 "$LDCT" filter --algo nlm3d --search-radius 11 --in "$T/in" --device cpu "$@"; }
slow --out "$T/p1" --progress 1 > /dev/null 2> "$T/e1" || fail "--progress 1: $(cat "$T/e1")"
lines=$(grep -cE '^  (reading|filtering|writing) [0-9]+%, [0-9]+ s so far' "$T/e1")
[ "$lines" -ge 2 ] || fail "--progress 1 on a series of seconds: $lines progress lines: $(cat "$T/e1")"
grep -oE '^  filtering [0-9]+%' "$T/e1" | grep -oE '[0-9]+' > "$T/pct"
[ "$(wc -l < "$T/pct")" -ge 2 ] && sort -n -c "$T/pct" 2> /dev/null || fail "percentages do not rise: $(tr '\n' ' ' < "$T/pct")"
[ "$(ls "$T/p1" | wc -l)" = 64 ] || fail "--progress 1: $(ls "$T/p1" | wc -l) files"
slow --out "$T/p0" --progress 0 > /dev/null 2> "$T/e0" || fail "--progress 0: $(cat "$T/e0")"
grep -qE 'so far' "$T/e0" && fail "--progress 0 printed progress: $(cat "$T/e0")"
[ "$(ls "$T/p0" | wc -l)" = 64 ] || fail "--progress 0: $(ls "$T/p0" | wc -l) files"
for v in -1 3601 1.5 x "" " 5" +5; do
    "$LDCT" filter --in "$T/in" --out "$T/x" --progress "$v" > /dev/null 2> "$T/e"
    [ $? = 2 ] || fail "--progress '$v' not a usage error"
    grep -qF "ldct filter: --progress $v: a whole number of seconds, 0..3600" "$T/e" ||
        fail "--progress '$v': $(cat "$T/e")"
done
