#!/usr/bin/env bash
# A job whose result has no room on the results disk waits for space: it is
# not computed, uses no attempt (so it never fails for a full disk), says
# why in `ldct jobs` and the log (once), does not hold up a job behind it
# that fits, and runs by itself once space is freed. Results may use half
# of min_free_mb (the other half is reception's). Needs a small tmpfs for
# the results folder (root); skipped otherwise.
. "$(dirname "$0")/lib.sh"
RESULTS=$T/results
mkdir -p "$RESULTS"
mounted_here=0
trap '[ -n "$DAEMON_PID" ] && kill -9 "$DAEMON_PID" 2>/dev/null; wait 2>/dev/null
      [ "$mounted_here" = 1 ] && umount "$RESULTS"; cleanup' EXIT
if [ "$(id -u)" != 0 ] || ! mount -t tmpfs -o size=8m tmpfs "$RESULTS" 2>/dev/null; then
    skip "no tmpfs mount here"
fi
mounted_here=1
free_kb=$(df -k --output=avail "$RESULTS" | tail -n 1)
dd if=/dev/zero of="$RESULTS/fill" bs=1k count=$((free_kb - 2560)) 2>/dev/null # 2.5 MiB left
# min_free_mb 2: results keep 1 MiB free, so 1 MiB of room is left for them.
write_config "stable_seconds = 1" "devices = cpu" "results_dir = $RESULTS" "job_max_attempts = 2" \
    "min_free_mb = 2"
start_daemon
"$MKSERIES" --out "$T/big" --rows 512 --cols 512 --slices 6 --noise 20 > /dev/null || fail "mkseries"
"$MKSERIES" --out "$T/small" --rows 64 --cols 64 --slices 4 --noise 20 > /dev/null || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/big/*.dcm || fail "storescu big"
waiting() { grep -q "job 1: series .*: waiting for disk space" "$T/ldctd.log"; }
wait_until 30 "job 1 waits for space" waiting
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/small/*.dcm || fail "storescu small"
wait_until 30 "job 2 (which fits) done while job 1 waits" job_is 2 done
sleep 16 # more than one check: with attempts counted job 1 would have failed by now
pending0() { [ "$(sql "SELECT state || ' ' || attempts FROM jobs WHERE id = 1")" = "pending 0" ]; }
wait_until 10 "job 1 pending without attempts used (is $(job_state 1): $(job_error 1))" pending0
job_error 1 | grep -q "^waiting for disk space: the result needs about 3.[0-9] MB in $RESULTS" ||
    fail "last_error: $(job_error 1)"
"$LDCT" --config "$T/ldctd.conf" jobs | grep -q "^    waiting for disk space: the result needs" ||
    fail "ldct jobs does not say why the job waits (as a note, not an error)"
[ "$(grep -c "waiting for disk space" "$T/ldctd.log")" = 1 ] || fail "the wait is logged repeatedly"
[ "$(grep -c "info: job 1: series" "$T/ldctd.log")" = 1 ] || fail "each check logs the job's start"
rm -f "$RESULTS/fill"
wait_until 40 "job 1 done after space was freed" job_is 1 done
[ "$(find "$RESULTS" -name '*.dcm' | wc -l)" = 10 ] ||
    fail "derived files: $(find "$RESULTS" -name '*.dcm' | wc -l)"
stop_daemon || fail "exit code $?"
