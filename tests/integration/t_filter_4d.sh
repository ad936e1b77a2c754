#!/usr/bin/env bash
# ldct filter on a 4D (time-resolved) series: the same slice positions at
# six time points (TriggerTime) are assembled into one 4D volume, `auto`
# picks adaptive4d, every instance gets a derived instance that keeps its
# time point, noise in a uniform region of one time point drops by at least
# half, dciodvfy finds no new error, and a series with a missing time point
# is refused with the reason.
. "$(dirname "$0")/lib.sh"
DCMSTAT="$ROOT/$BUILD/tools/dcmstat"
"$MKSERIES" --out "$T/in" --rows 48 --cols 48 --slices 6 --thickness 2 --times 6 --noise 30 \
    > /dev/null || fail "mkseries"
"$LDCT" filter --algo auto --in "$T/in" --out "$T/out" --device cpu > "$T/filter.out" \
    2> "$T/filter.err" || fail "ldct filter: $(cat "$T/filter.err")"
grep -q "adaptive4d on cpu" "$T/filter.out" || fail "auto did not pick adaptive4d: $(cat "$T/filter.out")"
grep -q "48x48x6 x 6 time points" "$T/filter.out" || fail "not assembled as 6x6: $(cat "$T/filter.out")"
[ "$(ls "$T/out" | wc -l)" = 36 ] || fail "expected 36 files, got $(ls "$T/out" | wc -l)"
tag() { dcmdump -q +P "$1" "$2" | sed -E 's/.*\[([^]]*)\].*/\1/'; }
# Derived instances of time point 100 ms (t = 2) into one folder, by their
# referenced source's TriggerTime.
mkdir -p "$T/d2" "$T/s2"
for f in "$T"/out/*.dcm; do
    [ "$(tag 0018,1060 "$f")" = 100 ] && cp "$f" "$T/d2/"
done
for f in "$T"/in/*.dcm; do
    [ "$(tag 0018,1060 "$f")" = 100 ] && cp "$f" "$T/s2/"
done
[ "$(ls "$T/d2" | wc -l)" = 6 ] || fail "expected 6 derived slices at 100 ms, got $(ls "$T/d2" | wc -l)"
grep -q "adaptive4d" <(dcmdump -q +P 0008,2111 "$(ls "$T"/d2/*.dcm | head -1)") ||
    fail "DerivationDescription does not name adaptive4d"
std_of() { "$DCMSTAT" --roi 13,20,5,5 --json "$1"/*.dcm | python3 -c 'import json,sys; print(json.load(sys.stdin)["std"])'; }
s0=$(std_of "$T/s2")
s1=$(std_of "$T/d2")
note "lung ROI std at 100 ms: source $s0, derived $s1"
python3 -c "import sys; sys.exit(0 if $s1 <= $s0 / 2 else 1)" || fail "noise not halved: $s0 -> $s1"
bash "$(dirname "$0")/dciodvfy_compare.sh" "$(ls "$T"/s2/*.dcm | head -1)" "$(ls "$T"/d2/*.dcm | head -1)" ||
    fail "dciodvfy: new errors"
rm "$T/in/IMG0020.dcm"
"$LDCT" filter --algo auto --in "$T/in" --out "$T/bad" --device cpu > /dev/null 2> "$T/e" &&
    fail "a 4D series with a missing time point was processed"
grep -q "every position needs the same time points" "$T/e" || fail "no reason: $(cat "$T/e")"
exit 0
