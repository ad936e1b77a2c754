#!/usr/bin/env bash
# A resent instance (same SOP Instance UID: a scanner or PACS pushing a
# series again) must not wedge the receiver. Before the fix the duplicate
# lookup left its statement open, so the receiving connection kept a stale
# read snapshot; once another connection wrote (the series' job), every
# later C-STORE failed with "database is locked" and was refused with
# 0xA700 until ldctd was restarted.
# An instance re-sent under another series empties the first: it gets no
# job. Processed again, a series keeps its derived UIDs only when the result is
# the same (same instances and rule); with another strength it becomes a new
# derived series, since an instance never changes its pixels under its UID.
. "$(dirname "$0")/lib.sh"
derived_series() { sql "SELECT derived_series_uid FROM jobs WHERE id = $1"; }
derived_sop() {
    sql "SELECT derived_sop_uid FROM derived_instances WHERE job_id = $1 ORDER BY source_sop_uid LIMIT 1"
}
write_config "stable_seconds = 1" "[rule all]" "match.modality = CT" "algorithm = nlm3d"
start_daemon
"$MKSERIES" --out "$T/a" --rows 16 --cols 16 --slices 3 --thickness 1 --noise 5 > /dev/null || fail mkseries
"$MKSERIES" --out "$T/b" --rows 16 --cols 16 --slices 3 --thickness 1 --noise 5 --seed 2 > /dev/null ||
    fail mkseries
storescu -aec LDCTNODE localhost "$PORT" "$T"/a/*.dcm || fail "first send of a"
wait_until 20 "job 1 done" job_is 1 done
storescu -aec LDCTNODE localhost "$PORT" "$T/a/IMG0001.dcm" || fail "resend of a/IMG0001 refused"
# The resent instance reopens the series; the loop writes its new job.
wait_until 20 "job 2 done" job_is 2 done
[ "$(derived_series 2)" = "$(derived_series 1)" ] || fail "the same result became a new derived series"
[ "$(derived_sop 2)" = "$(derived_sop 1)" ] || fail "the same result got new SOP Instance UIDs"
storescu -aec LDCTNODE localhost "$PORT" "$T"/b/*.dcm 2> "$T/b.err" ||
    fail "series b refused after a resend"
[ "$(db_instances)" = 6 ] || fail "expected 6 instances, got $(db_instances)"
grep -q "database is locked" "$T/ldctd.log" && fail "database locked"
wait_until 20 "job 3 done" job_is 3 done
write_config "stable_seconds = 1" "[rule all]" "match.modality = CT" "algorithm = nlm3d" "strength = 2"
kill -HUP "$DAEMON_PID"
wait_until 10 "reload" grep -q "configuration reloaded" "$T/ldctd.log"
storescu -aec LDCTNODE localhost "$PORT" "$T/a/IMG0001.dcm" || fail "second resend of a/IMG0001"
wait_until 20 "job 4 done" job_is 4 done
[ "$(derived_series 4)" != "$(derived_series 1)" ] || fail "another strength kept the derived series UID"
[ "$(derived_sop 4)" != "$(derived_sop 1)" ] || fail "another strength kept a SOP Instance UID"
# An instance re-sent under another series moves there; a series left with
# no instance before it became stable gets no job (it failed with "the
# series has no instances").
"$MKSERIES" --out "$T/c" --rows 16 --cols 16 --slices 1 --noise 5 --seed 3 > /dev/null || fail mkseries
c_series=$(dcmdump -q +P 0020,000e "$T"/c/*.dcm | sed -E 's/.*\[(.*)\].*/\1/')
cp "$T/c/IMG0001.dcm" "$T/moved.dcm"
dcmodify -nb -q -m "SeriesInstanceUID=$c_series.9" "$T/moved.dcm" || fail dcmodify
storescu -aec LDCTNODE localhost "$PORT" "$T/c/IMG0001.dcm" "$T/moved.dcm" || fail "send of c, moved"
wait_until 20 "job 5 done" job_is 5 done
empty_unmatched() { [ "$(sql "SELECT state FROM series WHERE series_uid = '$c_series'")" = unmatched ]; }
wait_until 20 "the emptied series unmatched" empty_unmatched
[ "$(sql "SELECT count(*) FROM jobs")" = 5 ] || fail "a job for the emptied series"
grep -q "series $c_series has no instances left" "$T/ldctd.log" || fail "no log line for the emptied series"
exit 0
