#!/usr/bin/env bash
# Bad series: mixed image sizes and a missing slice of a 1 mm series each
# fail their job with a reason an administrator understands, shown by `ldct
# jobs`; the originals stay in the spool and the daemon keeps serving
# (C-ECHO, and a good series after them is processed); `ldct retry` runs one
# again, logged as such. A missing slice of a
# 2.5 mm series is no failure: auto filters it slice by slice (nlm2d). Series that no processing can use, as a scanner
# sending whole studies adds them (a dose report, a localizer, a colour
# dose screen), match no `process` rule: no failed job, and the log names
# why. The dose report is unmatched; the localizer meets a rule on its
# Image Type (discard); the colour screen meets a `both` rule, which only
# sends the original (to a storescp).
. "$(dirname "$0")/lib.sh"
PACS_PORT=$(free_port)
mkdir -p "$T/pacs"
storescp -aet PACS -od "$T/pacs" "$PACS_PORT" > "$T/storescp.log" 2>&1 &
write_config "stable_seconds = 1" "devices = cpu" "[rule all]" "action = process" \
    "[rule scouts]" 'match.image_type = *\LOCALIZER*' "action = discard" "priority = 10" \
    "[rule screens]" "match.series_description = *SCREEN*" "action = both" "destinations = pacs" \
    "priority = 5" "[destination pacs]" "host = 127.0.0.1" "port = $PACS_PORT" "ae_title = PACS"
start_daemon
study=1.2.826.0.1.3680043.9.7.9.1
"$MKSERIES" --out "$T/mixed" --rows 32 --cols 32 --slices 4 --study-uid "$study" \
    --series-uid "$study.1" > /dev/null || fail "mkseries"
"$MKSERIES" --out "$T/mixed2" --rows 32 --cols 24 --slices 1 --study-uid "$study" \
    --series-uid "$study.1" > /dev/null || fail "mkseries"
"$MKSERIES" --out "$T/thick" --rows 32 --cols 32 --slices 8 --thickness 2.5 \
    --series-uid "$study.6" > /dev/null || fail "mkseries"
rm "$T/thick/IMG0004.dcm"
"$MKSERIES" --out "$T/gap" --rows 32 --cols 32 --slices 8 --thickness 1 --series-uid "$study.2" > /dev/null ||
    fail "mkseries"
rm "$T/gap/IMG0004.dcm"
cat > "$T/sr.txt" <<'DUMP'
(0002,0010) UI =LittleEndianExplicit
(0008,0016) UI [1.2.840.10008.5.1.4.1.1.88.11]
(0008,0018) UI [1.2.826.0.1.3680043.9.7.9.3.1]
(0008,0060) CS [SR]
(0010,0020) LO [SR1]
(0020,000d) UI [1.2.826.0.1.3680043.9.7.9.1]
(0020,000e) UI [1.2.826.0.1.3680043.9.7.9.1.3]
(0040,a040) CS [CONTAINER]
DUMP
dump2dcm -q +te "$T/sr.txt" "$T/sr.dcm" || fail "dump2dcm"
mv "$T/mixed2/IMG0001.dcm" "$T/mixed/IMG9999.dcm"
"$MKSERIES" --out "$T/loc" --rows 32 --cols 32 --slices 2 --series-uid "$study.4" > /dev/null ||
    fail "mkseries localizer"
