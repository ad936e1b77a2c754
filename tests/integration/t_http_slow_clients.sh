#!/usr/bin/env bash
# Slow HTTP clients (slowloris): 100 connections from one address that
# send their request a byte every 2 s are never idle for the 5 s timeout.
# They held all 64 slots, and /healthz from every other address was
# refused for as long as they went on. One address now holds at most 32
# of the 64 slots: monitoring from another address (127.0.0.2, also
# loopback) is answered while they go on, and DICOM (C-ECHO) never
# depended on it. Monitoring from the slow clients' own address (the
# default bind is 127.0.0.1, so every client is one address) gets in
# again at the request deadline, which closes them (http_guard.h).
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
# Slowloris: 40 connections from the monitor's own address send a request
# a byte a second. They hold every slot of the address (32), so /healthz
# is refused at first; the request deadline (10 s) closes them and
# /healthz answers again while they still drip.
python3 - "$HTTP" << 'PY' || fail "slow requests locked monitoring out"
import socket, sys, threading, time, urllib.request
port = int(sys.argv[1])
slow = []
for _ in range(40):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    slow.append(s)
t0 = time.time()
closed = set()
stop = False
def drip():
    while not stop:
        for i, s in enumerate(slow):
            try:
                s.sendall(b"a")
            except OSError:
                closed.add(i)
        time.sleep(1)
threading.Thread(target=drip, daemon=True).start()
def healthy():
    try:
        return urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=1).read() == b"ok\n"
    except OSError:
        return False
time.sleep(1)
assert not healthy(), "not locked out at first: the test does not test the guard"
while not healthy():
    assert time.time() - t0 < 16, "still locked out after %.1f s" % (time.time() - t0)
    time.sleep(0.5)
back = time.time() - t0
assert back > 9, "back after %.1f s, before the deadline" % back
time.sleep(2)
stop = True
assert len(closed) >= 32, "%d of the slow connections were closed" % len(closed)
print("  healthz back after %.1f s; %d slow connections closed" % (back, len(closed)))
PY
grep -q "no whole request within the deadline" "$T/ldctd.log" || fail "no log line for the closed ones"
echoscu -to 5 -aec LDCTNODE 127.0.0.1 "$PORT" || fail "C-ECHO"
stop_daemon || fail "exit code $?"
