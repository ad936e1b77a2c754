#!/usr/bin/env bash
# Status and metrics over HTTP (http_port): /healthz answers ok, /status is
# JSON with the queue totals and the daemon's own figures, /metrics is
# Prometheus text whose counts follow what was received (and the DICOM
# connections: accepted, rejected, failed); unknown paths get
# 404 and other methods 405; no UIDs or patient data in either; 20 idle
# connections (more than the old limit of 16) do not lock monitoring out,
# and the idle ones are dropped after the 5 s idle timeout; a flood over
# the connection limit is one log line, not one per connection. A second node
# whose http_port is taken does not start (monitoring would reach the first
# node): exit 1 with the reason, its DICOM port never opened. While a stop
# waits for an association, the three answer 503 "stopping".
. "$(dirname "$0")/lib.sh"
command -v curl > /dev/null || skip "no curl"
HTTP=$(free_port)
write_config "stable_seconds = 1" "http_port = $HTTP" "[rule mr-only]" "match.modality = MR"
start_daemon
url="http://127.0.0.1:$HTTP"
[ "$(curl -s "$url/healthz")" = ok ] || fail "healthz: $(curl -s "$url/healthz")"
"$MKSERIES" --out "$T/s" --rows 32 --cols 32 --slices 3 > /dev/null || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm || fail "storescu"
echoscu -aec SOMEONEELSE 127.0.0.1 "$PORT" 2> /dev/null && fail "an echo to another AE title"
python3 "$ROOT/tests/tools/rawscu.py" 127.0.0.1 "$PORT" garbage --wait 5 > /dev/null ||
    fail "rawscu garbage"
# An instance without a Series Instance UID is refused (0xC000): counted.
cp "$T/s/IMG0001.dcm" "$T/nouid.dcm" && dcmodify -nb -ea "(0020,000e)" "$T/nouid.dcm" ||
    fail "dcmodify"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T/nouid.dcm" > /dev/null 2>&1
curl -s "$url/status" > "$T/status.json" || fail "GET /status"
python3 - "$T/status.json" << 'PY' || fail "status: $(cat "$T/status.json")"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["instances"] == 3 and s["series"] == 1, s
assert s["uptime_s"] >= 0 and s["workers"] >= 1 and s["associations_active"] == 0, s
assert s["gpus_down"] == 0, s
assert set(s["jobs"]) == {"pending", "running", "done", "failed"}, s
assert s["version"], s
assert s["connections"] == {"accepted": 2, "rejected": 1, "failed": 1}, s
assert s["refused"] == {"resources": 0, "error": 1}, s
assert s["free_bytes"] > 0 and s["min_free_bytes"] == 0, s  # lib.sh: min_free_mb = 0
assert s["tls"] == {"certificate_not_after": None, "crl_next_update": None,
                    "ca_not_after": None}, s
PY
curl -s "$url/metrics" > "$T/metrics.txt" || fail "GET /metrics"
grep -qx "ldct_instances 3" "$T/metrics.txt" || fail "metrics: $(cat "$T/metrics.txt")"
grep -qx 'ldct_jobs{state="failed"} 0' "$T/metrics.txt" || fail "no job states"
grep -q '^# TYPE ldct_spool_bytes gauge$' "$T/metrics.txt" || fail "no TYPE lines"
grep -qx "ldct_gpus_down 0" "$T/metrics.txt" || fail "no ldct_gpus_down"
grep -qx "ldct_job_progress_age_seconds 0.0" "$T/metrics.txt" || fail "no progress age (no job runs)"
grep -q '^# TYPE ldct_connections_total counter$' "$T/metrics.txt" || fail "no connection counter"
for o in rejected failed; do
    grep -qx "ldct_connections_total{outcome=\"$o\"} 1" "$T/metrics.txt" || fail "no $o connection"
