#!/usr/bin/env bash
# A job that hangs (here: one of its spool files replaced by a FIFO that no
# one writes, as a hung storage or a wedged GPU would hold it) is found
# after job_stall_seconds: one error names it, and ldctd stops answering
# systemd's watchdog (WATCHDOG=1 on NOTIFY_SOCKET) so that systemd would
# restart it. Once the job ends, the pings come back. Reception goes on
# meanwhile.
. "$(dirname "$0")/lib.sh"
command -v socat > /dev/null || skip "socat not installed"
socat -u UNIX-RECVFROM:"$T/notify",fork OPEN:"$T/notify.log",creat,append &
sleep 0.3
write_config "stable_seconds = 4" "devices = cpu" "job_stall_seconds = 3"
NOTIFY_SOCKET="$T/notify" WATCHDOG_USEC=2000000 start_daemon
grep -q "systemd watchdog every 1000 ms" "$T/ldctd.log" || fail "the watchdog is not on"
"$MKSERIES" --out "$T/s" --rows 32 --cols 32 --slices 4 > /dev/null || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm || fail "storescu"
# The last instance sent: rule matching reads the first one (on the
# daemon's loop, which a FIFO there would hold), the job reads them all.
last=$(ls "$T"/s/*.dcm | tail -n 1)
sop=$(dcmdump -q +P 0008,0018 "$last" | sed -E 's/.*\[([^]]*)\].*/\1/')
f=$(find "$STATE/spool" -name "$sop.dcm" -type f)
[ -n "$f" ] || fail "no spool file"
cp "$f" "$T/orig.dcm" && rm "$f" && mkfifo "$f" || fail "cannot put the FIFO in place"
wait_until $((15 * SLOWDOWN)) "the job runs" job_is 1 running || fail "job 1: $(job_state 1)"
pings() { grep -o "WATCHDOG=1" "$T/notify.log" | wc -l; }
stalled() { grep -Eq "$LOG_HEAD error: job 1 \(.* on worker-0/cpu, reading 0%\) has reported no progress for [0-9]+ s \(job_stall_seconds = 3\): the job or its GPU hangs; ldctd stops answering systemd's watchdog" "$T/ldctd.log"; }
wait_until $((15 * SLOWDOWN)) "the stall is reported" stalled
sleep 0.5
before=$(pings)
sleep 3
[ "$(pings)" = "$before" ] || fail "watchdog pings went on while the job was stalled ($before, then $(pings))"
[ "$(grep -c "has reported no progress" "$T/ldctd.log")" = 1 ] || fail "the stall was reported more than once"
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "reception stopped during the stall"
# The FIFO gets its bytes, as often as the job opens it (the header and
# the pixels are read apart): the job reads them, or fails as a FIFO
# cannot seek, and ends; the stall is over and the pings come back.
ended() { ! job_is 1 running; }
# dd opens the FIFO itself (a shell redirection blocked in open would
# outlive a kill) and timeout ends a writer no reader came for.
(while ! ended; do timeout 1 dd if="$T/orig.dcm" of="$f" status=none 2> /dev/null; done) &
feeder=$!
wait_until $((10 * SLOWDOWN)) "the job ends" ended
wait "$feeder"
wait_until 10 "the end of the stall logged" grep -q "job 1 reports progress again or ended" "$T/ldctd.log"
after=$(pings)
sleep 2.5
[ "$(pings)" -gt "$after" ] || fail "no watchdog pings after the stall ended: $(tr "\n" " " < "$T/notify.log" | tail -c 200)"
stop_daemon || fail "exit code $?"
