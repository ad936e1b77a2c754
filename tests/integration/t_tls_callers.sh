#!/usr/bin/env bash
# tls_caller_names binds calling AE titles to TLS certificates:
# - A bound AE title is served over TLS when the caller's certificate
#   carries the bound name: as its common name (no subjectAltName), as a
#   DNS subjectAltName, or as an IP subjectAltName.
# - It is refused (A-ASSOCIATE-RJ, calling AE title not recognised) with a
#   certificate for another name, without a certificate (the listener
#   does not require one here), and over plain TCP; the log says which
#   certificate came, or that none or no TLS did.
# - A bound AE title in another case is bound too (rules match AE titles
#   without case): ct1 is refused where CT1 would be.
# - A wildcard certificate (*.hospital.test) does not stand for a bound
#   name in its domain.
# - The key given on two lines binds the titles of both.
# - AE titles not bound are served as before, over TLS and plain TCP.
# - A reload that adds tls_port with bindings leaves the titles unbound
#   until the restart (no TLS listener yet), and says so.
# - SIGHUP rebinds: the certificate bound before is refused after it.
# - /metrics counts the refusals as rejected connections.
. "$(dirname "$0")/lib.sh"
command -v openssl > /dev/null || skip "no openssl"

P=$T/pki
mkdir -p "$P"
tls_ca "$P" ca
for n in node scanner scanner2; do
    tls_cert "$P" $n ca
done
tls_cert "$P" other ca 2048 -addext "subjectAltName=DNS:ct2.hospital.test"
tls_cert "$P" byip ca 2048 -addext "subjectAltName=IP:127.0.0.1"
tls_cert "$P" wild ca 2048 -addext "subjectAltName=DNS:*.hospital.test"
TLS_PORT=$(free_port)
HTTP_PORT=$(free_port)
# BINDINGS...: the configuration with a tls_caller_names line for each.
config() {
    local lines=() b
    for b in "$@"; do lines+=("tls_caller_names = $b"); done
    write_config "devices = cpu" "http_port = $HTTP_PORT" "tls_port = $TLS_PORT" \
        "tls_certificate = $P/node.crt" "tls_private_key = $P/node.key" \
        "tls_ca_certificates = $P/ca.crt" "tls_require_client_certificate = no" "${lines[@]}"
}
config "CT1=scanner, CT2=ct2.hospital.test" "CT3=127.0.0.1"
start_daemon
# AE CERT: C-ECHO over TLS as AE with CERT's key (CERT "-": none).
tls_echo() {
    local id=(+tls "$P/$2.key" "$P/$2.crt")
    [ "$2" = - ] && id=(+tla)
    echoscu -aet "$1" -aec LDCTNODE "${id[@]}" +cf "$P/ca.crt" 127.0.0.1 "$TLS_PORT"
}
plain_echo() { echoscu -aet "$1" -aec LDCTNODE 127.0.0.1 "$PORT"; }
n=0
# served|refused AE CERT|plain [LOG]: the echo's outcome; a refusal's
# answer, and LOG (the reason in parentheses) in the daemon's log.
expect() {
    local want=$1 ae=$2 how=$3 detail=${4:-} out=$T/echo.$((n += 1)) rc=0
    if [ "$how" = plain ]; then plain_echo "$ae" > "$out" 2>&1 || rc=$?; else
        tls_echo "$ae" "$how" > "$out" 2>&1 || rc=$?
    fi
    if [ "$want" = served ]; then
        [ $rc = 0 ] || fail "$ae with $how refused: $(cat "$out")"
        return
    fi
    [ $rc != 0 ] || fail "$ae with $how served"
    grep -qi "calling AE title not recognized" "$out" || fail "$ae with $how: $(cat "$out")"
    local line="(calling $ae, called LDCTNODE) rejected: calling AE title not recognised (bound to a TLS certificate the caller did not present) ($detail)"
    logged() { grep -qF "$line" "$T/ldctd.log"; }
    wait_until 10 "the log line for $ae with $how" logged
}
expect served CT1 scanner
expect served CT2 other
expect served CT3 byip
expect served OTHER scanner2
expect served OTHER -
expect served OTHER plain
expect refused CT1 scanner2 "its certificate is CN=scanner2"
expect refused CT2 scanner "its certificate is CN=scanner"
expect refused CT1 other "its certificate is CN=other, subjectAltName DNS:ct2.hospital.test"
expect refused CT1 - "it sent no certificate"
expect refused CT1 plain "it called without TLS"
expect refused CT3 plain "it called without TLS"
expect refused ct1 plain "it called without TLS"
expect refused Ct1 scanner2 "its certificate is CN=scanner2"
expect served ct1 scanner
expect refused CT2 wild "its certificate is CN=wild, subjectAltName DNS:*.hospital.test"
metric() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | sed -n "s/^$1 //p"; }
rejected=$(metric 'ldct_connections_total{outcome="rejected"}')
[ "$rejected" -ge 6 ] || fail "rejected associations $rejected, not 6"

# Rebinding: CT1 to scanner2.
config "CT1=scanner2"
kill -HUP "$DAEMON_PID"
reloaded() { grep -q "configuration reloaded from" "$T/ldctd.log"; }
wait_until 10 "the reload" reloaded
expect served CT1 scanner2
expect refused CT1 scanner "its certificate is CN=scanner"
expect served CT2 scanner
stop_daemon || fail "exit code $? after SIGTERM"

# Started without TLS, reloaded with tls_port and a binding: CT1 still
# calls over the plain port until the restart.
write_config "devices = cpu"
start_daemon
config "CT1=scanner"
kill -HUP "$DAEMON_PID"
wait_until 10 "the reload" reloaded
grep -q "reload: tls_caller_names takes effect with tls_port, after the restart" "$T/ldctd.log" ||
    fail "no line saying the bindings wait for the restart"
expect served CT1 plain
stop_daemon || fail "exit code $? after SIGTERM"
exit 0
