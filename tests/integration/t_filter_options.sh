#!/usr/bin/env bash
# ldct filter checks its numeric options with the bounds of the same [rule]
# keys: a value that is not a number, out of range or NaN is a usage error
# (exit 2, the option and the bounds named, nothing written), never a
# silently unfiltered series (--strength abc used to give strength 0 and an
# unfiltered "derived" series with exit 0). --uid-root is checked as the
# configuration's uid_root, --suffix as a rule's
# series_description_suffix. --h 0 means "from the noise", as in a rule. --help prints the usage on stdout and exits 0.
# --distance-cutoff (0..80, default 4) changes the pixels and is reported.
# A series without noise (h from the noise would be 0) is said to be left
# as it is. Images too small for the noise estimate get a message that says
# so.
. "$(dirname "$0")/lib.sh"
DCMSTAT="$ROOT/$BUILD/tools/dcmstat"
"$MKSERIES" --out "$T/in" --rows 32 --cols 32 --slices 4 --thickness 1 --noise 20 > /dev/null ||
    fail "mkseries"
refused() { # OPTION VALUE EXPECTED-MESSAGE
    rm -rf "$T/out"
    "$LDCT" filter --algo nlm3d --in "$T/in" --out "$T/out" --device cpu "$1" "$2" \
        > /dev/null 2> "$T/e"
    local rc=$?
    [ $rc = 2 ] || fail "$1 $2: exit $rc, not 2 ($(head -n 1 "$T/e"))"
    grep -qF "ldct filter: $1 $2: $3" "$T/e" || fail "$1 $2: unclear message: $(head -n 1 "$T/e")"
    [ ! -e "$T/out" ] || [ -z "$(ls "$T/out")" ] || fail "$1 $2: files written"
}
refused --strength abc "not a number"
refused --strength 0 "out of range (0.01 to 10)"
refused --strength nan "out of range (0.01 to 10)"
refused --h -5 "out of range (0 to 10000)"
refused --search-radius -2 "out of range (0 to 15)"
refused --patch-radius 9 "out of range (0 to 5)"
refused --series-number-offset x "not an integer"
refused --matrix 5 "out of range (16 to 2048)"
refused --kernel foo "expected ram-lak"
refused --distance-cutoff -1 "out of range (0 to 80)"
refused --distance-cutoff 81 "out of range (0 to 80)"
refused --distance-cutoff nan "out of range (0 to 80)"
refused --distance-cutoff abc "not a number"
# --uid-root has node.uid_root's check and message (a bad root used to fail
# only when the UIDs were made, with an errno text).
refused --uid-root abc "a UID root is digits and dots (no empty or zero-led component), at most 24 characters"
refused --uid-root 1.2.3.4.5.6.7.8.9.10.11.12.13 "a UID root is digits and dots"
refused --uid-root 1.02 "a UID root is digits and dots"
# --suffix has the rule's check: one LO value of UTF-8 text.
refused --suffix ' [a\b]' "contains a backslash, which would split the Series Description"
refused --suffix " [$(printf '\xe9')]" "not valid UTF-8"
refused --suffix " [$(printf 'a\tb')]" "contains a control character"
# Accepted values reach the processing: strength 2 doubles the automatic h.
h_of() { sed -nE 's/.* h ([0-9.]+) \(noise.*/\1/p' "$T/o"; }
"$LDCT" filter --algo nlm3d --in "$T/in" --out "$T/o1" --device cpu --h 0 > "$T/o" ||
    fail "--h 0 refused"
h1=$(h_of)
python3 -c "import sys; sys.exit(0 if float('$h1') > 0 else 1)" || fail "--h 0 did not filter: $(cat "$T/o")"
"$LDCT" filter --algo nlm3d --in "$T/in" --out "$T/o2" --device cpu --strength 2 > "$T/o" ||
    fail "--strength 2 refused"
h2=$(h_of)
note "h at strength 1: $h1, at strength 2: $h2"
python3 -c "import sys; sys.exit(0 if abs(float('$h2') - 2 * float('$h1')) < 0.2 else 1)" ||
    fail "strength 2 did not double h: $h1 -> $h2"
