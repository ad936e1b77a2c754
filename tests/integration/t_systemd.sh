#!/usr/bin/env bash
# The systemd unit passes systemd-analyze verify (where systemd is installed)
# and the daemon speaks sd_notify (READY=1, STOPPING=1) to NOTIFY_SOCKET.
. "$(dirname "$0")/lib.sh"
if command -v systemd-analyze > /dev/null; then
    sed "s#/usr/bin/ldctd#$LDCTD#" "$ROOT/systemd/ldctd.service" > "$T/ldctd.service"
    out=$(systemd-analyze verify "$T/ldctd.service" 2>&1) || fail "systemd-analyze: $out"
    [ -z "$out" ] || fail "systemd-analyze warnings: $out"
else
    note "systemd-analyze not installed; unit not verified"
fi
command -v socat > /dev/null || skip "socat not installed"
socat -u UNIX-RECVFROM:"$T/notify",fork OPEN:"$T/notify.log",creat,append &
sock=$!
sleep 0.3
NOTIFY_SOCKET="$T/notify" start_daemon
for _ in $(seq 1 30); do grep -q READY=1 "$T/notify.log" && break; sleep 0.1; done
grep -q READY=1 "$T/notify.log" || fail "no READY=1"
stop_daemon || fail "exit code $?"
sleep 0.3
grep -q STOPPING=1 "$T/notify.log" || fail "no STOPPING=1"
kill "$sock"
