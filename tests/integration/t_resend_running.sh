#!/usr/bin/env bash
# A series sent again, unchanged, while its job runs (a scanner that
# repeats a transfer): the running job has every instance already, so the
# resend is acknowledged and changes nothing. Before, it reopened the
# series, the job's result was dropped as superseded and a second job did
# the same work for the same result. A changed instance still reopens it
# (t_late_instance).
. "$(dirname "$0")/lib.sh"
write_config "stable_seconds = 1" "devices = cpu" "log_level = debug" "[rule all]" \
    "match.modality = CT" "algorithm = nlm3d" "search_radius = 7"
start_daemon
"$MKSERIES" --out "$T/s" --rows 256 --cols 256 --slices 24 --thickness 1 --noise 20 > /dev/null ||
    fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm || fail "first send"
running() { job_is 1 running; }
wait_until 30 "job 1 running" running
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm || fail "the resend was refused"
job_is 1 running || skip "job 1 ended before the resend (machine too fast for this test)"
[ "$(grep -c "sent again unchanged; its job has it already" "$T/ldctd.log")" = 24 ] ||
    fail "not every resent instance was seen unchanged: $(grep -c "sent again unchanged" "$T/ldctd.log")"
[ "$(sql "SELECT state FROM series")" = queued ] || fail "the resend reopened the series"
wait_until 120 "job 1 done" job_is 1 done
sleep 2 # a reopened series would be stable again by now and get job 2
[ "$(sql "SELECT count(*) FROM jobs")" = 1 ] || fail "$(sql "SELECT count(*) FROM jobs") jobs"
[ "$(sql "SELECT count(*) FROM instances")" = 24 ] || fail "instances: $(sql "SELECT count(*) FROM instances")"
results="$STATE/results"
[ "$(ls "$results"/*/ | wc -l)" = 24 ] || fail "derived files: $(ls "$results"/*/ | wc -l)"
grep -q "arrived while it ran" "$T/ldctd.log" && fail "job 1 was superseded by the unchanged resend"
stop_daemon || fail "exit code $?"

# A spool file without its row (a kill between the rename and the commit:
# the instance was never acknowledged) proves nothing: the sender's retry
# of those bytes is stored and reaches a job, although the series' job
# runs and the bytes match.
"$MKSERIES" --out "$T/b" --rows 256 --cols 256 --slices 24 --thickness 1 --noise 20 --seed 3 \
    > /dev/null || fail "mkseries b"
write_config "stable_seconds = 60" "devices = cpu" "log_level = debug" "[rule all]" \
    "match.modality = CT" "algorithm = nlm3d" "search_radius = 7"
start_daemon
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/b/*.dcm || fail "series b"
stop_daemon || fail "exit code $?"
last=$(dcmdump -q +P 0008,0018 "$T/b/IMG0024.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
orphan=$(sql "SELECT path FROM instances WHERE sop_instance_uid = '$last'")
[ -f "$orphan" ] || fail "no spool file for $last"
sqlite3 "$STATE/ldct.db" "DELETE FROM instances WHERE sop_instance_uid = '$last';
    UPDATE series SET instance_count = instance_count - 1, last_received_ms = 0, stable_seconds = 1
    WHERE instance_count = 24 AND state = 'receiving'" || fail "sqlite3"
write_config "stable_seconds = 1" "devices = cpu" "log_level = debug" "[rule all]" \
    "match.modality = CT" "algorithm = nlm3d" "search_radius = 7"
start_daemon
wait_until 30 "job 2 (23 instances) running" job_is 2 running
[ -f "$orphan" ] || skip "the start removed the file without a row"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T/b/IMG0024.dcm" || fail "the retry"
job_is 2 running || skip "job 2 ended before the retry (machine too fast for this test)"
grep -q "instance $last of series .* sent again unchanged" "$T/ldctd.log" &&
    fail "the retry of an instance without a row was dropped"
[ "$(sql "SELECT count(*) FROM instances WHERE sop_instance_uid = '$last'")" = 1 ] ||
    fail "the retry was not recorded"
wait_until 120 "job 3 (all 24) done" job_is 3 done
[ "$(sql "SELECT input_count FROM jobs WHERE id = 3")" = 24 ] ||
    fail "job 3 has $(sql "SELECT input_count FROM jobs WHERE id = 3") instances"
stop_daemon || fail "exit code $?"
