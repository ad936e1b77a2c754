#!/usr/bin/env bash
# Regenerates docs/QUALITY.md and docs/quality.png (issues 6 and 7): the
# default body phantom at quarter dose (`ldct phantom`), denoised by nlm2d,
# nlm3d and anlm at several strengths (`ldct filter`, CPU), each measured
# against the truth (`ldct quality --json`), and scikit-image's
# denoise_nl_means at the same patch, search window and h on the same input
# (tests/bench/quality_report.py; Debian's python3-skimage), and each at its
# best h over a sweep, our uniform and Gaussian patch weights against
# scikit-image's fast and slow (Gaussian-weighted) modes; then the same
# body with noise that varies across it (--patient-scale 1.75: an adult's
# photon statistics), nlm3d against anlm, and the Poisson figure of
# check_anlm. Text between <!-- section:NAME --> and <!-- /section:NAME -->
# in the old docs/QUALITY.md (other scripts' sections) is carried over.
# Usage: tests/bench/quality.sh [BUILD] (env: SIZE=256 SLICES=16 DEVICE=cpu
#        W=work-dir DOCS=docs SWEEP="strengths"; about 25 minutes on 2
#        cores at the default size, a third of it scikit-image's slow mode)
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
# Reads rows "algo search-radius patch-radius strength [uniform|gaussian]"
# (anlm: patch radius 0 = radii 1 and 2 mixed; the patch weighting of nlm2d
# and nlm3d defaults to uniform) and filters phantom $1 with each into rows
# file $2 ("algo S P strength h seconds out-dir weighting"). A row already
# filtered (same folder) is measured once.
denoise_rows() {
    while read -r algo S P s w; do
        w=${w:-uniform}
        out="$W/dn-$(basename "$1")-$algo-$S-$P-$s"
        [ "$w" = uniform ] || out="$out-$w"
        if [ ! -e "$out.txt" ]; then
            "$LDCT" filter --algo "$algo" --search-radius "$S" --patch-radius "$P" \
                --strength "$s" --patch-weighting "$w" --in "$1/low" --out "$out" \
                --device "$DEVICE" > "$W/filter.out" 2> /dev/null
            h=$(sed -nE 's/.*, h ([0-9.]+) \(noise.*/\1/p' "$W/filter.out")
            h=${h:-0} # anlm: no single h
            secs=$(sed -nE 's/.*filter ([0-9.]+) s.*/\1/p' "$W/filter.out")
            "$LDCT" quality --test "$out" --ref "$1/truth" --json > "$out.json"
            echo "$algo $S $P $s $h $secs $out $w" > "$out.txt"
            echo "quality: $algo S=$S P=$P strength $s $w (h $h): $(cut -c1-60 "$out.json")" >&2
        fi
        cat "$out.txt" >> "$2"
    done
}
denoise_rows "$W/ph" "$W/rows.txt" << 'ROWS'
nlm2d 10 3 0.5
nlm2d 10 3 1
nlm2d 10 3 1.5
nlm3d 5 2 0.5
nlm3d 5 2 1
nlm3d 5 2 1.5
nlm3d 3 1 0.45
nlm2d 10 3 0.5 gaussian
nlm2d 10 3 1 gaussian
nlm2d 10 3 1.5 gaussian
nlm3d 5 2 0.5 gaussian
nlm3d 5 2 1 gaussian
nlm3d 5 2 1.5 gaussian
nlm3d 3 1 0.45 gaussian
anlm 5 0 0.5
anlm 5 0 1
anlm 5 0 1.5
ROWS
# Best h (issue 6's PSNR target): every (algo, S, P) row and both patch
# weightings over a sweep of strengths (h = strength * sqrt(2) * sigma_est;
# up to 3: at P = 1 the Gaussian kernel (a = 0.5) is nearly one voxel and
# needs a large h); quality_report.py sweeps scikit-image over the same grid.
SWEEP=${SWEEP:-0.5 0.6 0.7 0.8 0.9 1 1.1 1.15 1.2 1.25 1.3 1.5 1.75 2 2.5 3}
: > "$W/sweep.txt"
for cfg in "nlm2d 10 3" "nlm3d 5 2" "nlm3d 3 1"; do
    for w in uniform gaussian; do
        for s in $SWEEP; do echo "$cfg $s $w"; done
    done
done | denoise_rows "$W/ph" "$W/sweep.txt"
# Noise that varies across the body (issue 7): an adult's photon statistics
# on the same phantom, i0 raised so the mean noise stays near the default's.
"$LDCT" phantom --out "$W/vph" --size "$SIZE" --slices "$SLICES" --dose 0.25 --seed 1 \
    --patient-scale 1.75 --i0 5e6 --device "$DEVICE" > "$W/vphantom.out"
"$LDCT" quality --test "$W/vph/low" --ref "$W/vph/truth" --json > "$W/vlow.json"
"$LDCT" quality --test "$W/vph/full" --ref "$W/vph/truth" --json > "$W/vfull.json"
: > "$W/vrows.txt"
denoise_rows "$W/vph" "$W/vrows.txt" << 'ROWS'
nlm3d 5 2 0.5
nlm3d 5 2 1
nlm3d 5 2 1.5
anlm 5 0 0.5
anlm 5 0 1
anlm 5 0 1.5
ROWS
# The Poisson volume of seed 004 (check_anlm prints its SNR per decade).
"$B/tests/check_anlm" 2> /dev/null | grep '^anlm Poisson' > "$W/poisson.txt" || true
# The figure: nlm3d at its defaults.
"$LDCT" quality --test "$W/dn-ph-nlm3d-5-2-1" --ref "$W/ph/truth" --png "$DOCS/quality.png" \
    > /dev/null
/usr/bin/python3 "$HERE/quality_report.py" "$W" "$LDCT" "$SIZE" "$SLICES" "$DEVICE" \
    "$start" "$DOCS/QUALITY.md" > "$DOCS/QUALITY.md.tmp"
mv "$DOCS/QUALITY.md.tmp" "$DOCS/QUALITY.md"
echo "quality: wrote $DOCS/QUALITY.md and $DOCS/quality.png ($(($(date +%s) - start)) s)" >&2
