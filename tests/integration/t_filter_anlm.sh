#!/usr/bin/env bash
# ldct filter --algo anlm: a mkseries series (lung ROI around -800 HU, so
# negative CT numbers must be filtered) comes out with its ROI noise at
# least halved and its ROI mean kept within 5 HU, every slice derived, a
# DerivationDescription naming the adaptive NLM parameters, and output that
# passes dciodvfy with no error its source did not have. A 2-slice series
# is filtered too.
. "$(dirname "$0")/lib.sh"
DCMSTAT="$ROOT/$BUILD/tools/dcmstat"
"$MKSERIES" --out "$T/in" --rows 64 --cols 64 --slices 10 --thickness 1 --noise 20 > /dev/null ||
    fail "mkseries"
"$LDCT" filter --algo anlm --in "$T/in" --out "$T/out" --device cpu > "$T/filter.out" 2> "$T/filter.err" ||
    fail "ldct filter: $(cat "$T/filter.err")"
grep -q "anlm on cpu" "$T/filter.out" || fail "anlm did not run: $(cat "$T/filter.out")"
[ "$(ls "$T/out" | wc -l)" = 10 ] || fail "expected 10 files, got $(ls "$T/out" | wc -l)"
stat_of() { "$DCMSTAT" --roi 16,25,10,11 --json "$@" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["mean"], d["std"])'; }
read -r m0 s0 < <(stat_of "$T"/in/*.dcm)
read -r m1 s1 < <(stat_of "$T"/out/*.dcm)
note "lung ROI: source mean $m0 std $s0, anlm mean $m1 std $s1"
python3 -c "import sys; sys.exit(0 if $m0 < -100 else 1)" || fail "ROI is not negative HU: $m0"
python3 -c "import sys; sys.exit(0 if $s1 <= $s0 / 2 else 1)" || fail "noise not halved: $s0 -> $s1"
python3 -c "import sys; sys.exit(0 if abs($m1 - $m0) <= 5 else 1)" || fail "mean moved: $m0 -> $m1"
f=$(ls "$T"/out/*.dcm | head -1)
dcmdump -q +L +P 0008,2111 "$f" | grep -q "adaptive non-local means 3D, search radius 5, patch radii 1 and 2" ||
    fail "DerivationDescription: $(dcmdump -q +P 0008,2111 "$f")"
bash "$(dirname "$0")/dciodvfy_compare.sh" "$T/in/IMG0001.dcm" "$f" || fail "dciodvfy: new errors"
# A 2-slice series: anlm's search window along z stays below the mirror's
# period (at S = 5 it compared each patch with itself, and the series came
# back unchanged); the summary names the noise, not an h anlm does not use.
"$MKSERIES" --out "$T/in2" --rows 64 --cols 64 --slices 2 --thickness 1 --noise 20 > /dev/null ||
    fail "mkseries (2 slices)"
"$LDCT" filter --algo anlm --in "$T/in2" --out "$T/out2" --device cpu > "$T/f2.out" 2> "$T/f2.err" ||
    fail "ldct filter (2 slices): $(cat "$T/f2.err")"
grep -qE "anlm on cpu, noise [0-9.]+;" "$T/f2.out" || fail "summary: $(cat "$T/f2.out")"
read -r m0 s0 < <(stat_of "$T"/in2/*.dcm)
read -r m1 s1 < <(stat_of "$T"/out2/*.dcm)
note "2 slices, lung ROI: std $s0 -> $s1"
python3 -c "import sys; sys.exit(0 if $s1 <= 0.75 * $s0 else 1)" || fail "2 slices not filtered: $s0 -> $s1"
