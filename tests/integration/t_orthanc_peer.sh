#!/usr/bin/env bash
# The Orthanc PACS harness works with real peers only (no ldctd): a series
# C-STOREd by DCMTK's storescu arrives in Orthanc, its tags and files read
# back through the REST helpers are what was sent (same datasets, same ROI
# statistics through dcmstat), it survives a clean stop and a SIGKILL of
# Orthanc (same ports after the restart, the DICOM port closed while it is
# down), and dciodvfy_compare.sh accepts a file against itself and refuses
# one with a new error.
#
# The lung ROI is the uniform -820 HU region of mkseries' phantom at 64x64
# (tests/tools/dcmstat.c lists the uniform ROIs); with --noise 20 it
# measures mean -820.37, SD 20.40 on this 8-slice series.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/orthanc.sh"
DCMSTAT="$ROOT/$BUILD/tools/dcmstat"
COMPARE="$ROOT/tests/integration/dciodvfy_compare.sh"
LUNG_ROI=16,25,10,11
command -v storescu > /dev/null || skip "DCMTK storescu not installed"
[ -x "$DCMSTAT" ] || fail "$DCMSTAT not built (make BUILD=$BUILD)"

start_orthanc
note "Orthanc up: DICOM $ORTHANC_DICOM_PORT, HTTP $ORTHANC_HTTP_PORT"
[ -z "$(orthanc_series_uids)" ] || fail "a fresh Orthanc is not empty"

SERIES=1.2.276.0.7230010.3.1.3.4242.8.1
DESC="ORTHANC PEER TEST"
"$MKSERIES" --out "$T/s" --rows 64 --cols 64 --slices 8 --noise 20 --series-uid "$SERIES" \
    --series-description "$DESC" 2> /dev/null || fail mkseries
[ "$(orthanc_instance_count "$SERIES")" = 0 ] || fail "count of an unknown series is not 0"

