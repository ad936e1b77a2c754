#!/usr/bin/env bash
# Regenerates docs/QUALITY.md and docs/quality.png (issue 6): the default
# body phantom at quarter dose (`ldct phantom`), denoised by nlm2d and nlm3d
# at several strengths (`ldct filter`, CPU), each measured against the
# truth (`ldct quality --json`), and scikit-image's denoise_nl_means at the
# same patch, search window and h on the same input
# (tests/bench/quality_report.py; Debian's python3-skimage).
# Usage: tests/bench/quality.sh [BUILD] (env: SIZE=256 SLICES=16 DEVICE=cpu
#        W=work-dir DOCS=docs; a few minutes on 2 cores at the default size)
set -eu
B=${1:-build}
SIZE=${SIZE:-256}
SLICES=${SLICES:-16}
DEVICE=${DEVICE:-cpu}
DOCS=${DOCS:-docs}
W=${W:-$(mktemp -d /tmp/ldct-quality-XXXXXX)}
LDCT="$B/ldct"
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$W" "$DOCS"
echo "quality: work in $W" >&2
start=$(date +%s)
"$LDCT" phantom --out "$W/ph" --size "$SIZE" --slices "$SLICES" --dose 0.25 --seed 1 \
    --device "$DEVICE" > "$W/phantom.out"
"$LDCT" quality --test "$W/ph/low" --ref "$W/ph/truth" --json --save-raw "$W/low.raw" \
    > "$W/low.json"
"$LDCT" quality --test "$W/ph/full" --ref "$W/ph/truth" --json > "$W/full.json"
: > "$W/rows.txt"
# algo search-radius patch-radius strength
while read -r algo S P s; do
    out="$W/dn-$algo-$S-$P-$s"
    "$LDCT" filter --algo "$algo" --search-radius "$S" --patch-radius "$P" --strength "$s" \
        --in "$W/ph/low" --out "$out" --device "$DEVICE" > "$W/filter.out" 2> /dev/null
    h=$(sed -nE 's/.*, h ([0-9.]+) \(noise.*/\1/p' "$W/filter.out")
    secs=$(sed -nE 's/.*filter ([0-9.]+) s.*/\1/p' "$W/filter.out")
    "$LDCT" quality --test "$out" --ref "$W/ph/truth" --json > "$out.json"
    echo "$algo $S $P $s $h $secs $out" >> "$W/rows.txt"
    echo "quality: $algo S=$S P=$P strength $s (h $h): $(cut -c1-60 "$out.json")" >&2
done << 'ROWS'
nlm2d 10 3 0.5
nlm2d 10 3 1
nlm2d 10 3 1.5
nlm3d 5 2 0.5
nlm3d 5 2 1
nlm3d 5 2 1.5
nlm3d 3 1 0.45
ROWS
# The figure: nlm3d at its defaults.
"$LDCT" quality --test "$W/dn-nlm3d-5-2-1" --ref "$W/ph/truth" --png "$DOCS/quality.png" \
    > /dev/null
/usr/bin/python3 "$HERE/quality_report.py" "$W" "$LDCT" "$SIZE" "$SLICES" "$DEVICE" \
    "$start" > "$DOCS/QUALITY.md.tmp"
mv "$DOCS/QUALITY.md.tmp" "$DOCS/QUALITY.md"
echo "quality: wrote $DOCS/QUALITY.md and $DOCS/quality.png ($(($(date +%s) - start)) s)" >&2
