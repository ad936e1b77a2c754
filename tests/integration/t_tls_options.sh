#!/usr/bin/env bash
# DICOM TLS beyond t_tls's defaults:
# - tls_require_client_certificate = no: a caller without a certificate is
#   served; one that sends a certificate from another CA is still refused.
# - The default profile (bcp195-nd) refuses a caller's 1024-bit key
#   (OpenSSL security level 2) and TLS 1.2 with AES128-SHA; tls_profile =
#   bcp195 serves both (fallback for older peers).
# - /metrics counts the refused handshakes as failed connections.
# - The command guard and the association parser read the decrypted data:
#   a nested command set and an unparsable A-ASSOCIATE-RQ sent over TLS
#   end their connection, and the daemon lives on.
# - A SIGTERM with a stalled association on each port: both ports share one
#   grace period and are aborted together, exit 0.
# - tls_peer_name: a destination whose certificate carries the name (DNS or
#   IP address in subjectAltName) gets the derived series; one that names
#   another host is refused at the handshake ("hostname mismatch") and its
#   send ends dead, though its certificate chains to the CA and carries a
#   wildcard (*.hospital.test) that would cover the name.
. "$(dirname "$0")/lib.sh"
command -v openssl > /dev/null || skip "no openssl"

# A CA and the node's, a caller's and a 1024-bit caller's certificates; a
# rogue CA with a caller of its own.
pki() {
    local d=$T/pki
    mkdir -p "$d"
    tls_ca "$d" ca
    tls_ca "$d" rogue
    tls_cert "$d" node ca
    tls_cert "$d" scanner ca
    tls_cert "$d" weak ca 1024
    tls_cert "$d" intruder rogue
    tls_cert "$d" pacs ca 2048 \
        -addext "subjectAltName=DNS:pacs.hospital.test,DNS:*.hospital.test,IP:127.0.0.1"
}
pki
P=$T/pki
TLS_PORT=$(free_port)
TLS_KEYS=("tls_port = $TLS_PORT" "tls_certificate = $P/node.crt" "tls_private_key = $P/node.key"
    "tls_ca_certificates = $P/ca.crt")
tls_echo() { echoscu -aec LDCTNODE "$@" 127.0.0.1 "$TLS_PORT"; }
# 0 when a TLS 1.2 handshake offering only AES128-SHA completes (s_client
# reports the suite it agreed on).
old_peer_served() {
    openssl s_client -connect "127.0.0.1:$TLS_PORT" -tls1_2 -cipher 'AES128-SHA:@SECLEVEL=0' \
        -cert "$P/scanner.crt" -key "$P/scanner.key" -CAfile "$P/ca.crt" < /dev/null \
        > "$T/s_client.out" 2>&1
    grep -q "Cipher is AES128-SHA" "$T/s_client.out"
}
rawscu() { python3 "$ROOT/tests/tools/rawscu.py" "$@"; }
RAW_TLS=(--tls "$P/ca.crt" "$P/scanner.crt" "$P/scanner.key")

PACS_PORT=$(free_port)
mkdir -p "$T/pacs"
storescp +tls "$P/pacs.key" "$P/pacs.crt" +cf "$P/ca.crt" -aet PACS -od "$T/pacs" "$PACS_PORT" \
    > "$T/storescp.log" 2>&1 &
# NAME TLS_PEER_NAME ATTEMPTS: a destination on the TLS storescp (retried
# after 1 s, in case storescp was not listening yet).
dest() {
    printf '%s\n' "[destination $1]" "host = 127.0.0.1" "port = $PACS_PORT" "ae_title = PACS" \
        "tls = yes" "tls_peer_name = $2" "timeout = 5" "retry_initial_seconds = 1" \
        "retry_max_attempts = $3"
}
mapfile -t DESTS < <(dest byname pacs.hospital.test 5; dest byip 127.0.0.1 5
    dest impostor records.hospital.test 3)
HTTP_PORT=$(free_port)
write_config "stable_seconds = 1" "devices = cpu" "max_associations = 4" "acse_timeout = 5" \
    "http_port = $HTTP_PORT" \
    "shutdown_grace_seconds = 3" "tls_require_client_certificate = no" "${TLS_KEYS[@]}" \
    "${DESTS[@]}" "[rule r]" "action = route" "destinations = byname, byip, impostor"