storescu -aet LDCTTEST -aec "$ORTHANC_AET" 127.0.0.1 "$ORTHANC_DICOM_PORT" "$T"/s/*.dcm ||
    fail "storescu to Orthanc failed"
wait_orthanc_instances "$SERIES" 8 10
[ "$(orthanc_instance_count "$SERIES")" = 8 ] || fail "instance count $(orthanc_instance_count "$SERIES")"
[ "$(orthanc_series_uids)" = "$SERIES" ] || fail "series list: $(orthanc_series_uids)"
[ "$(orthanc_instances_total)" = 8 ] || fail "total instances $(orthanc_instances_total)"

# Tags by keyword and by number; an absent tag is an error.
got=$(orthanc_series_tag "$SERIES" SeriesDescription) || fail "no SeriesDescription"
[ "$got" = "$DESC" ] || fail "SeriesDescription '$got'"
got=$(orthanc_series_tag "$SERIES" ImageType) || fail "no ImageType"
[ "$got" = 'ORIGINAL\PRIMARY\AXIAL' ] || fail "ImageType '$got'"
got=$(orthanc_series_tag "$SERIES" 0008,103E) || fail "no (0008,103E)"
[ "$got" = "$DESC" ] || fail "(0008,103E) '$got'"
[ "$(orthanc_series_tag "$SERIES" InstanceNumber)" = 1 ] || fail "first instance is not number 1"
orthanc_series_tag "$SERIES" DerivationDescription 2> /dev/null && fail "absent tag reported present"

# Downloaded files: in InstanceNumber order, the datasets that were sent.
orthanc_download_series "$SERIES" "$T/dl" || fail "download failed"
files=("$T"/dl/*)
[ ${#files[@]} = 8 ] || fail "downloaded ${#files[@]} files: ${files[*]}"
for i in 1 2 3 4 5 6 7 8; do
    dataset_of "$T/s/IMG000$i.dcm" "$T/a.ds" && dataset_of "$T/dl/$i.dcm" "$T/b.ds" ||
        fail "dcmconv failed"
    cmp -s "$T/a.ds" "$T/b.ds" || fail "downloaded $i.dcm differs from IMG000$i.dcm"
done

# dcmstat: same numbers for the same pixels, and the lung ROI is the
# uniform -820 HU region with the noise mkseries added.
orig=$("$DCMSTAT" --roi $LUNG_ROI "$T/s") || fail "dcmstat on the original"
back=$("$DCMSTAT" --roi $LUNG_ROI "$T/dl") || fail "dcmstat on the download"
note "lung ROI: $orig"
[ "$orig" = "$back" ] || fail "statistics differ: '$orig' vs '$back'"
python3 - "$orig" << 'EOF' || fail "lung ROI statistics off: $orig"
import sys
f = dict(kv.split("=") for kv in sys.argv[1].split())
assert f["count"] == "880", f
assert abs(float(f["mean"]) + 820) < 2, f
assert 18 < float(f["std"]) < 23, f
EOF
[ "$("$DCMSTAT" --roi $LUNG_ROI --slices 2:4 --per-slice "$T/dl" | wc -l)" = 3 ] ||
    fail "dcmstat --per-slice did not print 2 slices and the total"

# Timeout path of wait_orthanc_instances: it must fail, not hang or pass.
(wait_orthanc_instances "$SERIES" 9 1) 2> "$T/wait.err" && fail "waiting for 9 of 8 passed"
grep -q "8 instance(s) in Orthanc after 1s, expected 9" "$T/wait.err" ||
    fail "wrong timeout message: $(cat "$T/wait.err")"

# PACS down, then up again: same ports, same data; first a clean stop, then
# a crash.
ports="$ORTHANC_DICOM_PORT $ORTHANC_HTTP_PORT"
stop_orthanc
orthanc_running && fail "Orthanc still running after stop_orthanc"
echoscu -aec "$ORTHANC_AET" 127.0.0.1 "$ORTHANC_DICOM_PORT" 2> /dev/null &&
    fail "C-ECHO answered while Orthanc is stopped"
orthanc_series_uids > /dev/null 2>&1 && fail "REST answered while Orthanc is stopped"
restart_orthanc
[ "$ORTHANC_DICOM_PORT $ORTHANC_HTTP_PORT" = "$ports" ] || fail "ports changed on restart"
[ "$(orthanc_instance_count "$SERIES")" = 8 ] || fail "instances lost over a restart"
[ "$(orthanc_series_tag "$SERIES" SeriesDescription)" = "$DESC" ] || fail "tags lost"
stop_orthanc --kill
start_orthanc
[ "$(orthanc_instance_count "$SERIES")" = 8 ] || fail "instances lost over a SIGKILL"
"$MKSERIES" --out "$T/s2" --rows 32 --cols 32 --slices 2 --series-uid "$SERIES.2" \
    2> /dev/null || fail mkseries
storescu -aec "$ORTHANC_AET" 127.0.0.1 "$ORTHANC_DICOM_PORT" "$T"/s2/*.dcm ||
    fail "storescu after the restart failed"
wait_orthanc_instances "$SERIES.2" 2 10
[ "$(orthanc_instances_total)" = 10 ] || fail "total instances $(orthanc_instances_total)"
[ "$(orthanc_series_uids | sort | tr '\n' ' ')" = "$SERIES $SERIES.2 " ] ||
    fail "series list: $(orthanc_series_uids)"

# dciodvfy_compare.sh: no new error against itself or its copy from the
# PACS; a copy without the Type 2 InstanceNumber has one.
command -v dciodvfy > /dev/null || {
    note "dciodvfy not installed: dciodvfy_compare.sh not checked"
    exit 0
}
bash "$COMPARE" "$T/s/IMG0001.dcm" "$T/s/IMG0001.dcm" || fail "dciodvfy_compare on itself: $?"
bash "$COMPARE" "$T/s/IMG0001.dcm" "$T/dl/1.dcm" || fail "dciodvfy_compare on the download: $?"
cp "$T/s/IMG0001.dcm" "$T/broken.dcm"
dcmodify -q -nb -ea "(0020,0013)" "$T/broken.dcm" || fail dcmodify
out=$(bash "$COMPARE" "$T/s/IMG0001.dcm" "$T/broken.dcm") && fail "new error not detected"
echo "$out" | grep -q "InstanceNumber" || fail "dciodvfy_compare output: $out"
