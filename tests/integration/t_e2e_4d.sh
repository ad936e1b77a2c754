#!/usr/bin/env bash
# The daemon on a 4D series: a scanner sends 5 slice positions at 4 time
# points (TriggerTime) to ldctd; the rule's `algorithm = auto` becomes
# adaptive4d once the series is assembled (the job row keeps "auto"; ldct
# jobs shows "adaptive4d (auto)"), and
# every one of the 20 instances gets a derived instance in the results
# folder whose DerivationDescription names adaptive4d, the 4 time points
# and the M-function threshold the rule set (adaptive4d.m_sigma).
. "$(dirname "$0")/lib.sh"
write_config "stable_seconds = 1" "devices = cpu" "[rule all]" "action = process" "algorithm = auto" \
    "adaptive4d.m_sigma = 4.5"
start_daemon
"$MKSERIES" --out "$T/in" --rows 32 --cols 32 --slices 5 --thickness 1 --times 4 --noise 20 \
    > /dev/null || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/in/*.dcm || fail "storescu"
done1() { [ "$(sql "SELECT count(*) FROM jobs WHERE state = 'done'")" = 1 ]; }
wait_until 90 "the 4D series processed" done1
[ "$(sql "SELECT algorithm FROM jobs")" = auto ] || fail "job algorithm: $(sql "SELECT algorithm FROM jobs")"
# ldct jobs says what auto became (and the derived UID is no longer
# "reserved" once the job is done).
"$LDCT" --state-dir "$STATE" jobs --json | python3 -c '
import json, sys
j = json.load(sys.stdin)[0]
assert j["algorithm"] == "auto" and j["ran_algorithm"] == "adaptive4d", j' || fail "jobs --json: ran_algorithm"
"$LDCT" --state-dir "$STATE" jobs > "$T/jobs.txt"
grep -q "^job 1  done .* adaptive4d (auto) rule all" "$T/jobs.txt" && grep -q "^    derived [0-9.]*$" "$T/jobs.txt" ||
    fail "ldct jobs: $(cat "$T/jobs.txt")"
n=$(find "$STATE/results" -name '*.dcm' | wc -l)
[ "$n" = 20 ] || fail "expected 20 derived instances, got $n"
f=$(find "$STATE/results" -name '*.dcm' | head -1)
desc=$(dcmdump -q +L +P 0008,2111 "$f")
echo "$desc" | grep -q "adaptive4d" || fail "DerivationDescription: $desc"
echo "$desc" | grep -q "4 time points" || fail "DerivationDescription lacks the time points: $desc"
echo "$desc" | grep -q "M-function sigma 4.50" || fail "the rule's adaptive4d.m_sigma did not reach the filter: $desc"
grep -q "adaptive4d on cpu" "$T/ldctd.log" || note "worker log line does not name adaptive4d"
stop_daemon || fail "exit code $?"
