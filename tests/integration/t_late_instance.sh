#!/usr/bin/env bash
# An instance that arrives while its series' job runs: that job's result
# (which misses it) is neither sent nor left in the results folder; the
# next job processes all instances under new UIDs, so the folder holds one
# complete derived series and no instance changed its pixels under a UID.
. "$(dirname "$0")/lib.sh"
write_config "stable_seconds = 1" "devices = cpu" "[rule all]" "match.modality = CT" \
    "algorithm = nlm3d" "search_radius = 7"
start_daemon
"$MKSERIES" --out "$T/s" --rows 256 --cols 256 --slices 24 --thickness 1 --noise 20 > /dev/null ||
    fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" $(ls "$T"/s/*.dcm | head -n 23) || fail "first 23"
running() { job_is 1 running; }
wait_until 30 "job 1 running" running
storescu -aec LDCTNODE 127.0.0.1 "$PORT" $(ls "$T"/s/*.dcm | tail -n 1) || fail "the late one"
job_is 1 running || skip "job 1 ended before the late instance (machine too fast for this test)"
wait_until 120 "job 2 done" job_is 2 done
grep -q "job 1: instances of series .* arrived while it ran" "$T/ldctd.log" || fail "no log line"
results="$STATE/results"
[ "$(ls "$results" | wc -l)" = 1 ] || fail "results folder: $(ls "$results")"
[ "$(ls "$results"/*/ | wc -l)" = 24 ] || fail "derived files: $(ls "$results"/*/ | wc -l)"
[ "$(sql "SELECT derived_series_uid FROM jobs WHERE id = 2")" = "$(ls "$results")" ] ||
    fail "the folder is not job 2's series"
"$LDCT" --config "$T/ldctd.conf" jobs | grep -q "not sent: instances arrived while it ran" ||
    fail "ldct jobs does not say job 1 was superseded"
stop_daemon || fail "exit code $?"
