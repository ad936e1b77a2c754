#!/usr/bin/env bash
# End to end with Orthanc as the PACS: a noisy series sent to ldctd comes
# back to the PACS as a derived series (same count, new UIDs, ImageType
# DERIVED, description suffix, noise in a uniform region at least halved,
# mean within 2 HU, no new dciodvfy error); with action = both the original
# arrives too; `ldct jobs` shows both jobs done with their sends.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/orthanc.sh"
DCMSTAT="$ROOT/$BUILD/tools/dcmstat"
start_orthanc
write_config "stable_seconds = 1" "devices = cpu" \
    "[destination pacs]" "host = 127.0.0.1" "port = $ORTHANC_DICOM_PORT" \
    "ae_title = $ORTHANC_AET" \
    "[rule both]" "match.series_description = *BOTH*" "action = both" "destinations = pacs" \
    "[rule lowdose]" "match.modality = CT" "action = process" "destinations = pacs"
start_daemon
"$MKSERIES" --out "$T/a" --rows 128 --cols 128 --slices 24 --thickness 1 --noise 25 \
    --series-description "LOW DOSE" > /dev/null || fail "mkseries"
"$MKSERIES" --out "$T/b" --rows 64 --cols 64 --slices 6 --thickness 5 --noise 25 \
    --series-description "BOTH PLEASE" > /dev/null || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/a/*.dcm "$T"/b/*.dcm || fail "storescu"
orig_a=$(dcmdump -q +P 0020,000e "$T/a/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
orig_b=$(dcmdump -q +P 0020,000e "$T/b/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')

finished() { [ "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" = 2 ] && all_sends_done; }
wait_until 120 "both jobs done and every send delivered" finished
der_a=$(sql "SELECT derived_series_uid FROM jobs j JOIN series s ON s.id = j.series_id
             WHERE s.series_uid = '$orig_a'")
der_b=$(sql "SELECT derived_series_uid FROM jobs j JOIN series s ON s.id = j.series_id
             WHERE s.series_uid = '$orig_b'")
[ -n "$der_a" ] && [ "$der_a" != "$orig_a" ] || fail "no new series UID for a"
[ "$(orthanc_instance_count "$der_a")" = 24 ] || fail "derived a: $(orthanc_instance_count "$der_a") instances"
[ "$(orthanc_instance_count "$der_b")" = 6 ] || fail "derived b incomplete"
[ "$(orthanc_instance_count "$orig_b")" = 6 ] || fail "action both: original not delivered"
[ "$(orthanc_instance_count "$orig_a")" = 0 ] || fail "action process delivered the original"
orthanc_series_tag "$der_a" ImageType | grep -q '^DERIVED\\SECONDARY' ||
    fail "ImageType $(orthanc_series_tag "$der_a" ImageType)"
[ "$(orthanc_series_tag "$der_a" SeriesDescription)" = "LOW DOSE [DN]" ] ||
    fail "description $(orthanc_series_tag "$der_a" SeriesDescription)"
orthanc_series_tag "$der_a" DerivationDescription | grep -q "nlm3d" ||
    fail "DerivationDescription does not name the algorithm"
orthanc_series_tag "$der_b" DerivationDescription | grep -q "nlm2d" ||
    fail "5 mm slices were not processed with nlm2d"

[ "$(ls "$STATE"/outbox/1/*.dcm | wc -l)" = 24 ] || fail "derived files not in the outbox"
orthanc_download_series "$der_a" "$T/da" || fail "download"
for f in "$T"/da/*.dcm; do
    s=$(sop_of "$f")
    ls "$T"/a/*.dcm | xargs -n1 dcmdump -q +P 0008,0018 | grep -q "\[$s\]" &&
        fail "derived instance reuses source SOP UID $s"
done
# Right lung of the phantom (-820 HU): uniform apart from the noise.
roi="--roi 36,52,12,16"
read -r m0 s0 < <("$DCMSTAT" $roi --json "$T"/a/*.dcm |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["mean"], d["std"])')
read -r m1 s1 < <("$DCMSTAT" $roi --json "$T"/da/*.dcm |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["mean"], d["std"])')
note "uniform region: source mean $m0 std $s0, derived mean $m1 std $s1"
python3 -c "import sys; sys.exit(0 if $s1 <= $s0 / 2 and abs($m1 - $m0) <= 2 else 1)" ||
    fail "noise not halved or mean moved (source $m0/$s0, derived $m1/$s1)"

bash "$(dirname "$0")/dciodvfy_compare.sh" "$T/a/IMG0001.dcm" "$T/da/1.dcm" ||
    fail "dciodvfy: new errors in the derived instance"

"$LDCT" --config "$T/ldctd.conf" jobs --json > "$T/jobs.json" || fail "ldct jobs"
python3 - "$T/jobs.json" <<'PY' || fail "ldct jobs --json: $(cat "$T/jobs.json")"
import json, sys
jobs = json.load(open(sys.argv[1]))
assert len(jobs) == 2, jobs
for j in jobs:
    assert j["state"] == "done" and j["attempts"] == 1, j
    assert all(s["state"] == "done" for s in j["sends"]), j
    assert j["finished_ms"] >= j["started_ms"] > 0, j
whats = sorted(s["what"] for j in jobs for s in j["sends"])
assert whats == ["derived", "derived", "original"], whats
PY
stop_daemon || fail "exit code $?"
