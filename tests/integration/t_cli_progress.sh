#!/usr/bin/env bash
# ldct jobs shows how far a running job is: stage, percentage, the time
# left counted down from the worker's last update, and how old that update
# is (said plainly past a minute); nothing for a job that is not running
# or for a row older than the job's start. The JSON has "progress" for
# every job (null, or with null for what is unknown). A database of schema
# 8 (no job_progress) lists without progress; ldctd's start clears what an
# earlier run wrote.
. "$(dirname "$0")/lib.sh"
write_config
start_daemon
stop_daemon || fail "ldctd did not stop cleanly"
now=$(date +%s%3N)
# Job 1 running with a fresh update; 2 running, nothing known but the stage,
# last heard of 75 s ago; 3 done with a row left; 4 running with a row from
# before its start (an earlier attempt).
sql "INSERT INTO series (study_uid, series_uid, first_received_ms, last_received_ms,
    stable_seconds) VALUES ('1.2', '1.2.3', 1, 1, 30);
    INSERT INTO jobs (series_id, rule, action, algorithm, created_ms, started_ms, state)
    VALUES (1, 'r', 'process', 'nlm3d', $now - 100000, $now - 90000, 'running'),
           (1, 'r', 'process', 'nlm3d', $now - 100000, $now - 90000, 'running');
    INSERT INTO jobs (series_id, rule, action, algorithm, created_ms, started_ms, finished_ms,
    state) VALUES (1, 'r', 'process', 'nlm3d', $now - 100000, $now - 90000, $now - 1000, 'done');
    INSERT INTO jobs (series_id, rule, action, algorithm, created_ms, started_ms, state)
    VALUES (1, 'r', 'process', 'nlm3d', $now - 100000, $now - 20000, 'running');
    INSERT INTO job_progress VALUES (1, 'filtering', 0.45, 153000, $now - 3000),
        (2, 'reading', -1, -1, $now - 75000), (3, 'writing', 0.9, 1000, $now - 2000),
        (4, 'filtering', 0.5, 5000, $now - 30000)" || fail "sqlite3"
"$LDCT" --state-dir "$STATE" jobs > "$T/out" 2> "$T/err" || fail "ldct jobs: $(cat "$T/err")"
# The shell's clock was read before ldct's: allow a few seconds for a slow run.
grep -Eq "^    progress filtering 45%, about 2 min (2[0-9]|30) s left \(updated ([3-9]|1[0-2]) s ago\)$" \
    "$T/out" || fail "job 1: $(cat "$T/out")"
grep -Eq "^    progress reading \(no update for 1 min (1[5-9]|2[0-7]) s\)$" "$T/out" ||
    fail "job 2: $(cat "$T/out")"
[ "$(grep -c "progress" "$T/out")" = 2 ] || fail "progress of a job not running or stale: $(cat "$T/out")"
# Each line under its own job.
awk '/^job /{j=$2} /^    progress/{print j}' "$T/out" | tr '\n' ' ' | grep -qx "2 1 " ||
    fail "progress under the wrong job: $(cat "$T/out")"
"$LDCT" --state-dir "$STATE" jobs --json > "$T/out.json" || fail "ldct jobs --json"
python3 - "$T/out.json" "$now" << 'EOF' || fail "JSON: $(cat "$T/out.json")"
import json, sys
jobs = {j["id"]: j for j in json.load(open(sys.argv[1]))}
now = int(sys.argv[2])
assert all("progress" in j for j in jobs.values()), jobs
assert jobs[1]["progress"] == {"stage": "filtering", "fraction": 0.45, "stage_remaining_ms": 153000,
                               "updated_ms": now - 3000}, jobs[1]
assert jobs[2]["progress"] == {"stage": "reading", "fraction": None, "stage_remaining_ms": None,
                               "updated_ms": now - 75000}, jobs[2]
assert jobs[3]["progress"] is None and jobs[4]["progress"] is None, jobs
EOF
# Schema 8, as an older ldctd writes it: listed, no progress anywhere.
cp "$STATE/ldct.db" "$T/v9.db"
sql "DROP TABLE job_progress; PRAGMA user_version = 8"
"$LDCT" --state-dir "$STATE" jobs > "$T/out" 2> "$T/err" || fail "ldct jobs, schema 8: $(cat "$T/err")"
[ "$(grep -c "^job " "$T/out")" = 4 ] || fail "schema 8 listing: $(cat "$T/out")"
grep -q "progress" "$T/out" && fail "progress on schema 8: $(cat "$T/out")"
"$LDCT" --state-dir "$STATE" jobs --json | python3 -c '
import json, sys
jobs = json.load(sys.stdin)
assert len(jobs) == 4 and all(j["progress"] is None for j in jobs), jobs' || fail "schema 8 JSON"
# ldctd's start clears every row written before it (its recovery).
rm -f "$STATE"/ldct.db*
cp "$T/v9.db" "$STATE/ldct.db"
started=$(date +%s%3N)
start_daemon
[ "$(sql "SELECT count(*) FROM job_progress WHERE updated_ms < $started")" = 0 ] ||
    fail "progress of the last run kept: $(sql "SELECT * FROM job_progress")"
stop_daemon || fail "ldctd did not stop cleanly"