# --distance-cutoff reaches the filter: 0 (off) and 4 give different pixels
# (dcmstat prints identical lines for identical data), no option is 4 (the
# default), the summary line prints it and a cutoff other than the default
# is named in the DerivationDescription.
pixels() { "$DCMSTAT" --per-slice "$1" | sed -E 's/.*(mean=.*)/\1/'; }
derivation() { dcmdump -q +L +P 0008,2111 "$(ls "$1"/*.dcm | head -1)"; }
for c in 0 4 default; do
    opt=(--distance-cutoff "$c")
    [ "$c" = default ] && opt=()
    "$LDCT" filter --algo nlm3d --in "$T/in" --out "$T/cut-$c" --device cpu "${opt[@]}" > "$T/o" \
        2> "$T/e" || fail "--distance-cutoff $c: $(cat "$T/e")"
    grep -q "$([ "$c" = 0 ] && echo 'no distance cutoff' || echo 'distance cutoff 4 h^2');" "$T/o" ||
        fail "cutoff $c not in the summary: $(cat "$T/o")"
done
[ "$(pixels "$T/cut-0")" != "$(pixels "$T/cut-4")" ] || fail "cutoffs 0 and 4 gave the same pixels"
[ "$(pixels "$T/cut-default")" = "$(pixels "$T/cut-4")" ] || fail "the default cutoff is not 4"
derivation "$T/cut-0" | grep -q "no distance cutoff" ||
    fail "DerivationDescription without the cutoff: $(derivation "$T/cut-0")"
derivation "$T/cut-4" | grep -q "distance cutoff 4 h^2" ||
    fail "default cutoff not named: $(derivation "$T/cut-4")"
"$MKSERIES" --out "$T/clean" --rows 64 --cols 64 --slices 4 > /dev/null || fail "mkseries clean"
"$LDCT" filter --algo nlm2d --in "$T/clean" --out "$T/clean-out" --device cpu > /dev/null 2> "$T/e" ||
    fail "noise-free series: $(cat "$T/e")"
grep -q "estimated noise 0: nothing to remove" "$T/e" || fail "no word on a noise-free series: $(cat "$T/e")"
# Images one pixel tall: h cannot come from the noise (the estimate needs
# 3x3 pixels); the message says so and what to do, and a fixed h works.
"$MKSERIES" --out "$T/thin" --rows 1 --cols 32 --slices 4 --noise 20 > /dev/null || fail "mkseries thin"
"$LDCT" filter --algo nlm2d --in "$T/thin" --out "$T/thin-out" --device cpu > "$T/o" 2> "$T/e" &&
    fail "1-pixel images filtered with h from the noise: $(cat "$T/o")"
grep -qF "cannot estimate the noise of 32x1 images (the estimate needs at least 3x3 pixels); give the rule a fixed h" "$T/e" ||
    fail "unclear message for 1-pixel images: $(cat "$T/e")"
"$LDCT" filter --algo nlm2d --in "$T/thin" --out "$T/thin-h" --device cpu --h 30 > /dev/null 2> "$T/e" ||
    fail "1-pixel images with --h 30: $(cat "$T/e")"
"$LDCT" filter --help > "$T/o" 2> "$T/e" || fail "filter --help exits $?"
grep -q "^usage: ldct filter" "$T/o" || fail "filter --help: no usage on stdout"
grep -q -- "--distance-cutoff C" "$T/o" || fail "filter --help: no --distance-cutoff"
# --out inside --in (or --in itself) is a usage error before any work:
# the next run would read the results as input. A folder beside it is fine.
for out in "$T/in" "$T/in/" "$T/in/res" "$T/in/a/b" "in/new"; do
    (cd "$T" && "$LDCT" filter --algo nlm3d --in in --out "$out" --device cpu > /dev/null 2> "$T/e")
    rc=$?
    [ $rc = 2 ] || fail "--out $out in --in: exit $rc, not 2 ($(head -n 1 "$T/e"))"
    grep -qF "ldct filter: --out $out lies in --in in: the next run would read the results as input" \
        "$T/e" || fail "--out $out in --in: $(cat "$T/e")"
    [ "$(ls "$T/in" | wc -l)" = 4 ] || fail "--out $out in --in: files written"
done
(cd "$T/in" && "$LDCT" filter --algo nlm3d --in . --out ../beside --device cpu > /dev/null 2> "$T/e") ||
    fail "--out beside --in refused: $(cat "$T/e")"
[ "$(ls "$T/beside" | wc -l)" = 4 ] || fail "--out beside --in: $(ls "$T/beside" | wc -l) files"
exit 0
