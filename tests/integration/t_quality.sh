#!/usr/bin/env bash
# The simulator and the quality harness end to end (issue 6): `ldct phantom`
# writes one synthetic study (truth, full and low dose, low-dose projections
# as DICOM-CT-PD) with realistic tags, reproducibly with a seed; nlm3d
# (`ldct filter`) on the quarter-dose series meets the issue's floors
# against the truth (`ldct quality --json`): PSNR +3 dB, noise at most
# half, |bias| <= 2 HU in every ROI, CNR higher than the input for the
# +20 and +10 HU lesions and on average over all nine, edge rise distance
# grown by at most 10%; the +5 HU lesions' CNRs are printed (their input
# CNR is mostly noise in the contrast estimate; see docs/QUALITY.md). The
# figure is a valid PNG (one that cannot be written fails before the work),
# and the instances pass dciodvfy.
#
# nlm3d settings: patch radius 1, search radius 3, strength 0.45, from the
# sweep in docs/QUALITY.md; the defaults (2, 5, 1.0) smooth the low-contrast
# lesions away with the noise and fail the CNR floor.
. "$(dirname "$0")/lib.sh"
HERE=$(cd "$(dirname "$0")" && pwd)
P="$T/ph"
ROOT_UID=1.2.826.0.1.3680043.9.77 # 24 characters, the most a UID root may have
"$LDCT" phantom --out "$P" --size 128 --slices 16 --dose 0.25 --seed 7 --device cpu \
    --uid-root $ROOT_UID > "$T/phantom.out" 2> "$T/phantom.err" || fail "ldct phantom: $(cat "$T/phantom.err")"
grep -q "full dose written" "$T/phantom.err" || fail "no progress lines on stderr"
for s in truth full low; do
    [ "$(ls "$P/$s" | wc -l)" = 16 ] || fail "$s: expected 16 slices"
done
[ "$(ls "$P/projections" | wc -l)" = 512 ] || fail "expected 512 projections"
[ -f "$P/phantom.ini" ] || fail "no phantom.ini"

