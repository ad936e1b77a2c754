#!/usr/bin/env bash
# A resent instance (same SOP Instance UID: a scanner or PACS pushing a
# series again) must not wedge the receiver. Before the fix the duplicate
# lookup left its statement open, so the receiving connection kept a stale
# read snapshot; once another connection wrote (the series' job), every
# later C-STORE failed with "database is locked" and was refused with
# 0xA700 until ldctd was restarted.
. "$(dirname "$0")/lib.sh"
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
storescu -aec LDCTNODE localhost "$PORT" "$T"/b/*.dcm 2> "$T/b.err" ||
    fail "series b refused after a resend"
[ "$(db_instances)" = 6 ] || fail "expected 6 instances, got $(db_instances)"
grep -q "database is locked" "$T/ldctd.log" && fail "database locked"
wait_until 20 "job 3 done" job_is 3 done
exit 0