start_daemon
grep -q "listening on port $TLS_PORT for TLS" "$T/ldctd.log" || fail "no TLS listener line"
grep "listening on port $TLS_PORT" "$T/ldctd.log" | grep -q "client certificates required" &&
    fail "the listener line claims client certificates are required"
tls_echo +tla +cf "$P/ca.crt" > "$T/e1" 2>&1 || fail "a caller without certificate: $(cat "$T/e1")"
tls_echo +tls "$P/intruder.key" "$P/intruder.crt" +cf "$P/ca.crt" > "$T/e2" 2>&1 &&
    fail "a certificate from another CA served"
tls_echo +tls "$P/weak.key" "$P/weak.crt" +cf "$P/ca.crt" > "$T/e3" 2>&1 &&
    fail "a 1024-bit key served under bcp195-nd"
# (The caller may exit on the alert before the node's thread logs.)
weak_logged() {
    grep -q "request from 127.0.0.1: TLS error: certificate verify failed (EE certificate key too weak)" \
        "$T/ldctd.log"
}
wait_until 10 "the log naming the caller and saying its key is too weak" weak_logged
old_peer_served && fail "TLS 1.2 with AES128-SHA served under bcp195-nd"
tls_echo +tls "$P/scanner.key" "$P/scanner.crt" +cf "$P/ca.crt" > "$T/e4" 2>&1 ||
    fail "a good caller: $(cat "$T/e4")"
# Monitoring counts the refused handshakes (rogue CA, weak key, old cipher).
counted() {
    curl -s "http://127.0.0.1:$HTTP_PORT/metrics" > "$T/metrics.txt" &&
        grep -qx 'ldct_connections_total{outcome="failed"} 3' "$T/metrics.txt" &&
        grep -qx 'ldct_connections_total{outcome="accepted"} 2' "$T/metrics.txt"
}
wait_until 10 "3 failed and 2 accepted connections in /metrics" counted

