#!/usr/bin/env bash
# ldct filter: the daemon's processing offline on a folder: files are
# grouped by series (two series in one folder give two derived series),
# other files are skipped (said once, without DCMTK's line per file), noise in a uniform region is at least halved,
# the derived instances pass dciodvfy as their sources do; a series copied
# twice under --in is filtered once (one file per SOP Instance UID); the
# derived SeriesNumber stays within IS's range; uniform and
# Gaussian patch weighting (--patch-weighting) give different results; files
# that cannot be read are reported with the first one's reason; bad arguments
# and an inconsistent series give clear errors and a failing exit code
# (nlm3d on a series with a gap); nlm2d filters that series slice by slice;
# a file whose UID the daemon would refuse is skipped with the tag named.
. "$(dirname "$0")/lib.sh"
DCMSTAT="$ROOT/$BUILD/tools/dcmstat"
"$MKSERIES" --out "$T/in/a" --rows 64 --cols 64 --slices 8 --thickness 1 --noise 20 > /dev/null ||
    fail "mkseries"
"$MKSERIES" --out "$T/in/b" --rows 64 --cols 64 --slices 4 --thickness 5 --noise 20 > /dev/null ||
    fail "mkseries"
echo "not DICOM" > "$T/in/README"
# Text that DCMTK's parser reads some way into (it logged an error line
# for it, one per file, before the summary).
printf 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\n' > "$T/in/os-release"
"$LDCT" filter --algo auto --in "$T/in" --out "$T/out" --device cpu > "$T/filter.out" 2> "$T/filter.err" ||
    fail "ldct filter: $(cat "$T/filter.err")"
[ "$(ls "$T/out" | wc -l)" = 12 ] || fail "expected 12 files, got $(ls "$T/out" | wc -l)"
[ "$(grep -c ' -> ' "$T/filter.out")" = 2 ] || fail "expected two series: $(cat "$T/filter.out")"
grep -q "nlm3d on cpu" "$T/filter.out" && grep -q "nlm2d on cpu" "$T/filter.out" ||
    fail "auto did not pick per thickness: $(cat "$T/filter.out")"
grep -qE "skipped 2 file\(s\) that are not readable DICOM images \(first: $T/in/(README|os-release) is not readable DICOM" \
    "$T/filter.err" || fail "README not reported as skipped, with why: $(cat "$T/filter.err")"
if grep -q "dcmtk:" "$T/filter.err"; then fail "DCMTK's lines for skipped files: $(cat "$T/filter.err")"; fi
# A folder of images that cannot be read says why for the first of them
# (as the daemon logs it), not only that there is no image.
"$MKSERIES" --out "$T/b32" --rows 32 --cols 32 --slices 2 > /dev/null || fail mkseries
dcmodify -nb -m "(0028,0100)=32" "$T"/b32/*.dcm || fail dcmodify
"$LDCT" filter --in "$T/b32" --out "$T/b32-out" --device cpu 2> "$T/e" && fail "32-bit header accepted"
grep -qE "^ldct filter: no DICOM image in $T/b32: 2 file\(s\) skipped \(first: $T/b32/IMG000[12].dcm: instance [0-9.]+ declares 32x32x1 pixels of 32 bits \(4096 bytes\) but its file has [0-9]+ bytes\)$" \
    "$T/e" || fail "no reason for the unreadable files: $(cat "$T/e")"
# A UID the daemon would refuse (a control byte in it) is refused here too,
# named by its tag, and never printed or copied into the derived series.
"$MKSERIES" --out "$T/uid" --rows 32 --cols 32 --slices 3 > /dev/null || fail mkseries
dcmodify -nb -m "(0020,000E)=1.2.3"$'\x01'"4" "$T/uid/IMG0002.dcm" || fail dcmodify
"$LDCT" filter --in "$T/uid" --out "$T/uid-out" --device cpu > "$T/o" 2> "$T/e" || fail "uid: $(cat "$T/e")"
grep -qF "skipped 1 file(s) that are not readable DICOM images (first: $T/uid/IMG0002.dcm: invalid (0020,000E) Series Instance UID" \
    "$T/e" || fail "bad UID not refused with its tag: $(cat "$T/e")"
! grep -q $'\x01' "$T/o" "$T/e" || fail "the control byte was printed"
[ "$(ls "$T/uid-out" | wc -l)" = 2 ] || fail "expected the 2 valid slices, got $(ls "$T/uid-out")"
series_of() { dcmdump -q +P 0020,000e "$1" | sed -E 's/.*\[([^]]*)\].*/\1/'; }
src_a=$(series_of "$T/in/a/IMG0001.dcm")
mkdir -p "$T/da"
for f in "$T"/out/*.dcm; do
    s=$(series_of "$f")
    [ "$s" != "$src_a" ] && [ "$s" != "$(series_of "$T/in/b/IMG0001.dcm")" ] || fail "series UID reused"
done
read -r s0 < <("$DCMSTAT" --roi 16,25,10,11 --json "$T"/in/a/*.dcm |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["std"])')
n=0
for f in "$T"/out/*.dcm; do
    thick=$(dcmdump -q +P 0018,0050 "$f" | sed -E 's/.*\[([^]]*)\].*/\1/')
    [ "$thick" = 1 ] && { cp "$f" "$T/da/"; n=$((n + 1)); }
