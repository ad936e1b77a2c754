#!/usr/bin/env bash
# Projection data over DICOM: DICOM-CT-PD series (tests/tools/mkctpd: a water
# cylinder with a +500 HU insert at patient left-anterior) sent to ldctd
# with storescu come back to Orthanc as CT image series: a rule with
# algorithm = fdk (cylindrical detector, full scan) and one with auto (flat
# detector, short scan) each give the slices every projection sees, ImageType
# DERIVED\PRIMARY\AXIAL, water near 0 HU and the insert near 500 HU at its
# patient position (its mirror image reads water), no new dciodvfy error; a
# helical series fails its job with the readable reason, not retried.
# Offline: `ldct filter --algo fdk` reconstructs a folder, and `--algo
# nlm2d` refuses projection data.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/orthanc.sh"
DCMSTAT="$ROOT/$BUILD/tools/dcmstat"
MKCTPD="$ROOT/$BUILD/tools/mkctpd"
start_orthanc
write_config "stable_seconds = 1" "devices = cpu" \
    "[destination pacs]" "host = 127.0.0.1" "port = $ORTHANC_DICOM_PORT" \
    "ae_title = $ORTHANC_AET" \
    "[rule fdk]" "match.series_description = *FDKRULE*" "algorithm = fdk" "matrix = 128" \
    "fov_mm = 160" "destinations = pacs" "series_description_suffix = \" [FDK]\"" \
    "[rule auto]" "match.series_description = *AUTORULE*" "algorithm = auto" "matrix = 96" \
    "fov_mm = 160" "kernel = hann" "destinations = pacs"
start_daemon
"$MKCTPD" --out "$T/a" --shape CYLINDRICAL --series-description "FDKRULE CYL" 2> /dev/null ||
    fail "mkctpd a"
"$MKCTPD" --out "$T/b" --shape FLAT --short-scan --views 150 --series-description "AUTORULE FLAT" \
    2> /dev/null || fail "mkctpd b"
"$MKCTPD" --out "$T/c" --views 60 --helical 0.5 --series-description "FDKRULE HELICAL" \
    2> /dev/null || fail "mkctpd c"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/a/*.dcm "$T"/b/*.dcm "$T"/c/*.dcm ||
    fail "storescu"
uid_of() { dcmdump -q +P 0020,000e "$1" | sed -E 's/.*\[([^]]*)\].*/\1/'; }
orig_a=$(uid_of "$T/a/view_0001.dcm")
orig_b=$(uid_of "$T/b/view_0001.dcm")
orig_c=$(uid_of "$T/c/view_0001.dcm")

finished() {
    [ "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" = 2 ] &&
        [ "$(sql "SELECT count(*) FROM jobs WHERE state = 'failed'")" = 1 ] && all_sends_done
}
wait_until 120 "two reconstructions delivered and the helical job failed" finished
derived_of() {
    sql "SELECT derived_series_uid FROM jobs j JOIN series s ON s.id = j.series_id
         WHERE s.series_uid = '$1'"
}
der_a=$(derived_of "$orig_a")
der_b=$(derived_of "$orig_b")
[ "$(sql "SELECT algorithm FROM jobs j JOIN series s ON s.id = j.series_id
          WHERE s.series_uid = '$orig_b'")" = fdk ] || fail "auto did not pick fdk"
# 16 detector rows of 1 mm at the isocentre; at the edge of the 160 mm field
# on the source's side the cone is 16 (dso - 80) / dso mm high: the slices
# whose centres every projection sees there (12 of 1 mm for both).
[ "$(orthanc_instance_count "$der_a")" = 12 ] || fail "a: $(orthanc_instance_count "$der_a") slices"
[ "$(orthanc_instance_count "$der_b")" = 12 ] || fail "b: $(orthanc_instance_count "$der_b") slices"
[ "$(orthanc_instance_count "$orig_a")" = 0 ] || fail "the projections were forwarded"
orthanc_series_tag "$der_a" ImageType | grep -q '^DERIVED\\PRIMARY\\AXIAL' ||
    fail "ImageType $(orthanc_series_tag "$der_a" ImageType)"
