#!/usr/bin/env bash
# A job that runs for seconds on the CPU shows its progress while it runs:
# ldct jobs names the stage (filtering) with a percentage that only goes
# up, an estimate of the time left once it can tell, and the progress is
# gone when the job is done (the worker removes its row).
. "$(dirname "$0")/lib.sh"
write_config "stable_seconds = 1" "devices = cpu" "[rule all]" "algorithm = nlm3d" \
    "search_radius = 7"
start_daemon
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
exit 0
