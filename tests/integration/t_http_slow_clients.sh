#!/usr/bin/env bash
# Slow HTTP clients (slowloris): 100 connections from one address that
# send their request a byte every 2 s are never idle for the 5 s timeout.
# They held all 64 slots, and /healthz from every other address was
# refused for as long as they went on. One address now holds at most 32
# of the 64 slots: monitoring from another address (127.0.0.2, also
# loopback) is answered while they go on, and DICOM (C-ECHO) never
# depended on it.
. "$(dirname "$0")/lib.sh"
HTTP=$(free_port)
write_config "http_port = $HTTP" "http_bind = 0.0.0.0"
start_daemon
python3 - "$HTTP" << 'PY' || fail "slow clients locked /healthz out"
import socket, sys, time
port = int(sys.argv[1])
slow = []
for _ in range(100):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=2)
        s.sendall(b"GET /status HTTP/1.1\r\n")
        slow.append(s)
    except OSError:
        pass
def healthz():
    c = socket.socket()
    c.settimeout(3)
    c.bind(("127.0.0.2", 0))
    try:
        c.connect(("127.0.0.1", port))
        c.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        r = b""
        while True:
            b = c.recv(4096)
            if not b:
                break
            r += b
        return r.startswith(b"HTTP/1.1 200") and r.endswith(b"ok\n")
    except OSError:
        return False
    finally:
        c.close()
for i in range(4):  # 8 s: beyond the idle timeout, so only the trickle keeps them
    for s in slow:
        try:
            s.sendall(b"X")
        except OSError:
            pass
    assert healthz(), "no /healthz from 127.0.0.2 at %d s" % (2 * i)
    time.sleep(2)
PY
echoscu -to 5 -aec LDCTNODE 127.0.0.1 "$PORT" || fail "C-ECHO"
stop_daemon || fail "exit code $?"
