#!/usr/bin/env bash
# A stop whose grace ends while a job runs (a restart during a long job):
# ldctd exits 0 and says the job was cut off; the job is pending again
# with the cut-off run not counted, so restarts never use up
# job_max_attempts (three restarts failed a long job before, each start
# logging "recovered after an unclean stop"); the next start has nothing
# to recover, and the job, left alone, runs once and is done.
. "$(dirname "$0")/lib.sh"
write_config "stable_seconds = 1" "devices = cpu" "shutdown_grace_seconds = 1" \
    "job_max_attempts = 2" "[rule r]" "action = process" "algorithm = nlm3d" "search_radius = 7"
# 256x256x64 at S 7: several seconds on this machine's CPU, past the grace.
"$MKSERIES" --out "$T/a" --rows 256 --cols 256 --slices 64 --thickness 1 --noise 20 > /dev/null ||
    fail "mkseries"
start_daemon
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/a/*.dcm || fail "storescu"
for stop in 1 2 3; do
    [ "$stop" = 1 ] || start_daemon
    wait_until 30 "job 1 running (stop $stop)" job_is 1 running
    stop_daemon || fail "stop $stop: exit code $?"
    cut=$(grep -c "ldctd stopped (.*cut off" "$T/ldctd.log")
    [ "$cut" = "$stop" ] || [ "$stop" != 1 ] || skip "the job ended within the 1 s grace (machine too fast)"
    [ "$cut" = "$stop" ] || fail "stop $stop did not cut the job off: $(tail -n 3 "$T/ldctd.log")"
    grep -q "ldctd stopped (1 job(s) and 0 send(s) cut off; they run again at the next start" \
        "$T/ldctd.log" || fail "stop $stop: $(tail -n 3 "$T/ldctd.log")"
    [ "$(sql "SELECT state || ' ' || attempts FROM jobs WHERE id = 1")" = "pending 0" ] ||
        fail "after stop $stop: $(sql "SELECT state, attempts, last_error FROM jobs WHERE id = 1")"
done
start_daemon
if grep -q "recovered after an unclean stop" "$T/ldctd.log"; then
    fail "a clean stop taken as a crash: $(grep "recovered" "$T/ldctd.log")"
fi
wait_until $((120 * SLOWDOWN)) "job 1 done" job_is 1 done
[ "$(sql "SELECT attempts FROM jobs WHERE id = 1")" = 1 ] ||
    fail "attempts $(sql "SELECT attempts FROM jobs WHERE id = 1") after one whole run"
stop_daemon || fail "exit code $?"
