#!/usr/bin/env bash
# A peer that connects and never sends its A-ASSOCIATE-RQ holds only its own
# connection: while it stays silent, other peers associate at once, and the
# daemon still stops promptly.
. "$(dirname "$0")/lib.sh"
start_daemon
exec 3<>/dev/tcp/127.0.0.1/"$PORT" || fail "cannot connect"
exec 4<>/dev/tcp/127.0.0.1/"$PORT" || fail "cannot connect a second time"
sleep 0.5
start=$(date +%s%N)
timeout 5 echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "C-ECHO blocked by a silent peer"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
note "C-ECHO beside two silent connections: ${ms} ms"
[ "$ms" -lt 2000 ] || fail "C-ECHO took ${ms} ms beside a silent peer"
exec 3>&- 4>&-
timeout 5 echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "C-ECHO failed after the silent peers left"
# A silent connection open at stop does not delay the exit.
exec 3<>/dev/tcp/127.0.0.1/"$PORT" || fail "cannot connect"
sleep 0.3
start=$(date +%s)
stop_daemon || fail "exit code $? after SIGTERM"
secs=$(( $(date +%s) - start ))
[ "$secs" -le 10 ] || fail "stop took ${secs} s with a silent connection open"
exec 3>&-
