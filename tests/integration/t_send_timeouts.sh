#!/usr/bin/env bash
# Sends that fail at a peer say what happened in the administrator's terms:
# a peer that accepts TCP but never answers the association request, one
# that accepts the association but never answers the C-STORE (both name the
# destination's timeout), one whose answer is not DICOM (an HTTP server
# on the port), and one that closes the connection at once.
. "$(dirname "$0")/lib.sh"
HUNG=$(free_port)
python3 -c 'import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); c = []
while True: c.append(s.accept()[0])' "$HUNG" &
hung=$!
HTTP_PEER=$(free_port)
python3 -c 'import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
while True:
    c = s.accept()[0]; c.sendall(b"HTTP/1.0 400 Bad Request\r\n\r\n"); c.close()' "$HTTP_PEER" &
http_peer=$!
CLOSER=$(free_port)
python3 -c 'import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
while True: s.accept()[0].close()' "$CLOSER" &
SLOW=$(free_port)
mkdir -p "$T/slow"
storescp -aet SLOW --sleep-during 30 -od "$T/slow" "$SLOW" > "$T/storescp.log" 2>&1 &
slow=$!
write_config "stable_seconds = 1" "devices = cpu" \
    "[destination hung]" "host = 127.0.0.1" "port = $HUNG" "ae_title = HUNG" "timeout = 2" \
    "retry_initial_seconds = 600" \
    "[destination slow]" "host = 127.0.0.1" "port = $SLOW" "ae_title = SLOW" "timeout = 2" \
    "retry_initial_seconds = 600" \
    "[destination web]" "host = 127.0.0.1" "port = $HTTP_PEER" "ae_title = WEB" "timeout = 2" \
    "retry_initial_seconds = 600" \
    "[destination closer]" "host = 127.0.0.1" "port = $CLOSER" "ae_title = CLOSER" \
    "timeout = 2" "retry_initial_seconds = 600" \
    "[rule r]" "action = route" "destinations = hung, slow, web, closer"
start_daemon
"$MKSERIES" --out "$T/s" --rows 32 --cols 32 --slices 2 > /dev/null || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm || fail "storescu"
failed_once() { [ "$(sql "SELECT count(*) FROM sends WHERE attempts = 1 AND state = 'pending'
                          AND last_error != ''")" = 4 ]; }
wait_until $((30 * SLOWDOWN)) "a failed attempt to each destination" failed_once
error_of() { sql "SELECT last_error FROM sends WHERE destination = '$1'"; }
error_of hung | grep -q "^cannot associate with HUNG at 127.0.0.1:$HUNG: no answer to the association request (the TCP connection was accepted) within the destination's timeout of 2 s$" ||
    fail "hung peer: $(error_of hung)"
error_of slow | grep -Eq "^C-STORE of [0-9.]+ to SLOW failed: no C-STORE response within the destination's timeout of 2 s$" ||
    fail "slow peer: $(error_of slow)"
error_of web | grep -q "^cannot associate with WEB at 127.0.0.1:$HTTP_PEER: the peer's answer is not DICOM (.*): is this port a DICOM node's?$" ||
    fail "HTTP peer: $(error_of web)"
error_of closer | grep -q "^cannot associate with CLOSER at 127.0.0.1:$CLOSER: the peer .*closed the connection" ||
    fail "closing peer: $(error_of closer)"
sql "SELECT last_error FROM sends" | grep -c . | grep -qx 4 || fail "an error spans lines: $(sql "SELECT last_error FROM sends")"
grep -Eq "$LOG_HEAD warning: send [0-9]+ to slow failed \(attempt 1\): C-STORE of .* no C-STORE response within" "$T/ldctd.log" ||
    fail "log: $(grep "to slow" "$T/ldctd.log")"
stop_daemon || fail "exit code $?"