done
grep -qx 'ldct_connections_total{outcome="accepted"} 2' "$T/metrics.txt" || fail "accepted"
grep -qx 'ldct_instances_refused_total{reason="error"} 1' "$T/metrics.txt" || fail "no refusal"
grep -qx 'ldct_instances_refused_total{reason="resources"} 0' "$T/metrics.txt" || fail "resources"
grep -Eqx 'ldct_spool_free_bytes [1-9][0-9]*' "$T/metrics.txt" || fail "no free bytes"
grep -qx 'ldct_spool_min_free_bytes 0' "$T/metrics.txt" || fail "no min free bytes"
uid=$(dcmdump -q +P 0020,000e "$T/s/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
! grep -q "$uid" "$T/status.json" "$T/metrics.txt" || fail "a UID in the status"
[ "$(curl -s -o /dev/null -w '%{http_code}' "$url/nothing")" = 404 ] || fail "no 404"
[ "$(curl -s -o /dev/null -w '%{http_code}' -X POST "$url/status")" = 405 ] || fail "no 405"
python3 - "$HTTP" << 'PY' || fail "idle connections locked /healthz out"
import socket, sys, time, urllib.request
port = int(sys.argv[1])
idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(20)]
t = time.time()
assert urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=3).read().strip() == b"ok"
assert time.time() - t < 2, time.time() - t
idle[0].settimeout(10)
t = time.time()
assert idle[0].recv(1) == b"", "an idle connection got data"
assert time.time() - t < 8, "idle connection kept %.1f s" % (time.time() - t)
PY
# A flood over the connection limit is logged once, not per connection.
python3 - "$HTTP" << 'PY' || fail "connection flood"
import socket, sys, time
port = int(sys.argv[1])
held = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
time.sleep(0.5)
PY
n=$(grep -c "connection limit" "$T/ldctd.log")
[ "$n" = 1 ] || fail "$n connection-limit lines for 36 refused connections"
# The listener binds to loopback by default.
if command -v ss > /dev/null; then
    ss -ltn | grep -q "127.0.0.1:$HTTP " || fail "not on 127.0.0.1: $(ss -ltn | grep ":$HTTP ")"
fi
grep -q "MHD_OPTION" "$T/ldctd.log" && fail "libmicrohttpd option warning: $(grep MHD_OPTION "$T/ldctd.log")"
PORT2=$(free_port)
printf '[node]\nport = %s\nstate_dir = %s\nmin_free_mb = 0\nhttp_port = %s\n' "$PORT2" "$T/state2" \
    "$HTTP" > "$T/second.conf"
timeout 20 "$LDCTD" --config "$T/second.conf" > "$T/second.log" 2>&1
rc=$?
[ $rc = 1 ] || fail "second node with a taken http_port exited $rc, not 1: $(cat "$T/second.log")"
grep -q "cannot listen on http_port $HTTP: .*, or set http_port = 0" "$T/second.log" ||
    fail "no reason: $(cat "$T/second.log")"
grep -q "ldctd ready" "$T/second.log" && fail "the second node said it was ready"
[ -e "$T/state2" ] && fail "the node refused for its http_port created its state directory"
[ "$(curl -s "$url/healthz")" = ok ] || fail "the first node's monitoring was disturbed"
# While a stop waits for a running association, monitoring hears
# "stopping" (503) instead of a refused connection.
python3 "$ROOT/tests/tools/rawscu.py" 127.0.0.1 "$PORT" associate --wait $((30 * SLOWDOWN)) \
    > "$T/held.out" 2>&1 &
held=$!
wait_until 10 "an idle association accepted" grep -q "^accepted" "$T/held.out"
kill -TERM "$DAEMON_PID"
says_stopping() {
    [ "$(curl -s "$url/$1")" = stopping ] &&
        [ "$(curl -s -o /dev/null -w '%{http_code}' "$url/$1")" = 503 ]
}
wait_until 10 "/healthz says stopping" says_stopping healthz
says_stopping status || fail "/status while stopping: $(curl -s "$url/status")"
says_stopping metrics || fail "/metrics while stopping: $(curl -s "$url/metrics")"
kill "$held"
wait "$held"
stop_rc=0
wait "$DAEMON_PID" || stop_rc=$?
DAEMON_PID=
[ $stop_rc = 0 ] || fail "exit code $stop_rc"
