#!/usr/bin/env bash
# A job that runs for seconds on the CPU shows its progress while it runs:
# ldct jobs names the stage (filtering) with a percentage that only goes
# up, an estimate of the time left once it can tell, and the progress is
# gone when the job is done (the worker removes its row). GET /status
# lists the running job with the same progress (by job id, no UID), and
# ldct status prints a line for it; both are empty once it is done.
. "$(dirname "$0")/lib.sh"
HTTP=$(free_port)
write_config "stable_seconds = 1" "devices = cpu" "http_port = $HTTP" "[rule all]" \
    "algorithm = nlm3d" "search_radius = 7"
start_daemon
have_curl=0
command -v curl > /dev/null && have_curl=1
# About 8 s of nlm3d on the CPU here (384x384x64 at S 7); a slower build
# (LDCT_TEST_SLOWDOWN) gets its area divided by the slowdown.
side=$(awk -v s="$SLOWDOWN" 'BEGIN { printf "%d", 384 / sqrt(s) }')
"$MKSERIES" --out "$T/big" --rows "$side" --cols "$side" --slices 64 --thickness 1 --noise 20 \
    > /dev/null || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/big/*.dcm || fail "storescu"
wait_until 20 "the job running" job_is 1 running
# Poll until the job ends: each poll one line "state stage fraction remaining".
: > "$T/polls"
while job_is 1 running; do
    "$LDCT" --state-dir "$STATE" jobs --json 2> "$T/err" | python3 -c '
import json, sys
j = json.load(sys.stdin)[0]
p = j["progress"] or {}
print(j["state"], p.get("stage", "-"), p.get("fraction"), p.get("stage_remaining_ms"))
' >> "$T/polls" || fail "ldct jobs --json: $(cat "$T/err")"
    "$LDCT" --state-dir "$STATE" jobs > "$T/text" 2>&1
    grep -q "progress filtering [0-9]*%" "$T/text" && cp "$T/text" "$T/text_filtering"
    "$LDCT" --state-dir "$STATE" status > "$T/status_text" 2>&1
    grep -q "^running: *job 1 nlm3d on .* filtering [0-9]*%" "$T/status_text" &&
        cp "$T/status_text" "$T/status_filtering"
    [ "$have_curl" = 1 ] && curl -s "http://127.0.0.1:$HTTP/status" > "$T/status.json" &&
        python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))["running"]
p = r[0]["progress"] if r else None
if p and p["stage"] == "filtering" and p["fraction"] is not None and 0 < p["fraction"] < 1:
    sys.exit(0)
sys.exit(1)' "$T/status.json" && cp "$T/status.json" "$T/status_filtering.json"
    sleep 0.3
done
wait_until 30 "the job done" job_is 1 done
note "$(grep -c running "$T/polls") polls while running; last: $(grep running "$T/polls" | tail -n 1)"
# While filtering: fractions strictly between 0 and 1 at some poll, never
# going down, and an estimate of the time left at some poll.
python3 - "$T/polls" <<'PY' || fail "progress while running: $(cat "$T/polls")"
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.startswith("running filtering")]
fr = [float(r[2]) for r in rows if r[2] != "None"]
assert any(0 < f < 1 for f in fr), "no fraction between 0 and 1"
assert all(a <= b for a, b in zip(fr, fr[1:])), "a fraction went down"
assert any(r[3] != "None" and int(r[3]) > 0 for r in rows), "no estimate of the time left"
PY
[ -f "$T/text_filtering" ] || fail "ldct jobs never showed 'progress filtering N%'"
note "$(grep progress "$T/text_filtering")"
"$LDCT" --state-dir "$STATE" jobs --json | python3 -c '
import json, sys
assert json.load(sys.stdin)[0]["progress"] is None' || fail "progress still shown after the job"
[ "$(sql "SELECT count(*) FROM job_progress")" = 0 ] || fail "the job's progress row was left"
[ -f "$T/status_filtering" ] || fail "ldct status never showed the running job filtering"
note "$(grep running: "$T/status_filtering")"
"$LDCT" --state-dir "$STATE" status | grep -q "^running:" && fail "ldct status: a job still running"
if [ "$have_curl" = 1 ]; then
    [ -f "$T/status_filtering.json" ] || fail "/status never showed the job filtering"
    python3 - "$T/status_filtering.json" <<'PY' || fail "/status: $(cat "$T/status_filtering.json")"
import json, sys
j = json.load(open(sys.argv[1]))["running"][0]
assert j["id"] == 1 and j["algorithm"] == "nlm3d" and j["rule"] == "all", j
assert j["worker"] and j["attempts"] == 1 and j["started_ms"] > 0, j
assert j["progress"]["updated_ms"] >= j["started_ms"], j
PY
    uid=$(sql "SELECT series_uid FROM series LIMIT 1")
    ! grep -q "$uid" "$T/status_filtering.json" || fail "a UID in /status"
    curl -s "http://127.0.0.1:$HTTP/status" | python3 -c '
import json, sys
assert json.load(sys.stdin)["running"] == []' || fail "/status: a job still running"
fi
exit 0
