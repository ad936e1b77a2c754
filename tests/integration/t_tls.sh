#!/usr/bin/env bash
# DICOM TLS: with tls_port set, ldctd listens for TLS beside its plain
# port. A caller with a certificate from tls_ca_certificates is served (C-ECHO,
# a series by C-STORE, processed); plain TCP, TLS without a certificate and a
# certificate from another CA are refused at the handshake. The derived
# series goes to a TLS destination (DCMTK's storescp with TLS, requiring our
# certificate). The plain port shares max_associations with the TLS port.
# A caller or a destination that connects and stays silent cannot hold a
# thread: the handshake waits acse_timeout (listener) or the destination's
# timeout (sender).
# A destination whose certificate comes from another CA gets nothing.
# Files that do not load (a missing key, a key of another certificate) stop
# ldct check-config and the daemon's start with a message naming them, and a
# reload that names a CA file that does not load is refused (t_tls_reload:
# reloads that change the TLS files).
. "$(dirname "$0")/lib.sh"
command -v openssl > /dev/null || skip "no openssl"

# A CA, the node's, a caller's and a PACS's certificates, and a rogue CA
# with a caller of its own.
pki() {
    local d=$T/pki n
    mkdir -p "$d"
    tls_ca "$d" ca
    tls_ca "$d" rogue
    for n in node scanner pacs; do
        tls_cert "$d" $n ca
    done
    tls_cert "$d" intruder rogue
}
pki
P=$T/pki
TLS_PORT=$(free_port)
PACS_PORT=$(free_port)
SILENT_PORT=$(free_port)
ROGUE_PORT=$(free_port)
mkdir -p "$T/rogue"
storescp +tls "$P/intruder.key" "$P/intruder.crt" +cf "$P/ca.crt" -aet ROGUE -od "$T/rogue" \
    "$ROGUE_PORT" > "$T/rogue.log" 2>&1 &
socat TCP-LISTEN:"$SILENT_PORT",reuseaddr,fork SYSTEM:"sleep 120" 2> /dev/null &
mkdir -p "$T/pacs"
storescp +tls "$P/pacs.key" "$P/pacs.crt" +cf "$P/ca.crt" -aet PACS -od "$T/pacs" "$PACS_PORT" \
    > "$T/storescp.log" 2>&1 &
TLS_KEYS=("tls_certificate = $P/node.crt" "tls_private_key = $P/node.key"
    "tls_ca_certificates = $P/ca.crt")
write_config "stable_seconds = 1" "devices = cpu" "max_associations = 1" "tls_port = $TLS_PORT" \
    "acse_timeout = 2" "${TLS_KEYS[@]}" \
    "[destination pacs]" "host = 127.0.0.1" "port = $PACS_PORT" "ae_title = PACS" "tls = yes" \
    "timeout = 10" "retry_initial_seconds = 1" \
    "[destination silent]" "host = 127.0.0.1" "port = $SILENT_PORT" "ae_title = SILENT" \
    "tls = yes" "timeout = 2" "retry_max_attempts = 1" \
    "[destination rogue]" "host = 127.0.0.1" "port = $ROGUE_PORT" "ae_title = ROGUE" \
    "tls = yes" "timeout = 5" "retry_max_attempts = 1" \
    "[rule r]" "action = process" "destinations = pacs, silent, rogue"
"$LDCT" check-config "$T/ldctd.conf" > "$T/check.out" 2>&1 || fail "check-config: $(cat "$T/check.out")"
# A private key others may read is named; one its group may read is not.
key_warned() { grep -q "tls_private_key $P/node.key can be read by other users (mode 0644)" "$1"; }
chmod 640 "$P/node.key"
"$LDCT" check-config "$T/ldctd.conf" > "$T/check.out" 2>&1 || fail "check-config at 0640"
grep -q "node.key can be" "$T/check.out" && fail "a key at 0640 was warned about: $(cat "$T/check.out")"
chmod 644 "$P/node.key"
"$LDCT" check-config "$T/ldctd.conf" > "$T/check.out" 2>&1 || fail "check-config at 0644"
key_warned "$T/check.out" || fail "no warning for a key at 0644: $(cat "$T/check.out")"
start_daemon
key_warned "$T/ldctd.log" || fail "the daemon did not warn about the key at 0644"
chmod 600 "$P/node.key"
grep -q "listening on port $TLS_PORT for TLS with client certificates required" "$T/ldctd.log" ||
    fail "no TLS listener line"
# A caller that connects and says nothing is dropped after acse_timeout.
start=$(date +%s)
exec 3<> "/dev/tcp/127.0.0.1/$TLS_PORT"
timeout 20 cat <&3 > /dev/null || fail "a silent TLS caller was held for 20 s"
exec 3<&-
[ $(($(date +%s) - start)) -le 8 ] || fail "a silent TLS caller was held $(($(date +%s) - start)) s"

tls_echo() { echoscu -aec LDCTNODE "$@" 127.0.0.1 "$TLS_PORT"; }
tls_echo +tls "$P/scanner.key" "$P/scanner.crt" +cf "$P/ca.crt" > "$T/e1" 2>&1 ||
    fail "C-ECHO over TLS: $(cat "$T/e1")"
echoscu -aec LDCTNODE 127.0.0.1 "$TLS_PORT" > "$T/e2" 2>&1 && fail "plain TCP served on the TLS port"
tls_echo +tla +cf "$P/ca.crt" > "$T/e3" 2>&1 && fail "TLS without a certificate served"
tls_echo +tls "$P/intruder.key" "$P/intruder.crt" +cf "$P/ca.crt" > "$T/e4" 2>&1 &&
    fail "a certificate from another CA served"
