#!/usr/bin/env bash
# A peer that connects and never sends its A-ASSOCIATE-RQ holds only its own
# connection: while it stays silent, other peers associate at once, and the
# daemon still stops promptly. One address holding many silent connections
# gets at most 8 waiting once half of the 32 places for waiting requests
# are taken (the rest are closed at once), so it cannot take them all; a
# host not in allowed_hosts is closed before anything is read.
. "$(dirname "$0")/lib.sh"
start_daemon
grep -q "any host and any calling AE title may send to this node" "$T/ldctd.log" ||
    fail "no warning that anyone may send"
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

# Opens $2 silent connections from address $1 (each sends a few bytes, as
# a request would begin), waits until $3 of them are closed by the daemon
# (at most 10 s x SLOWDOWN) and 0.5 s more, prints how many were closed,
# and keeps the rest open $4 s.
silent_from() {
    python3 - "$1" "$PORT" "$2" "$3" "$4" "$SLOWDOWN" << 'PY'
import select, socket, sys, time
src, port, n, want, hold, slow = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:5]), \
    float(sys.argv[5]), int(sys.argv[6])
socks = []
for _ in range(n):
    s = socket.socket()
    s.bind((src, 0))
    s.connect(("127.0.0.1", port))
    s.send(b"\x01\x00")
    socks.append(s)
closed, t0, settle = set(), time.time(), None
while time.time() - t0 < 10 * slow and (settle is None or time.time() < settle):
    r, _, _ = select.select([s for s in socks if s not in closed], [], [], 0.1)
    for s in r:
        try:
            data = s.recv(1)
        except ConnectionResetError:
            data = b""
        if not data:
            closed.add(s)
    if settle is None and len(closed) >= want:
        settle = time.time() + 0.5
print(len(closed), flush=True)
time.sleep(hold)
PY
}
# A C-ECHO beside the flood named $1 answers within 3 s (x SLOWDOWN).
echo_beside_flood() {
    local start ms
    start=$(date +%s%N)
    timeout $((8 * SLOWDOWN)) echoscu -to 8 -ta 8 -aec LDCTNODE 127.0.0.1 "$PORT" ||
        fail "C-ECHO failed beside $1"
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    note "C-ECHO beside $1: ${ms} ms"
    [ "$ms" -lt $((3000 * SLOWDOWN)) ] || fail "C-ECHO took ${ms} ms beside $1"
}
flood_counted() { test -s "$T/flood.out"; }

# 40 silent connections from 127.0.0.2 beside a C-ECHO: $1 of them are
# closed, with a log line ending in $2; $3 names the case.
flood_case() {
    silent_from 127.0.0.2 40 "$1" 8 > "$T/flood.out" &
    flood=$!
    wait_until $((12 * SLOWDOWN)) "the flood counted" flood_counted
    [ "$(head -n 1 "$T/flood.out")" = "$1" ] ||
        fail "of $3, $(cat "$T/flood.out") were closed (want $1)"
    echo_beside_flood "$3"
    grep -q "connection from 127.0.0.2 closed before its association request: $2" \
        "$T/ldctd.log" || fail "no log line for $3"
}

write_config "acse_timeout = 30"
start_daemon
flood_case 24 "too many connections" "40 silent connections from one address"
[ "$(grep -c "closed before its association request" "$T/ldctd.log")" = 1 ] ||
    fail "one line per closed connection: $(grep -c "closed before" "$T/ldctd.log")"
# The others are counted in one line 10 s after the first, which names
# where they came from.
wait_until $((15 * SLOWDOWN)) "the count of the other closed connections" grep -q \
    "23 more connection(s) closed before their association request since the last such line, from 127.0.0.2 (23)$" \
    "$T/ldctd.log"
wait "$flood"
stop_daemon || fail "exit code $? after SIGTERM"

write_config "allowed_hosts = 127.0.0.1"
start_daemon
flood_case 40 "host not in allowed_hosts" "40 connections from a host not allowed"
# More addresses refused within the same 10 s: the count names the three
# busiest, busiest first, and counts the rest.
for a in 3:5 4:1 5:1 6:2; do
    [ "$(silent_from "127.0.0.${a%:*}" "${a#*:}" "${a#*:}" 0)" = "${a#*:}" ] ||
        fail "not all connections from 127.0.0.${a%:*} closed"
done
wait_until $((15 * SLOWDOWN)) "the count naming the busiest addresses" grep -q \
    "48 more connection(s) closed before their association request since the last such line, from 127.0.0.2 (39), 127.0.0.3 (5), 127.0.0.6 (2) and 2 from other address(es)$" \
    "$T/ldctd.log"
wait "$flood"
stop_daemon || fail "exit code $? after SIGTERM"