tag() { dcmdump -q +P "$1" "$2" | sed -E 's/.*\[([^]]*)\].*/\1/; s/^\(0018,9345\) FD ([^ ]*).*/\1/'; }
[ "$(tag 0010,0010 "$P/low/IMG0001.dcm")" = "PHANTOM^SYNTHETIC" ] || fail "patient name"
[ "$(tag 0018,0060 "$P/low/IMG0001.dcm")" = 120 ] || fail "KVP"
[ "$(tag 0018,1152 "$P/full/IMG0001.dcm")" = 200 ] || fail "full-dose mAs"
[ "$(tag 0018,1152 "$P/low/IMG0001.dcm")" = 50 ] || fail "low-dose mAs not scaled with dose"
[ "$(tag 0018,9345 "$P/full/IMG0001.dcm")" = 12 ] || fail "full-dose CTDIvol"
[ "$(tag 0018,9345 "$P/low/IMG0001.dcm")" = 3 ] || fail "low-dose CTDIvol not scaled with dose"
[ "$(tag 0018,0050 "$P/low/IMG0001.dcm")" = 1.5 ] || fail "slice thickness"
study=$(tag 0020,000d "$P/truth/IMG0001.dcm")
for s in full low projections; do
    f=$(ls "$P/$s"/*.dcm | head -1)
    [ "$(tag 0020,000d "$f")" = "$study" ] || fail "$s is not in the truth's study"
done
[ "$(for s in truth full low projections; do tag 0020,000e "$(ls "$P/$s"/*.dcm | head -1)"; done |
    sort -u | wc -l)" = 4 ] || fail "series UIDs not distinct"
# One frame of reference for the whole study, projections included (an FDK
# result registers with the images), and every UID under --uid-root.
frames=$(for s in truth full low projections; do dcmdump -q +P 0020,0052 "$P/$s"/*.dcm; done |
    sed -nE 's/.*\[([^]]*)\].*/\1/p' | sort | uniq -c)
[ "$(echo "$frames" | wc -l)" = 1 ] && [ "$(echo "$frames" | awk '{print $1}')" = $((3 * 16 + 512)) ] ||
    fail "FrameOfReferenceUIDs (count, UID): $frames"
uids=$(dcmdump -q +P 0020,000d +P 0020,000e +P 0020,0052 +P 0008,0018 "$P/projections/PROJ00001.dcm" \
    "$P/low/IMG0001.dcm" | sed -nE 's/.*\[([^]]*)\].*/\1/p')
[ "$(echo "$uids" | grep -c "^$ROOT_UID\.")" = 8 ] || fail "UIDs not under --uid-root: $uids"
"$LDCT" phantom --out "$T/bad-root" --uid-root abc > /dev/null 2> "$T/e"
[ $? = 2 ] && grep -qF "ldct phantom: --uid-root abc: a UID root is digits and dots" "$T/e" &&
    [ ! -e "$T/bad-root" ] || fail "phantom --uid-root abc: $(head -n 1 "$T/e")"
proj=$(ls "$P/projections"/*.dcm | head -1)
dcmdump -q "$proj" | grep -q '(7029,100b) CS \[FLAT\]' || fail "detector shape not FLAT"
dcmdump -q "$proj" | grep -q '(7033,100e) CS \[FFSNONE\]' || fail "FFS mode"
dcmdump -q "$proj" | grep -q '(7033,1013) US 512' || fail "views per rotation"

# Same seed, same noise; another seed, other noise (small scans).
for s in 7 7 8; do
    "$LDCT" phantom --out "$T/s$s-$((n = ${n:-0} + 1))" --size 48 --slices 2 --seed $s \
        --device cpu > /dev/null 2>&1 || fail "small phantom"
done
sd() { "$LDCT" quality --test "$1" --ref "$2" --json | python3 -c \
    'import json,sys; print(json.load(sys.stdin)["noise_sd"])'; }
python3 -c "import sys; sys.exit(0 if $(sd "$T/s7-2/low" "$T/s7-1/low") == 0 else 1)" ||
    fail "same seed, different noise"
python3 -c "import sys; sys.exit(0 if $(sd "$T/s8-3/low" "$T/s7-1/low") > 1 else 1)" ||
    fail "another seed gave the same noise"

# Series on another grid are refused; the Shepp-Logan phantom has a body
# mask and ROIs but no lesions and no edge.
"$LDCT" quality --test "$T/s7-1/low" --ref "$P/truth" > /dev/null 2> "$T/e" &&
    fail "series of different shapes compared"
grep -q "differ in shape" "$T/e" || fail "no reason for the refusal: $(cat "$T/e")"
"$LDCT" phantom --phantom shepp-logan --out "$T/sl" --size 48 --slices 4 --thickness 3 \
    --device cpu > /dev/null 2>&1 || fail "shepp-logan phantom"
"$LDCT" quality --test "$T/sl/low" --ref "$T/sl/truth" --json > "$T/sl.json" ||
    fail "quality on shepp-logan"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
assert d["phantom"] == "shepp-logan" and d["cnr"] == [] and d["edge_rise_mm"] is None
assert len(d["rois"]) == 2 and d["noise_sd"] > 0 and d["psnr"] > 20' "$T/sl.json" ||
    fail "shepp-logan quality: $(cat "$T/sl.json")"

"$LDCT" filter --algo nlm3d --patch-radius 1 --search-radius 3 --strength 0.45 --in "$P/low" \
    --out "$T/dn" --device cpu > "$T/filter.out" 2>&1 || fail "ldct filter: $(cat "$T/filter.out")"
"$LDCT" quality --test "$P/low" --ref "$P/truth" --json > "$T/low.json" ||
    fail "ldct quality (low)"
"$LDCT" quality --test "$T/dn" --ref "$P/truth" --json --png "$T/q.png" > "$T/dn.json" ||
    fail "ldct quality (denoised)"
# A figure that cannot be written fails before the work, with why, and no report.
"$LDCT" quality --test "$T/dn" --ref "$P/truth" --png "$T/no-such-dir/q.png" > "$T/o" 2> "$T/e" &&
    fail "--png into a missing folder succeeded"
[ ! -s "$T/o" ] && grep -qx "ldct quality: cannot write --png $T/no-such-dir/q.png: $T/no-such-dir: No such file or directory" \
    "$T/e" || fail "--png into a missing folder: $(cat "$T/o" "$T/e")"
python3 "$HERE/quality_floors.py" "$T/low.json" "$T/dn.json" --cnr-lesions 20,10 > "$T/floors" ||
    fail "floors: $(cat "$T/floors")"
sed 's/^/  /' "$T/floors"

# A valid PNG: signature, chunk CRCs, IHDR first, IEND last, pixels inflate.
python3 - "$T/q.png" << 'PY' || fail "figure is not a valid PNG"
import struct, sys, zlib
d = open(sys.argv[1], "rb").read()
assert d[:8] == b"\x89PNG\r\n\x1a\n"
i, names, idat = 8, [], b""
while i < len(d):
    n, = struct.unpack(">I", d[i:i + 4]); t = d[i + 4:i + 8]; body = d[i + 8:i + 8 + n]
    assert struct.unpack(">I", d[i + 8 + n:i + 12 + n])[0] == zlib.crc32(t + body)
    names.append(t); idat += body if t == b"IDAT" else b""; i += 12 + n
assert names[0] == b"IHDR" and names[-1] == b"IEND"
w, h = struct.unpack(">II", d[16:24])
assert w >= 4 * 256 and len(zlib.decompress(idat)) == h * (w + 1)
PY
[ -n "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ssim"])' "$T/dn.json")" ] ||
    fail "no ssim"

# dciodvfy: the CT instances have no error; the projection only the
# RescaleType one that DICOM-CT-PD's "US" (line integrals) implies.
command -v dciodvfy > /dev/null || skip "dciodvfy not installed"
for f in "$P/truth/IMG0001.dcm" "$P/low/IMG0008.dcm"; do
    dciodvfy "$f" 2>&1 | grep '^Error' && fail "dciodvfy errors in $f"
done
dciodvfy "$proj" 2>&1 | grep '^Error' | grep -v 'RescaleType' && fail "dciodvfy errors in $proj"
bash "$HERE/dciodvfy_compare.sh" "$P/low/IMG0001.dcm" "$(ls "$T"/dn/*.dcm | head -1)" ||
    fail "dciodvfy: new errors in the derived instance"
exit 0