# The guards behind the handshake.
"$MKSERIES" --out "$T/s" --rows 16 --cols 16 --slices 2 > /dev/null || fail "mkseries"
one=$(ls "$T"/s/*.dcm | head -n1)
rawscu 127.0.0.1 "$TLS_PORT" store "$one" --nest-command 100000 --wait 10 "${RAW_TLS[@]}" \
    > "$T/raw1.out" 2>&1
grep -q "^0x0000" "$T/raw1.out" && fail "the nested command was answered with success"
grep -q "DIMSE command message over 65536 bytes" "$T/ldctd.log" ||
    fail "no guard line for the nested command over TLS: $(cat "$T/raw1.out")"
rawscu 127.0.0.1 "$TLS_PORT" bad-associate --wait 10 "${RAW_TLS[@]}" > "$T/raw2.out" 2>&1 ||
    fail "rawscu bad-associate over TLS: $(cat "$T/raw2.out")"
grep -q "^closed after" "$T/raw2.out" || fail "an unparsable request held open: $(cat "$T/raw2.out")"
kill -0 "$DAEMON_PID" || fail "the daemon died"
storescu -aec LDCTNODE +tls "$P/scanner.key" "$P/scanner.crt" +cf "$P/ca.crt" 127.0.0.1 \
    "$TLS_PORT" "$T"/s/*.dcm > "$T/storescu.log" 2>&1 || fail "storescu after the attacks"
[ "$(db_instances)" = 2 ] || fail "$(db_instances) instances stored"

# tls_peer_name, by DNS name and by IP address; another name is refused.
send_state() { sql "SELECT state FROM sends WHERE destination = '$1'"; }
sends_ended() {
    [ "$(send_state byname)" = done ] && [ "$(send_state byip)" = done ] &&
        [ "$(send_state impostor)" = dead ]
}
wait_until 60 "the sends by name and by IP done, the one to another name dead" sends_ended
# (storescp keeps one file per SOP instance: both sends wrote the same two.)
[ "$(ls "$T/pacs" | wc -l)" = 2 ] || fail "the PACS holds $(ls "$T/pacs" | wc -l) files, not 2"
sql "SELECT last_error FROM sends WHERE destination = 'impostor'" | grep -q "hostname mismatch" ||
    fail "impostor: $(sql "SELECT last_error FROM sends WHERE destination = 'impostor'")"

# One grace for both ports: a stalled association on each, aborted together.
raw_before=$(grep -c "calling RAWSCU) accepted" "$T/ldctd.log")
rawscu 127.0.0.1 "$PORT" store "$one" --stall 1000 --wait 30 > "$T/stall1.out" 2>&1 &
stall1=$!
rawscu 127.0.0.1 "$TLS_PORT" store "$one" --stall 1000 --wait 30 "${RAW_TLS[@]}" \
    > "$T/stall2.out" 2>&1 &
stall2=$!
two_open() { [ "$(grep -c "calling RAWSCU) accepted" "$T/ldctd.log")" = $((raw_before + 2)) ]; }
wait_until 10 "both stalled associations accepted" two_open
stop_daemon || fail "exit code $? after SIGTERM"
wait "$stall1" "$stall2"
grep -q "waiting up to 3 s for 2 association(s)" "$T/ldctd.log" || fail "no grace line for both"
first_stop=$(grep -n "scp: server on port" "$T/ldctd.log" | head -n1 | cut -d: -f1)
aborts=$(head -n "${first_stop:-0}" "$T/ldctd.log" | grep -c "aborted 1 connection(s)")
[ "$aborts" = 2 ] || fail "$aborts port(s) aborted before the first port stopped"
grep -q "^closed after" "$T/stall1.out" || fail "plain stall: $(cat "$T/stall1.out")"
grep -q "^closed after" "$T/stall2.out" || fail "TLS stall: $(cat "$T/stall2.out")"

# tls_profile = bcp195 falls back for older peers.
write_config "tls_profile = bcp195" "${TLS_KEYS[@]}"
start_daemon
tls_echo +tls "$P/weak.key" "$P/weak.crt" +cf "$P/ca.crt" > "$T/e5" 2>&1 ||
    fail "a 1024-bit key refused under bcp195: $(cat "$T/e5")"
old_peer_served || fail "TLS 1.2 with AES128-SHA refused under bcp195: $(tail -5 "$T/s_client.out")"
tls_echo +tls "$P/intruder.key" "$P/intruder.crt" +cf "$P/ca.crt" > "$T/e6" 2>&1 &&
    fail "a certificate from another CA served under bcp195"
stop_daemon || fail "exit code $? after SIGTERM"

# port = 0: TLS only. Nothing listens on the plain port, TLS callers are
# served; port = 0 without tls_port is refused with its line.
write_config "${TLS_KEYS[@]}"
sed -i "s/^port = .*/port = 0/" "$T/ldctd.conf"
start_daemon
grep -q "ldctd ready: AE LDCTNODE on TLS port $TLS_PORT only" "$T/ldctd.log" ||
    fail "no TLS-only ready line: $(grep "ldctd ready" "$T/ldctd.log" | tail -n 1)"
tls_echo +tls "$P/scanner.key" "$P/scanner.crt" +cf "$P/ca.crt" > "$T/e7" 2>&1 ||
    fail "C-ECHO over TLS with port = 0: $(cat "$T/e7")"
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" > "$T/e8" 2>&1 && fail "plain DICOM served with port = 0"
stop_daemon || fail "exit code $? after SIGTERM"
printf '[node]\nport = 0\n' > "$T/notls.conf"
"$LDCT" check-config "$T/notls.conf" > "$T/check.out" 2>&1 && fail "port = 0 without tls_port passed"
grep -q "notls.conf:2: port = 0 turns plain DICOM off: it needs tls_port" "$T/check.out" ||
    fail "check-config: $(cat "$T/check.out")"

# A host not in allowed_hosts is closed at the TLS port's accept, before any
# handshake: one line says so, none about a TLS error.
write_config "allowed_hosts = 10.9.9.9" "${TLS_KEYS[@]}"
start_daemon
tls_echo +tls "$P/scanner.key" "$P/scanner.crt" +cf "$P/ca.crt" > "$T/e9" 2>&1 &&
    fail "a host not allowed was served over TLS"
wait_until 10 "the refusal logged" grep -q \
    "connection from 127.0.0.1 closed before its association request: host not in allowed_hosts" \
    "$T/ldctd.log"
tail -n 5 "$T/ldctd.log" | grep -q "TLS error" && fail "a handshake ran for a refused host"
stop_daemon || fail "exit code $? after SIGTERM"
