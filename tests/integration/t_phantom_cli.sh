#!/usr/bin/env bash
# ldct phantom refuses every bad option value with one line naming the
# option, the value and the allowed range, exit 2 (a usage error) and
# nothing written; ldct quality on a volume too small for the phantom's
# regions says which region and the size that fits, exit 1.
# (Before: --thickness 1e300 exited 1 without a message, --size 1..3 and
# --views 1 blamed --fov, --seed -1 and --size 8.5 were taken, and quality
# on an 8x8 phantom said only "invalid input".)
. "$(dirname "$0")/lib.sh"
refused() { # EXPECTED-LINE OPTION VALUE [MORE ARGS]
    local want=$1
    shift
    "$LDCT" phantom --out "$T/p" --device cpu "$@" > "$T/o" 2> "$T/e"
    local rc=$?
    [ $rc = 2 ] || fail "ldct phantom $*: exit $rc, not 2 ($(head -n 1 "$T/e"))"
    [ "$(cat "$T/e")" = "ldct phantom: $want" ] || fail "ldct phantom $*: $(cat "$T/e")"
    [ ! -s "$T/o" ] && [ ! -e "$T/p" ] || fail "ldct phantom $*: wrote output"
}
refused "--thickness 1e300: out of range (0.1 to 50 mm)" --thickness 1e300
refused "--thickness -1: out of range (0.1 to 50 mm)" --thickness -1
refused "--size 1: out of range (8 to 2048)" --size 1
refused "--size 3: out of range (8 to 2048)" --size 3
refused "--size 8.5: not a whole number (8 to 2048)" --size 8.5
refused "--size 12abc: not a number (8 to 2048)" --size 12abc
refused "--size 1e300: out of range (8 to 2048)" --size 1e300
refused "--slices nan: out of range (1 to 1024)" --slices nan
refused "--views 1: out of range (0 = 4 x --size, or 2 to 65536)" --views 1
refused "--views -inf: out of range (0 = 4 x --size, or 2 to 65536)" --views -inf
refused "--fov 1e300: out of range (10 to 590 mm)" --fov 1e300
refused "--fov 100: out of range for the body phantom (220 to 590 mm; shepp-logan: 10 to 590 mm)" --fov 100
refused "--dose 0: out of range (more than 0, at most 1)" --dose 0
refused "--dose nan: out of range (more than 0, at most 1)" --dose nan
refused "--i0 inf: out of range (more than 0, at most 1e+12 photons/mm^2)" --i0 inf
refused "--electronic-noise -1: out of range (0 to 1e+06 photons)" --electronic-noise -1
refused "--patient-scale 0.5: out of range (1 to 10)" --patient-scale 0.5
refused "--mas -1: out of range (more than 0, at most 10000 mAs)" --mas -1
refused "--mas 1e300: out of range (more than 0, at most 10000 mAs)" --mas 1e300
refused "--seed -1: not a whole number of decimal digits (0 to 18446744073709551615)" --seed -1
refused "--seed 18446744073709551616: out of range (0 to 18446744073709551615)" --seed 18446744073709551616
refused "--times 0: out of range (1 to 256)" --times 0
refused "--motion 2: out of range (0 to 1.75)" --motion 2 --times 2
refused "--times 2: only the body phantom moves (--times 1 with --phantom shepp-logan)" \
    --phantom shepp-logan --times 2
refused "--phantom head: unknown (body or shepp-logan)" --phantom head
refused "--filter box: unknown (ram-lak, shepp-logan, cosine, hamming or hann)" --filter box
# The bounds themselves are taken (small scans).
"$LDCT" phantom --out "$T/edge" --size 8 --slices 1 --views 2 --thickness 50 --fov 590 \
    --dose 1 --mas 1e4 --seed 18446744073709551615 --device cpu > /dev/null 2> "$T/e" ||
    fail "the bounds were refused: $(cat "$T/e")"

# An 8x8 phantom is too small for the body's regions: which one and the
# size that fits (24 x 24 is the first that does, 27 x 27 does not).
"$LDCT" phantom --out "$T/q8" --size 8 --slices 2 --device cpu > /dev/null 2>&1 || fail "8x8 phantom"
"$LDCT" quality --test "$T/q8/low" --ref "$T/q8/truth" > "$T/o" 2> "$T/e"
rc=$?
[ $rc = 1 ] && [ ! -s "$T/o" ] || fail "quality on 8x8: exit $rc, $(cat "$T/o")"
[ "$(cat "$T/e")" = "ldct quality: the volume is too small for the measurement: ROI liver (radius 6 mm) holds no voxel centre at 8 x 8 pixels; the body phantom needs at least 28 x 28 pixels over this 220 x 220 mm field (some sizes from 24 x 24 fit too)" ] ||
    fail "quality on 8x8: $(cat "$T/e")"
"$LDCT" phantom --out "$T/q24" --size 24 --slices 2 --device cpu > /dev/null 2>&1 || fail "24x24 phantom"
"$LDCT" quality --test "$T/q24/low" --ref "$T/q24/truth" --json > "$T/o" 2> "$T/e" ||
    fail "quality on 24x24: $(cat "$T/e")"
# A second phantom into the same --out is refused before any work and
# leaves the first one as it was (it mixed the two: truth/ held the new
# IMG0001 beside the old IMG0002, and quality failed on two series UIDs).
before=$(cd "$T/q24" && find . -type f | sort | xargs md5sum)
"$LDCT" phantom --out "$T/q24" --size 32 --slices 1 --device cpu > "$T/o" 2> "$T/e"
rc=$?
[ $rc = 1 ] || fail "a phantom into a used --out: exit $rc"
[ "$(cat "$T/e")" = "ldct phantom: --out $T/q24 is not empty (its files would mix with the new series): name a new or empty folder" ] ||
    fail "a phantom into a used --out: $(cat "$T/e")"
[ "$(cd "$T/q24" && find . -type f | sort | xargs md5sum)" = "$before" ] ||
    fail "the refused phantom changed the first one"
exit 0