dcmodify -nb -q -m 'ImageType=ORIGINAL\PRIMARY\LOCALIZER' "$T"/loc/*.dcm || fail "dcmodify"
sed -e 's/1.2.826.0.1.3680043.9.7.9.1.3/1.2.826.0.1.3680043.9.7.9.1.5/' \
    -e 's/9.7.9.3.1/9.7.9.5.1/' -e 's/\[SR\]/[CT]/' -e 's/88.11/7/' "$T/sr.txt" > "$T/sc.txt"
echo "(0008,103e) LO [DOSE SCREEN]" >> "$T/sc.txt"
printf '%s\n' "(0028,0002) US 3" "(0028,0004) CS [RGB]" "(0028,0006) US 0" "(0028,0010) US 2" \
    "(0028,0011) US 2" "(0028,0100) US 8" "(0028,0101) US 8" "(0028,0102) US 7" \
    "(0028,0103) US 0" "(7fe0,0010) OB 00\01\02\03\04\05\06\07\08\09\0a\0b" >> "$T/sc.txt"
dump2dcm -q +te "$T/sc.txt" "$T/sc.dcm" || fail "dump2dcm colour"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/mixed/*.dcm "$T"/gap/*.dcm "$T"/thick/*.dcm ||
    fail "storescu"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T/sr.dcm" "$T/sc.dcm" "$T"/loc/*.dcm ||
    fail "storescu SR, colour, localizer"
failed2() { [ "$(sql "SELECT count(*) FROM jobs WHERE state = 'failed'")" = 2 ]; }
wait_until 60 "two failed jobs" failed2
series_is() { [ "$(sql "SELECT state FROM series WHERE series_uid = '$1'")" = "$2" ]; }
wait_until 30 "dose report unmatched" series_is "$study.3" unmatched
wait_until 30 "localizer discarded by its Image Type" series_is "$study.4" discarded
screen_sent() { [ "$(ls "$T/pacs" | wc -l)" = 1 ]; }
wait_until 30 "the colour screen's original sent" screen_sent
for w in "$study.3 (SR, 1 instance(s)) matches no rule that applies to it (not an image" \
    "$study.5: colour images (photometric interpretation 'RGB'), so rule 'screens' only sends" \
    "$study.4 discarded by rule 'scouts'"; do
    grep -qF "$w" "$T/ldctd.log" || fail "log lacks: $w"
done
[ "$(sql "SELECT j.action || ' ' || j.algorithm || ' ' || j.state FROM jobs j JOIN series s ON s.id = j.series_id WHERE s.series_uid = '$study.5'")" = "route none done" ] ||
    fail "the screen's job: $(sql "SELECT * FROM jobs")"
thick_done() { [ "$(sql "SELECT j.state FROM jobs j JOIN series s ON s.id = j.series_id WHERE s.series_uid = '$study.6'")" = done ]; }
wait_until 30 "the 2.5 mm series with a gap filtered slice by slice" thick_done
grep -qF "series $study.6 is no regular volume (gap of 5.00 mm" "$T/ldctd.log" ||
    fail "no word on the slice-by-slice fallback"
grep -q "job [0-9]* done: series $study.6 .* 7 file(s) 32x32x7, nlm2d" "$T/ldctd.log" ||
    fail "the 2.5 mm series was not filtered with nlm2d"
[ "$(sql "SELECT count(*) FROM jobs")" = 4 ] || fail "jobs for series no processing can use"
"$LDCT" --config "$T/ldctd.conf" jobs --json > "$T/jobs.json" || fail "ldct jobs"
python3 - "$T/jobs.json" "$study" <<'PY' || fail "reasons: $(cat "$T/jobs.json")"
import json, sys
jobs = {j["series_uid"]: j for j in json.load(open(sys.argv[1]))}
st = sys.argv[2]
for uid, words in ((st + ".1", ["24 columns", "32"]), (st + ".2", ["gap", "missing slice"])):
    j = jobs[uid]
    assert j["state"] == "failed", j
    assert j["attempts"] == 1, j  # a bad series is not retried
    for w in words:
        assert w in j["last_error"], (w, j["last_error"])
    print("  %s: %s" % (uid, j["last_error"]))
PY
"$LDCT" --config "$T/ldctd.conf" jobs | grep -q "error   .*columns" || fail "ldct jobs text lacks the reason"
[ "$(sql "SELECT count(*) FROM instances")" = 23 ] || fail "originals not kept"
for f in $(sql "SELECT path FROM instances"); do [ -f "$f" ] || fail "original $f removed"; done
# ldct retry runs the job again; the daemon's log says why it runs, and the
# slice is still missing.
gap=$(sql "SELECT j.id FROM jobs j JOIN series s ON s.id = j.series_id WHERE s.series_uid = '$study.2'")
"$LDCT" --config "$T/ldctd.conf" retry "$gap" | grep -q "job $gap: 1 item(s) queued again" ||
    fail "ldct retry $gap"
failed_again() { [ "$(grep -c "job $gap failed: series $study.2" "$T/ldctd.log")" = 2 ]; }
wait_until 30 "the retried job failed again" failed_again
grep -q "job $gap: series $study.2, .* (attempt 1; queued again by ldct retry)" "$T/ldctd.log" ||
    fail "no log line for the retried job: $(grep "job $gap" "$T/ldctd.log")"
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "daemon stopped answering"
"$MKSERIES" --out "$T/good" --rows 32 --cols 32 --slices 4 > /dev/null || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/good/*.dcm || fail "storescu good"
done1() { [ "$(sql "SELECT count(*) FROM jobs WHERE state = 'done' AND algorithm != 'none'")" = 2 ]; }
wait_until 60 "the good series processed after the bad ones" done1
[ "$(find "$STATE/results" -name '*.dcm' | wc -l)" = 11 ] || fail "results missing"
stop_daemon || fail "exit code $?"
# Queued again while ldctd is stopped: ldct jobs shows the retry as a note,
# not as an error (JSON: note set, last_error empty). retry --json says
# how many items went back.
"$LDCT" --config "$T/ldctd.conf" retry "$gap" --json > "$T/retry.json" || fail "second ldct retry $gap"
[ "$(cat "$T/retry.json")" = "{\"job\":$gap,\"queued_again\":1,\"moved\":0,\"kept\":0}" ] || fail "retry --json: $(cat "$T/retry.json")"
"$LDCT" --config "$T/ldctd.conf" jobs --json > "$T/jobs2.json" || fail "ldct jobs --json"
python3 - "$T/jobs2.json" "$gap" <<'PY' || fail "retried job: $(cat "$T/jobs2.json")"
import json, sys
j = {j["id"]: j for j in json.load(open(sys.argv[1]))}[int(sys.argv[2])]
assert j["state"] == "pending" and j["attempts"] == 0, j
assert j["note"] == "queued again by ldct retry" and j["last_error"] == "", j
PY
"$LDCT" --config "$T/ldctd.conf" jobs > "$T/jobs2.txt" || fail "ldct jobs"
grep -q "^    queued again by ldct retry$" "$T/jobs2.txt" || fail "text: $(cat "$T/jobs2.txt")"
# Its derived series UID exists nowhere yet: said so (it was listed as if made).
grep -q "^    derived [0-9.]* (reserved for its result)$" "$T/jobs2.txt" || fail "reserved UID: $(cat "$T/jobs2.txt")"
if grep -q "error   queued again" "$T/jobs2.txt"; then fail "the note is shown as an error"; fi
