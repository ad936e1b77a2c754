#!/usr/bin/env bash
# Peers refused with A-ASSOCIATE-RJ that never close hold no more than 32
# threads of the daemon between them: each refused connection waited
# acse_timeout for its peer to close in a thread of its own, uncounted, so
# a flood of them grew the daemon by a thread per connection (the network
# fuzz review). Every peer still reads its rejection, and C-ECHO works
# meanwhile.
. "$(dirname "$0")/lib.sh"
write_config "acse_timeout = 30"
start_daemon
threads() { sed -nE 's/^Threads:\s+([0-9]+)/\1/p' "/proc/$DAEMON_PID/status"; }
base=$(threads)
python3 - "$ROOT/tests/tools" "$PORT" > "$T/flood.out" 2>&1 <<'PY' &
import socket, sys, time
sys.path.insert(0, sys.argv[1])
import rawscu
socks, rejected = [], 0
for i in range(80):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[2])), timeout=10)
    s.sendall(rawscu.associate_rq("NOTTHISNODE", "FLOOD%d" % i, "1.2.840.10008.1.2.1"))
    kind, _ = rawscu.recv_pdu(s)
    rejected += kind == 0x03
    socks.append(s)  # kept open: a peer that never closes
print("rejected", rejected, flush=True)
time.sleep(60)
PY
flood=$!
ready() { grep -q "^rejected" "$T/flood.out"; }
wait_until 30 "80 refused peers" ready
grep -q "^rejected 80$" "$T/flood.out" || fail "not every peer read its rejection: $(cat "$T/flood.out")"
now=$(threads)
[ "$now" -le $((base + 40)) ] ||
    fail "80 refused peers that stay open hold $((now - base)) threads (base $base)"
timeout $((5 * SLOWDOWN)) echoscu -to 5 -aec LDCTNODE 127.0.0.1 "$PORT" ||
    fail "C-ECHO failed while refused peers stay open"
kill "$flood" 2>/dev/null
wait "$flood" 2>/dev/null
stop_daemon || fail "exit code $?"
