#!/usr/bin/env bash
# SIGTERM with a job running, two queued and an association that holds
# the shutdown grace open: the running job finishes, the queued ones are not
# started (they used to be claimed during the grace, only to risk being cut
# off at its end) and stay pending for the next start; exit 0.
. "$(dirname "$0")/lib.sh"
HTTP_PORT=$(free_port)
write_config "stable_seconds = 1" "devices = cpu" "shutdown_grace_seconds = 30" \
    "http_port = $HTTP_PORT" "[rule all]" "algorithm = nlm3d" "search_radius = 7"
start_daemon
# The big job must outlast the queueing of the other two and still end
# within the 30 s grace (55 s at most). A slower build (LDCT_TEST_SLOWDOWN,
# lib.sh) gets its area divided by the slowdown, so that the job takes
# about as long as in a plain build: at full size it took 152 s under
# ASan, past any grace. At 1 the series is 384x384x32, as stated below.
side=$(awk -v s="$SLOWDOWN" 'BEGIN { printf "%d", 384 / sqrt(s) }')
"$MKSERIES" --out "$T/big" --rows "$side" --cols "$side" --slices 32 --thickness 1 --noise 20 \
    > /dev/null || fail "mkseries big"
for s in b c; do
    "$MKSERIES" --out "$T/$s" --rows 32 --cols 32 --slices 4 --thickness 1 --noise 20 \
        --seed "$([ $s = b ] && echo 2 || echo 3)" > /dev/null || fail "mkseries $s"
done
# The big job (384x384x32 at S 7, about 4 s here) must still run when the
# two small series are queued (at S 5 it once took 1.6 s, too short).
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/big/*.dcm || fail "storescu big"
wait_until 20 "the big series' job running" job_is 1 running
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/b/*.dcm "$T"/c/*.dcm || fail "storescu b, c"
queued2() { [ "$(sql "SELECT count(*) FROM jobs WHERE state = 'pending'")" = 2 ]; }
wait_until 10 "two jobs queued behind it" queued2
job_is 1 running || skip "the big job ended before the others were queued (machine too fast)"
# The stalled association holds the stop for up to 12 s (then rawscu hangs
# up itself): long enough for the big job to end while it is held.
python3 "$ROOT/tests/tools/rawscu.py" 127.0.0.1 "$PORT" store "$T/b/IMG0001.dcm" --stall 1000 \
    --wait 12 > "$T/stall.out" 2>&1 &
assoc_open() {
    curl -s "http://127.0.0.1:$HTTP_PORT/status" | grep -q '"associations_active":1'
}
wait_until 10 "the stalled association open" assoc_open
kill -TERM "$DAEMON_PID"
rc=0; wait "$DAEMON_PID" || rc=$?
DAEMON_PID=
[ $rc = 0 ] || fail "exit code $rc"
grep -q "waiting up to 30 s for 1 association" "$T/ldctd.log" || fail "the grace was not held open"
[ "$(sql "SELECT state FROM jobs WHERE id = 1")" = done ] || fail "the running job did not finish"
[ "$(sql "SELECT count(*) FROM jobs WHERE state = 'pending'")" = 2 ] ||
    fail "queued jobs started while stopping: $(sql "SELECT id, state FROM jobs")"
sed -n '/SIGTERM/,$p' "$T/ldctd.log" | grep -E "job [23]: series" && fail "a job started after SIGTERM"
exit 0