done
[ "$n" = 8 ] || fail "expected 8 derived 1 mm slices, got $n"
read -r s1 < <("$DCMSTAT" --roi 16,25,10,11 --json "$T"/da/*.dcm |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["std"])')
note "lung ROI std: source $s0, derived $s1"
python3 -c "import sys; sys.exit(0 if $s1 <= $s0 / 2 else 1)" || fail "noise not halved: $s0 -> $s1"
bash "$(dirname "$0")/dciodvfy_compare.sh" "$T/in/a/IMG0001.dcm" "$(ls "$T"/da/*.dcm | head -1)" ||
    fail "dciodvfy: new errors"
# One file per SOP instance, as the daemon keeps one: a series copied into
# two folders is filtered once and the left-out copies are said once;
# distinct instances at one place are named with their folders.
mkdir "$T/dup"
cp -r "$T/in/a" "$T/dup/copyA"
cp -r "$T/in/a" "$T/dup/copyB"
"$LDCT" filter --in "$T/dup" --out "$T/dup-out" --device cpu > /dev/null 2> "$T/e" ||
    fail "two copies of a series: $(cat "$T/e")"
[ "$(ls "$T/dup-out" | wc -l)" = 8 ] || fail "two copies of 8 slices gave $(ls "$T/dup-out" | wc -l) files"
grep -qF "skipped 8 file(s) that repeat a SOP Instance UID already read (first: $T/dup/copyB/IMG0001.dcm, the same instance as $T/dup/copyA/IMG0001.dcm)" \
    "$T/e" && [ "$(grep -c "SOP Instance UID" "$T/e")" = 1 ] || fail "copies not reported once: $(cat "$T/e")"
for d in a b; do
    "$MKSERIES" --out "$T/two/$d" --rows 16 --cols 16 --slices 2 --series-uid 1.2.826.0.1.3680043.9.7777.5 \
        --study-uid 1.2.826.0.1.3680043.9.7777 > /dev/null || fail mkseries
done
frame=$(dcmdump -q +P 0020,0052 "$T/two/a/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
dcmodify -nb -m "(0020,0052)=$frame" "$T"/two/b/*.dcm || fail dcmodify
"$LDCT" filter --algo nlm3d --in "$T/two" --out "$T/two-out" --device cpu 2> "$T/e" &&
    fail "two instances at one place were filtered"
grep -qF "file a/IMG0001.dcm and file b/IMG0001.dcm are both at 0.00 mm" "$T/e" ||
    fail "clashing files not told apart: $(cat "$T/e")"
# SeriesNumber + 1000 stays an IS value (at most 2^31-1): a source numbered
# 2147483647 gives 2147482647 (minus the offset), not 2147484647.
"$MKSERIES" --out "$T/top" --rows 16 --cols 16 --slices 1 > /dev/null || fail mkseries
dcmodify -nb -m "(0020,0011)=2147483647" "$T"/top/*.dcm || fail dcmodify
"$LDCT" filter --in "$T/top" --out "$T/top-out" --device cpu > /dev/null 2> "$T/e" ||
    fail "SeriesNumber 2147483647: $(cat "$T/e")"
number=$(dcmdump -q +P 0020,0011 "$T"/top-out/*.dcm | sed -E 's/.*\[([^]]*)\].*/\1/')
[ "$number" = 2147482647 ] || fail "SeriesNumber 2147483647 + 1000 gave $number"
# --patch-weighting: the same series and h with uniform and Gaussian patch
# weights give different pixels (dcmstat prints identical lines for
# identical data), both halve the noise, and the Gaussian one says so in
# its DerivationDescription.
pixels() { "$DCMSTAT" --per-slice "$1" | sed -E 's/.*(mean=.*)/\1/'; }
for w in uniform gaussian; do
    "$LDCT" filter --algo nlm3d --h 30 --patch-weighting "$w" --in "$T/in/a" --out "$T/pw-$w" \
        --device cpu > /dev/null 2> "$T/e" || fail "ldct filter --patch-weighting $w: $(cat "$T/e")"
    read -r sw < <("$DCMSTAT" --roi 16,25,10,11 --json "$T/pw-$w" |
        python3 -c 'import json,sys; print(json.load(sys.stdin)["std"])')
    note "lung ROI std, $w patch weights at h 30: $sw"
    python3 -c "import sys; sys.exit(0 if $sw <= $s0 / 2 else 1)" || fail "$w: noise not halved"
done
[ "$(pixels "$T/pw-uniform")" != "$(pixels "$T/pw-gaussian")" ] ||
    fail "uniform and gaussian patch weights gave the same pixels"
dcmdump -q +L +P 0008,2111 "$(ls "$T"/pw-gaussian/*.dcm | head -1)" | grep -q "Gaussian patch weights" ||
    fail "DerivationDescription does not name the Gaussian weights"
dcmdump -q +L +P 0008,2111 "$(ls "$T"/pw-uniform/*.dcm | head -1)" | grep -q "Gaussian" &&
    fail "uniform DerivationDescription names Gaussian weights"
"$LDCT" filter --algo nlm3d --patch-weighting box --in "$T/in/a" --out "$T/x" 2> "$T/e"
[ $? = 2 ] || fail "unknown patch weighting not a usage error"
grep -q "unknown patch weighting 'box'" "$T/e" || fail "no message for an unknown patch weighting"
"$LDCT" filter --in "$T/in" > /dev/null 2> "$T/e"
[ $? = 2 ] || fail "missing --out not a usage error"
head -n 1 "$T/e" | grep -qx "ldct filter: --out is required" || fail "missing --out: $(head -n 1 "$T/e")"
"$LDCT" filter --in "$T/in" --out "$T/x" extra > /dev/null 2> "$T/e"
[ $? = 2 ] && head -n 1 "$T/e" | grep -qx "ldct filter: unexpected argument 'extra'" ||
    fail "extra argument: $(head -n 1 "$T/e")"
"$LDCT" filter --algo nlm9 --in "$T/in" --out "$T/x" 2> "$T/e" && fail "unknown algorithm accepted"
grep -q "unknown algorithm 'nlm9'" "$T/e" || fail "no message for an unknown algorithm"
"$MKSERIES" --out "$T/bad" --rows 32 --cols 32 --slices 6 > /dev/null || fail mkseries
rm "$T/bad/IMG0003.dcm"
"$LDCT" filter --algo nlm3d --in "$T/bad" --out "$T/badout" --device cpu 2> "$T/e" &&
    fail "a series with a gap was processed with nlm3d"
grep -q "gap of" "$T/e" || fail "no reason for the gap: $(cat "$T/e")"
# nlm2d filters slice by slice: the gap does not matter, and each derived
# slice keeps its source's position.
"$LDCT" filter --algo nlm2d --in "$T/bad" --out "$T/bad2d" --device cpu > /dev/null 2> "$T/e" ||
    fail "nlm2d refused a series with a gap: $(cat "$T/e")"
[ "$(ls "$T/bad2d" | wc -l)" = 5 ] || fail "nlm2d with a gap: $(ls "$T/bad2d" | wc -l) files"
positions() { for f in "$1"/*.dcm; do dcmdump -q +P 0020,0032 "$f"; done | sort; }
[ "$(positions "$T/bad")" = "$(positions "$T/bad2d")" ] || fail "positions changed by nlm2d"