[ "$(orthanc_series_tag "$der_a" SeriesDescription)" = "FDKRULE CYL [FDK]" ] ||
    fail "description $(orthanc_series_tag "$der_a" SeriesDescription)"
orthanc_series_tag "$der_a" DerivationDescription | grep -q "FDK.*shepp-logan.*cylindrical" ||
    fail "DerivationDescription: $(orthanc_series_tag "$der_a" DerivationDescription)"
orthanc_series_tag "$der_b" DerivationDescription | grep -q "hann.*short scan.*flat" ||
    fail "DerivationDescription b: $(orthanc_series_tag "$der_b" DerivationDescription)"
orthanc_download_series "$der_a" "$T/da" || fail "download a"
orthanc_download_series "$der_b" "$T/db" || fail "download b"

# ROIs (6x6 pixels, central slices 2..9 of 12): the insert at X = +35, Y = -20 mm,
# its mirror image at X = -35 and water. 128 px over 160 mm: pixel c at
# X = -79.375 + 1.25 c; 96 px: X = -79.17 + 1.667 c.
mean_in() { "$DCMSTAT" --roi "$1" --slices 2:10 --json "$2" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["mean"])'; }
check_hu() { # name dir insert-roi mirror-roi water-roi
    local ins mir wat
    ins=$(mean_in "$3" "$2") mir=$(mean_in "$4" "$2") wat=$(mean_in "$5" "$2")
    note "$1: insert $ins HU, mirror image $mir HU, water $wat HU"
    python3 -c "import sys; sys.exit(0 if abs($ins - 500) <= 40 and abs($mir) <= 20 and
abs($wat) <= 20 else 1)" || fail "$1: HU off (insert $ins, mirror $mir, water $wat)"
}
check_hu "fdk, cylindrical, full scan" "$T/da" 89,45,6,6 33,45,6,6 37,77,6,6
check_hu "auto, flat, short scan" "$T/db" 66,33,6,6 24,33,6,6 24,60,6,6

f=$(ls "$T"/da/*.dcm | head -n1)
bash "$(dirname "$0")/dciodvfy_compare.sh" "$T/a/view_0001.dcm" "$f" ||
    fail "dciodvfy: new errors in the reconstructed image"
if command -v dciodvfy > /dev/null; then
    dciodvfy "$f" 2>&1 | grep -q '^Error' && fail "dciodvfy errors: $(dciodvfy "$f" 2>&1 | grep ^Error)"
fi

"$LDCT" --config "$T/ldctd.conf" jobs --json > "$T/jobs.json" || fail "ldct jobs"
python3 - "$T/jobs.json" "$orig_c" <<'PY' || fail "helical job: $(cat "$T/jobs.json")"
import json, sys
jobs = {j["series_uid"]: j for j in json.load(open(sys.argv[1]))}
j = jobs[sys.argv[2]]
assert j["state"] == "failed" and j["attempts"] == 1, j
assert "helical" in j["last_error"] and "axial" in j["last_error"], j["last_error"]
print("  helical: " + j["last_error"])
PY
stop_daemon || fail "exit code $?"

# Offline, the same reconstruction, and a refusal.
"$LDCT" filter --algo fdk --in "$T/a" --out "$T/off" --matrix 64 --fov 160 --slices 4 \
    --device cpu > "$T/off.txt" 2>&1 || fail "ldct filter fdk: $(cat "$T/off.txt")"
[ "$(ls "$T"/off/*.dcm | wc -l)" = 4 ] || fail "ldct filter: $(ls "$T/off" | wc -l) files"
# 64 px over 160 mm: X = -78.75 + 2.5 c; the insert's centre at column 45.5, row 23.5.
"$DCMSTAT" --roi 44,22,3,3 --json "$T/off" | python3 -c '
import json, sys
m = json.load(sys.stdin)["mean"]
sys.exit(0 if abs(m - 500) <= 60 else 1)' || fail "offline insert $("$DCMSTAT" --roi 44,22,3,3 "$T/off")"
"$LDCT" filter --algo nlm2d --in "$T/a" --out "$T/bad" --device cpu > "$T/bad.txt" 2>&1 &&
    fail "nlm2d accepted projection data"
grep -q "can only be reconstructed" "$T/bad.txt" || fail "refusal reason: $(cat "$T/bad.txt")"