grep -q "TLS error: peer did not return a certificate" "$T/ldctd.log" ||
    fail "the log does not say why the caller without a certificate was dropped"
grep -Eq "TLS error: .*certificate" <(grep -v "did not return" "$T/ldctd.log") ||
    fail "the log does not say why the rogue certificate was dropped"
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "the plain port stopped working"

# A series over TLS, processed and delivered over TLS.
"$MKSERIES" --out "$T/s" --rows 64 --cols 64 --slices 8 --noise 20 > /dev/null || fail "mkseries"
storescu -aec LDCTNODE +tls "$P/scanner.key" "$P/scanner.crt" +cf "$P/ca.crt" 127.0.0.1 \
    "$TLS_PORT" "$T"/s/*.dcm > "$T/storescu.log" 2>&1 || fail "storescu over TLS: $(cat "$T/storescu.log")"
[ "$(db_instances)" = 8 ] || fail "$(db_instances) instances stored"
grep -q "accepted over TLS" "$T/ldctd.log" || fail "no log line for the TLS association"
assert_stored_identical "$T"/s/*.dcm
pacs_done() { [ "$(sql "SELECT state FROM sends WHERE destination = 'pacs'")" = done ]; }
wait_until 60 "the derived series delivered over TLS" pacs_done
[ "$(ls "$T/pacs" | wc -l)" = 8 ] || fail "the TLS PACS got $(ls "$T/pacs" | wc -l) files"
silent_dead() { [ "$(sql "SELECT state FROM sends WHERE destination = 'silent'")" = dead ]; }
wait_until 30 "the send to a silent TLS peer given up after its timeout" silent_dead
# A destination whose certificate comes from another CA gets nothing.
rogue_dead() { [ "$(sql "SELECT state FROM sends WHERE destination = 'rogue'")" = dead ]; }
wait_until 30 "the send to a destination with a rogue certificate refused" rogue_dead
[ "$(ls "$T/rogue" | wc -l)" = 0 ] || fail "a rogue destination got $(ls "$T/rogue" | wc -l) files"

# One max_associations for both ports: while a TLS association runs, a
# plain one is refused as busy.
"$MKSERIES" --out "$T/big" --rows 256 --cols 256 --slices 400 > /dev/null || fail "mkseries big"
storescu -aec LDCTNODE +tls "$P/scanner.key" "$P/scanner.crt" +cf "$P/ca.crt" 127.0.0.1 \
    "$TLS_PORT" "$T"/big/*.dcm > "$T/storescu2.log" 2>&1 &
big=$!
await_instances 9
out=$(echoscu -aec LDCTNODE 127.0.0.1 "$PORT" 2>&1) && fail "plain association beside a TLS one"
echo "$out" | grep -q "Local Limit Exceeded" || fail "wrong reason: $out"
wait "$big" || fail "the TLS association failed: $(tail -3 "$T/storescu2.log")"
stop_daemon || fail "exit code $? after SIGTERM"

# Files that do not load: named by check-config and at start.
write_config "tls_port = $TLS_PORT" "tls_certificate = $P/node.crt" \
    "tls_private_key = $P/pacs.key" "tls_ca_certificates = $P/ca.crt"
"$LDCT" check-config "$T/ldctd.conf" > "$T/check.out" 2>&1 && fail "check-config passed a wrong key"
grep -q "tls_port: the TLS private key $P/pacs.key does not belong to the certificate" \
    "$T/check.out" || fail "check-config: $(cat "$T/check.out")"
"$LDCTD" --config "$T/ldctd.conf" > "$T/start.log" 2>&1 && fail "ldctd started with a wrong key"
grep -q "does not belong to the certificate" "$T/start.log" || fail "start: $(cat "$T/start.log")"
write_config "tls_port = $TLS_PORT" "tls_certificate = $P/node.crt" \
    "tls_private_key = $T/missing.key" "tls_ca_certificates = $P/ca.crt"
"$LDCT" check-config "$T/ldctd.conf" > "$T/check.out" 2>&1 && fail "check-config passed a missing key"
grep -q "cannot read the TLS private key $T/missing.key" "$T/check.out" ||
    fail "check-config: $(cat "$T/check.out")"
write_config "tls_port = $TLS_PORT" "tls_certificate = $P/node.crt" "tls_private_key = $P/node.key"
"$LDCT" check-config "$T/ldctd.conf" > "$T/check.out" 2>&1 && fail "check-config passed no CA"
grep -q "tls_require_client_certificate needs tls_ca_certificates" "$T/check.out" ||
    fail "check-config: $(cat "$T/check.out")"

# A reload that adds a TLS destination with a CA file that does not load
# is refused.
write_config
start_daemon
write_config "tls_ca_certificates = $T/missing-ca.crt" \
    "[destination late]" "host = 127.0.0.1" "port = $PACS_PORT" "ae_title = PACS" "tls = yes"
kill -HUP "$DAEMON_PID"
refused() { grep -q "reload failed; keeping the running configuration" "$T/ldctd.log"; }
wait_until 10 "the reload refused" refused
grep -q "reload: the node's TLS files (for \[destination late\], tls = yes): cannot read the TLS CA certificates $T/missing-ca.crt" \
    "$T/ldctd.log" || fail "the reload's reason: $(grep reload "$T/ldctd.log")"
stop_daemon || fail "exit code $? after SIGTERM"
