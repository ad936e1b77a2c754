#!/usr/bin/env bash
# Headers that declare absurd or inconsistent pixel data: every job fails with
# a reason naming the problem, before anything is allocated for pixels that
# are not there (65535 x 65535 slices once had the worker allocate 64 GiB;
# NumberOfFrames 20000000 in a JPEG Enhanced CT with one frame had it walk
# and allocate for 20 million frames); RescaleSlope 0 is refused (it was read
# as 1 and copied into the derived series, which viewers then showed flat);
# undecodable JPEG fails with the
# transfer syntax named; the daemon keeps serving and a good series after
# them is processed.
. "$(dirname "$0")/lib.sh"
write_config "stable_seconds = 1" "devices = cpu" "[rule all]" "action = process" "algorithm = nlm3d"
start_daemon
study=1.2.826.0.1.3680043.9.7.56
variant() { # NAME SERIES-SUFFIX [dcmodify edits...]
    local name=$1 uid=$study.$2
    shift 2
    "$MKSERIES" --out "$T/$name" --rows 16 --cols 16 --slices 3 --study-uid "$study" \
        --series-uid "$uid" > /dev/null 2>&1 || fail "mkseries $name"
    [ $# = 0 ] || dcmodify -q -nb "$@" "$T/$name"/*.dcm || fail "dcmodify $name"
}
variant huge 1 -m "(0028,0010)=65535" -m "(0028,0011)=65535"
variant frames 2 -i "(0028,0008)=2147483647"
variant slope0 5 -m "(0028,1053)=0"
# An Enhanced CT with one JPEG-compressed frame that claims 20000000.
mkdir -p "$T/enh"
head -c 512 /dev/zero > "$T/enh/px.raw"
cat > "$T/enh/enh.dump" <<DUMP
(0002,0010) UI =LittleEndianExplicit
(0008,0016) UI =EnhancedCTImageStorage
(0008,0018) UI [$study.3.1]
(0008,0060) CS [CT]
(0020,000d) UI [$study]
(0020,000e) UI [$study.3]
(0028,0002) US 1
(0028,0004) CS [MONOCHROME2]
(0028,0008) IS [1]
(0028,0010) US 16
(0028,0011) US 16
(0028,0100) US 16
(0028,0101) US 16
(0028,0102) US 15
(0028,0103) US 1
(5200,9229) SQ (Sequence)
(fffe,e000) na (Item)
(0020,9113) SQ (Sequence)
(fffe,e000) na (Item)
(0020,0032) DS [0\0\0]
(fffe,e00d) na (ItemDelimitationItem)
(fffe,e0dd) na (SequenceDelimitationItem)
(0020,9116) SQ (Sequence)
(fffe,e000) na (Item)
(0020,0037) DS [1\0\0\0\1\0]
(fffe,e00d) na (ItemDelimitationItem)
(fffe,e0dd) na (SequenceDelimitationItem)
(fffe,e00d) na (ItemDelimitationItem)
(fffe,e0dd) na (SequenceDelimitationItem)
(5200,9230) SQ (Sequence)
(fffe,e000) na (Item)
(fffe,e00d) na (ItemDelimitationItem)
(fffe,e0dd) na (SequenceDelimitationItem)
(7fe0,0010) OW =$T/enh/px.raw
DUMP
dump2dcm -q +E "$T/enh/enh.dump" "$T/enh/native.dcm" || fail "dump2dcm"
dcmcjpeg -q "$T/enh/native.dcm" "$T/enh/enh.dcm" || fail "dcmcjpeg"
dcmodify -q -nb -m "(0028,0008)=20000000" "$T/enh/enh.dcm" || fail "dcmodify enh"
# JPEG lossless whose frame header (SOF3) is zeroed: it cannot be decoded.
"$MKSERIES" --out "$T/jpeg" --rows 16 --cols 16 --slices 3 --ts jpegll --study-uid "$study" \
    --series-uid "$study.4" > /dev/null 2>&1 || fail "mkseries jpeg"
python3 - "$T"/jpeg/*.dcm <<'PY' || fail "corrupting the JPEG"
import sys
for f in sys.argv[1:]:
    b = bytearray(open(f, "rb").read())
    k = b.find(b"\xff\xc3", b.find(b"\xff\xd8\xff"))
    assert k > 0
    b[k + 2:k + 12] = bytes(10)
    open(f, "wb").write(b)
PY
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/huge/*.dcm "$T"/frames/*.dcm "$T"/slope0/*.dcm ||
    fail "storescu"
storescu -xs -aec LDCTNODE 127.0.0.1 "$PORT" "$T/enh/enh.dcm" "$T"/jpeg/*.dcm || fail "storescu -xs"
failed5() { [ "$(sql "SELECT count(*) FROM jobs WHERE state = 'failed'")" = 5 ]; }
wait_until 40 "five failed jobs" failed5
"$LDCT" --config "$T/ldctd.conf" jobs --json > "$T/jobs.json" || fail "ldct jobs"
python3 - "$T/jobs.json" "$study" <<'PY' || fail "reasons: $(cat "$T/jobs.json")"
import json, sys
jobs = {j["series_uid"]: j for j in json.load(open(sys.argv[1]))}
st = sys.argv[2]
for sfx, words in (("1", ["declares 65535x65535x1 pixels of 16 bits", "but its file has"]),
                   ("2", ["declares 16x16x2147483647 pixels"]),
                   ("3", ["20000000 frames (NumberOfFrames) but 1 Per-Frame"]),
                   ("4", ["cannot decode pixel data in JPEG Lossless"]),
                   ("5", ["unusable rescale (slope 0"])):
    j = jobs[st + "." + sfx]
    assert j["state"] == "failed" and j["attempts"] == 1, j
    for w in words:
        assert w in j["last_error"], (w, j["last_error"])
    print("  %s: %s" % (sfx, j["last_error"]))
PY
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "daemon stopped answering"
"$MKSERIES" --out "$T/good" --rows 16 --cols 16 --slices 3 > /dev/null 2>&1 || fail "mkseries good"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/good/*.dcm || fail "storescu good"
done1() { [ "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" = 1 ]; }
wait_until 30 "the good series processed after the bad ones" done1
stop_daemon || fail "exit code $?"
