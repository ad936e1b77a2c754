#!/usr/bin/env bash
# A job whose result has no room on the results disk waits for space: it is
# not computed, uses no attempt (so it never fails for a full disk), says
# why in `ldct jobs` and the log (once), and runs by itself once space is
# freed. Needs a small tmpfs for the results folder (root); skipped otherwise.
. "$(dirname "$0")/lib.sh"
RESULTS=$T/results
mkdir -p "$RESULTS"
mounted_here=0
trap '[ -n "$DAEMON_PID" ] && kill -9 "$DAEMON_PID" 2>/dev/null; wait 2>/dev/null
      [ "$mounted_here" = 1 ] && umount "$RESULTS"; cleanup' EXIT
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=2m tmpfs "$RESULTS" 2>/dev/null; then
    skip "no tmpfs mount here"
fi
mounted_here=1
dd if=/dev/zero of="$RESULTS/fill" bs=4k 2>/dev/null # the results disk is full
write_config "stable_seconds = 1" "devices = cpu" "results_dir = $RESULTS" "job_max_attempts = 2"
start_daemon
"$MKSERIES" --out "$T/s" --rows 64 --cols 64 --slices 6 --noise 20 > /dev/null || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm || fail "storescu"
waiting() { grep -q "job 1: series .*: waiting for disk space" "$T/ldctd.log"; }
wait_until 30 "job 1 waits for space" waiting
sleep 16 # more than one check: with attempts counted it would fail by now
job_is 1 pending || fail "job 1 is $(job_state 1): $(job_error 1)"
[ "$(sql "SELECT attempts FROM jobs WHERE id = 1")" = 0 ] || fail "the wait used attempts"
job_error 1 | grep -q "waiting for disk space: the result needs about 1 MB in $RESULTS" ||
    fail "last_error: $(job_error 1)"
"$LDCT" --config "$T/ldctd.conf" jobs | grep -q "waiting for disk space" ||
    fail "ldct jobs does not say why the job waits"
[ "$(grep -c "waiting for disk space" "$T/ldctd.log")" = 1 ] || fail "the wait is logged repeatedly"
[ "$(grep -c "<6>job 1: series" "$T/ldctd.log")" = 1 ] || fail "each check logs the job's start"
[ "$(find "$RESULTS" -name '*.dcm' | wc -l)" = 0 ] || fail "files written while waiting"
rm -f "$RESULTS/fill"
wait_until 30 "job 1 done after space was freed" job_is 1 done
[ "$(find "$RESULTS" -name '*.dcm' | wc -l)" = 6 ] || fail "derived files: $(find "$RESULTS" -name '*.dcm' | wc -l)"
stop_daemon || fail "exit code $?"
