#!/usr/bin/env bash
# The minute's look at the quarantine runs beside the event loop, not on
# it: deleting 100000 refused instances past quarantine_days (a flood a
# month ago, expiring at once) does not hold up the systemd watchdog's
# pings, and the deletion is counted in one log line and in /status. The
# pool threads that run it, as every thread but the main one, block
# SIGHUP, SIGINT and SIGTERM: a late signal at a stop must reach no
# thread under the default action.
. "$(dirname "$0")/lib.sh"
N=100000
mkdir -p "$STATE/quarantine"
python3 - "$STATE/quarantine" "$N" << 'PY' || fail "cannot fill the quarantine"
import os, sys, time
d, n = sys.argv[1], int(sys.argv[2])
old = time.time() - 3 * 86400
for i in range(n):
    p = f"{d}/{i}-1.2.3.{i}.dcm"
    os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o600))
    os.utime(p, (old, old))
PY
# The notify socket: every datagram with the time it came, in ms.
python3 - "$T/notify" > "$T/notify.log" << 'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
while True:
    msg = s.recv(4096).decode(errors="replace").replace("\n", " ")
    print(int(time.monotonic() * 1000), msg, flush=True)
PY
sock=$!
trap 'kill $sock 2> /dev/null; cleanup' EXIT
wait_until 5 "the notify socket" test -S "$T/notify"
HTTP=$(free_port)
write_config "quarantine_days = 1" "http_port = $HTTP"
WATCHDOG_USEC=200000 NOTIFY_SOCKET="$T/notify" start_daemon
grep -q "systemd watchdog every 100 ms" "$T/ldctd.log" || fail "the watchdog is not on"
wait_until 60 "the expired instances deleted" grep -q \
    "quarantine: deleted $N refused instance(s) kept over 1 day(s)" "$T/ldctd.log"
sleep 0.5
[ -z "$(ls -A "$STATE/quarantine")" ] || fail "refused instances left in the quarantine"
curl -sf "http://127.0.0.1:$HTTP/status" | grep -q '"quarantine":{"instances":0,' ||
    fail "/status does not count the emptied quarantine: $(curl -s "http://127.0.0.1:$HTTP/status")"
# SigBlk bits: SIGHUP 0x1, SIGINT 0x2, SIGTERM 0x4000.
threads=0
for st in /proc/"$DAEMON_PID"/task/*/status; do
    tid=$(awk '/^Pid:/ { print $2 }' "$st")
    blk=$(awk '/^SigBlk:/ { print $2 }' "$st")
    [ "$tid" = "$DAEMON_PID" ] && continue
    threads=$((threads + 1))
    [ $((0x$blk & 0x4003)) = $((0x4003)) ] ||
        fail "thread $tid ($(cat /proc/"$DAEMON_PID"/task/"$tid"/comm)) takes stop signals: SigBlk $blk"
done
[ "$threads" -ge 8 ] || fail "only $threads threads besides the main one"
stop_daemon || fail "exit code $? after SIGTERM"
# From READY=1 on, no pause between two messages over 5 ping intervals.
gap=$(awk '/READY=1/ { on = 1 } on && last { g = $1 - last; if (g > max) max = g }
           on { last = $1 } END { print max + 0 }' "$T/notify.log")
pings=$(grep -c "WATCHDOG=1" "$T/notify.log")
note "$pings watchdog pings, longest pause ${gap} ms"
[ "$pings" -ge 5 ] || fail "only $pings watchdog pings"
[ "$gap" -lt $((500 * SLOWDOWN)) ] || fail "the event loop stalled ${gap} ms during the deletion"
