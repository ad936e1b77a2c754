#!/usr/bin/env bash
# DICOM TLS files change without a restart, and revoked certificates are
# refused:
# - SIGHUP reads the node's TLS files again, also when their paths stay
#   the same (a renewed certificate written over the old one): callers
#   connecting after the reload see the new certificate, and associations
#   opened before it (one before the first reload, one between the first
#   and a second) go on storing after it.
# - tls_crl (added by the same reload): a caller whose certificate its CA
#   revoked is refused at the handshake, with the reason in the log, and a
#   destination whose certificate is revoked gets nothing (its send ends
#   dead with the reason). The file holds the lists of two CAs, and the
#   second one's list is the one that counts.
# - The lists and the CAs are compared at load: a list bearing a CA's name
#   but not its signature refuses the files; a CA without a list (peers
#   it issued would all be refused) and a list whose CA is not trusted
#   (unused) are warned about, by ldctd and by ldct check-config, also a
#   root listed with its intermediate (it may issue peers' certificates
#   too, and a CA of a key rollover whose name has a list but from the
#   other key, named with its serial number); a list from a CA whose
#   keyUsage leaves out cRLSign is refused.
# - A reload whose TLS files do not load (another key path, or a wrong key
#   written over the file in place) is refused as a whole; the listener and
#   the senders go on with the files they read before.
# - A reload that sets tls_port = 0 (and drops the tls_ keys) is not
#   refused for it: the listener keeps its files until the restart.
# - When the certificate and the lists run out: /metrics gives both dates
#   (the certificate's notAfter, the lists' earliest nextUpdate), a reload
#   updates them, and the log warns when they are near (the test's
#   certificates last 2 days, under the 30 days' warning; the lists' next
#   update is in 2 days, under 3). ldct check-config fails on a
#   certificate that has expired and on a list past its next update,
#   naming it.
. "$(dirname "$0")/lib.sh"
command -v openssl > /dev/null || skip "no openssl"

# Two CAs; the node's certificate from each (the second one is the
# renewal); callers and PACSs from the first, one of each revoked; a CRL
# from each CA, the first CA's last in the file.
pki() {
    local d=$T/pki n ca
    mkdir -p "$d"
    for ca in ca ca2; do
        tls_ca "$d" $ca
        : > "$d/$ca.index"
        printf '%s\n' "[ca]" "default_ca = d" "[d]" "database = $d/$ca.index" \
            "crlnumber = $d/$ca.crlnumber" "default_md = sha256" "default_crl_days = 2" \
            > "$d/$ca.cnf"
        echo 01 > "$d/$ca.crlnumber"
    done
    for n in node scanner scanner2 pacs pacs2; do
        tls_cert "$d" $n ca
    done
    tls_cert "$d" node2 ca2
    for n in scanner2 pacs2; do
        openssl ca -config "$d/ca.cnf" -keyfile "$d/ca.key" -cert "$d/ca.crt" \
            -revoke "$d/$n.crt" > /dev/null 2>&1 || fail "openssl ca -revoke $n"
    done
    for ca in ca ca2; do
        openssl ca -config "$d/$ca.cnf" -keyfile "$d/$ca.key" -cert "$d/$ca.crt" -gencrl \
            -out "$d/$ca.crl" > /dev/null 2>&1 || fail "openssl ca -gencrl $ca"
    done
    cat "$d/ca2.crl" "$d/ca.crl" > "$d/crls.pem"
    # A list in the first CA's name from another key; an intermediate CA
    # issued by the first CA, which the CA file then holds too.
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/forger.key" -out "$d/forger.crt" \
        -days 2 -subj "/CN=ldct test ca" 2> /dev/null || fail "openssl forger"
    openssl ca -config "$d/ca.cnf" -keyfile "$d/forger.key" -cert "$d/forger.crt" -gencrl \
        -out "$d/forged.crl" > /dev/null 2>&1 || fail "openssl ca -gencrl forged"
    tls_cert "$d" inter ca 2048 -addext basicConstraints=critical,CA:true
    openssl ca -config "$d/ca.cnf" -keyfile "$d/inter.key" -cert "$d/inter.crt" -gencrl \
        -out "$d/inter.crl" > /dev/null 2>&1 || fail "openssl ca -gencrl inter"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$d/nocrl.key" -out "$d/nocrl.crt" -days 2 \
        -subj "/CN=ldct test nocrl" -addext "keyUsage=critical,keyCertSign" 2> /dev/null ||
        fail "openssl CA without cRLSign"
    openssl ca -config "$d/ca.cnf" -keyfile "$d/nocrl.key" -cert "$d/nocrl.crt" -gencrl \
        -out "$d/nocrl.crl" > /dev/null 2>&1 || fail "openssl ca -gencrl nocrl"
}
pki
P=$T/pki
mkdir -p "$T/live"
cp "$P/node.crt" "$P/node.key" "$T/live/"
TLS_PORT=$(free_port)
TLS_KEYS=("tls_port = $TLS_PORT" "tls_certificate = $T/live/node.crt"
    "tls_private_key = $T/live/node.key" "tls_ca_certificates = $P/ca.crt")
# CALLER CA: C-ECHO over TLS with CALLER's certificate, the node's checked
# against CA.
tls_echo() {
    echoscu -aec LDCTNODE +tls "$P/$1.key" "$P/$1.crt" +cf "$P/$2.crt" 127.0.0.1 "$TLS_PORT"
}
PACS_PORT=$(free_port)
REVOKED_PORT=$(free_port)
mkdir -p "$T/pacs" "$T/revoked"
for n in pacs pacs2; do
    port=$PACS_PORT dir=$T/pacs
    [ $n = pacs2 ] && port=$REVOKED_PORT dir=$T/revoked
    storescp +tls "$P/$n.key" "$P/$n.crt" +cf "$P/ca.crt" +cf "$P/ca2.crt" -aet PACS -od "$dir" \
        "$port" > "$T/$n.log" 2>&1 &
done
# NAME PORT: a TLS destination on one of the two storescps.
dest() {
    printf '%s\n' "[destination $1]" "host = 127.0.0.1" "port = $2" "ae_title = PACS" "tls = yes" \
        "timeout = 5" "retry_initial_seconds = 1" "retry_max_attempts = 3"
}
mapfile -t DESTS < <(dest pacs "$PACS_PORT"; dest revoked "$REVOKED_PORT")
RULE=("[rule r]" "match.calling_ae = STORESCU" "action = route" "destinations = pacs, revoked")
HTTP_PORT=$(free_port)
NODE=("stable_seconds = 1" "devices = cpu" "max_associations = 4" "http_port = $HTTP_PORT")
write_config "${NODE[@]}" "${TLS_KEYS[@]}" "${DESTS[@]}" "${RULE[@]}"
start_daemon
# Unix time of the notAfter of certificate $1, of the nextUpdate of list $1.
not_after() { date -d "$(openssl x509 -in "$1" -noout -enddate | cut -d= -f2)" +%s; }
next_update() { date -d "$(openssl crl -in "$1" -noout -nextupdate | cut -d= -f2)" +%s; }
metric() { curl -s "http://127.0.0.1:$HTTP_PORT/metrics" | sed -n "s/^$1 //p"; }
[ "$(metric ldct_tls_certificate_expiry_timestamp_seconds)" = "$(not_after "$P/node.crt")" ] ||
    fail "certificate expiry metric $(metric ldct_tls_certificate_expiry_timestamp_seconds)"
[ -z "$(metric ldct_tls_crl_next_update_timestamp_seconds)" ] || fail "a CRL metric without tls_crl"
# The CA expires too (2 days): its own date and warning, not only the node's.
[ "$(metric ldct_tls_ca_expiry_timestamp_seconds)" = "$(not_after "$P/ca.crt")" ] ||
    fail "CA expiry metric $(metric ldct_tls_ca_expiry_timestamp_seconds)"
ca_warned() {
    grep -Eq "TLS: CA certificate /CN=ldct test ca expires on 20[0-9-]+ [0-9:]+ UTC \(in (4[78] h [0-9]+ min|2 days)\): install" \
        "$T/ldctd.log"
}
wait_until 10 "the warning that the CA expires in 2 days" ca_warned
cert_warned() {
    grep -Eq "TLS: tls_certificate $T/live/node.crt expires on 20[0-9-]+ [0-9:]+ UTC \(in (4[78] h|2 days)" \
        "$T/ldctd.log"
}
wait_until 10 "the warning that the node's certificate expires in 2 days" cert_warned
tls_echo scanner ca > "$T/e1" 2>&1 || fail "C-ECHO before the reload: $(cat "$T/e1")"
tls_echo scanner2 ca > "$T/e2" 2>&1 || fail "no CRL yet, scanner2 refused: $(cat "$T/e2")"

# Associations that store once, then once more when $T/go exists:
# RAW1 trusts the first node certificate, RAW2 the renewed one.
"$MKSERIES" --out "$T/r" --rows 16 --cols 16 --slices 1 > /dev/null || fail "mkseries"
one=$(ls "$T"/r/*.dcm | head -n1)
held_store() {
    python3 "$ROOT/tests/tools/rawscu.py" 127.0.0.1 "$TLS_PORT" store "$one" --until "$T/go" \
        --again --wait 60 --tls "$P/$1.crt" "$P/scanner.crt" "$P/scanner.key" > "$T/$2.out" 2>&1
}
held_store ca raw1 &
raw1=$!
first_stored() { grep -q "^0x0000" "$T/$1.out"; }
wait_until 20 "the first C-STORE of the association opened before the reload" first_stored raw1

# The renewal: new files at the same paths, and tls_crl, then SIGHUP.
cp "$P/node2.crt" "$T/live/node.crt"
cp "$P/node2.key" "$T/live/node.key"
write_config "${NODE[@]}" "${TLS_KEYS[@]}" "tls_crl = $P/crls.pem" "${DESTS[@]}" "${RULE[@]}"
"$LDCT" check-config "$T/ldctd.conf" > "$T/check.out" 2>&1 || fail "check-config: $(cat "$T/check.out")"
kill -HUP "$DAEMON_PID"
reloaded() { grep -q "new connections on tls_port $TLS_PORT use them" "$T/ldctd.log"; }
wait_until 10 "the TLS files read again" reloaded
grep -q "reload failed" "$T/ldctd.log" && fail "the reload was refused"
UNUSED="the revocation list from CN=ldct test ca2 is not used: that CA is not in tls_ca_certificates"
grep -q "TLS: tls_crl $P/crls.pem: $UNUSED" "$T/ldctd.log" || fail "no warning of the unused list"
grep -q "$UNUSED" "$T/check.out" || fail "check-config without the unused list: $(cat "$T/check.out")"
tls_echo scanner ca2 > "$T/e3" 2>&1 || fail "the renewed certificate not served: $(cat "$T/e3")"
tls_echo scanner ca > "$T/e4" 2>&1 && fail "the old certificate still served after the reload"
tls_echo scanner2 ca2 > "$T/e5" 2>&1 && fail "a revoked caller served"
revoked_logged() { grep -q "TLS error: certificate verify failed (certificate revoked)" "$T/ldctd.log"; }
wait_until 10 "the log saying the caller's certificate is revoked" revoked_logged
# A second association, on the reloaded files, across a second reload.
held_store ca2 raw2 &
raw2=$!
wait_until 20 "the first C-STORE of the association opened after the reload" first_stored raw2
kill -HUP "$DAEMON_PID"
reloaded_twice() { [ "$(grep -c "new connections on tls_port $TLS_PORT use them" "$T/ldctd.log")" = 2 ]; }
wait_until 10 "the second reload" reloaded_twice
touch "$T/go"
wait "$raw1" || fail "rawscu 1: $(cat "$T/raw1.out")"
wait "$raw2" || fail "rawscu 2: $(cat "$T/raw2.out")"
for r in raw1 raw2; do
    [ "$(grep -c "^0x0000" "$T/$r.out")" = 2 ] || fail "$r across the reload: $(cat "$T/$r.out")"
done
[ "$(metric ldct_tls_certificate_expiry_timestamp_seconds)" = "$(not_after "$P/node2.crt")" ] ||
    fail "certificate expiry metric after the reload"
earliest=$(printf '%s\n' "$(next_update "$P/ca.crl")" "$(next_update "$P/ca2.crl")" | sort -n | head -n1)
[ "$(metric ldct_tls_crl_next_update_timestamp_seconds)" = "$earliest" ] ||
    fail "CRL metric $(metric ldct_tls_crl_next_update_timestamp_seconds), not $earliest"
crl_warned() { grep -q "TLS: tls_crl $P/crls.pem is due for its next update on" "$T/ldctd.log"; }
wait_until 10 "the warning that the lists are due for their next update" crl_warned

# Sends: the destination with a revoked certificate gets nothing.
"$MKSERIES" --out "$T/s" --rows 16 --cols 16 --slices 2 > /dev/null || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm > "$T/storescu.log" 2>&1 ||
    fail "storescu: $(cat "$T/storescu.log")"
send_state() { sql "SELECT state FROM sends WHERE destination = '$1'"; }
sends_ended() { [ "$(send_state pacs)" = done ] && [ "$(send_state revoked)" = dead ]; }
wait_until 60 "the send to pacs done, the one to the revoked destination dead" sends_ended
[ "$(ls "$T/pacs" | wc -l)" = 2 ] || fail "the PACS holds $(ls "$T/pacs" | wc -l) files, not 2"
[ "$(ls "$T/revoked" | wc -l)" = 0 ] || fail "the revoked destination got files"
sql "SELECT last_error FROM sends WHERE destination = 'revoked'" | grep -q "certificate revoked" ||
    fail "revoked: $(sql "SELECT last_error FROM sends WHERE destination = 'revoked'")"

# A wrong key written over the file in place: the reload is refused, and
# the listener and the senders keep the files they read.
cp "$P/pacs.key" "$T/live/node.key"
kill -HUP "$DAEMON_PID"
refused_in_place() { grep -q "reload failed; keeping the running configuration" "$T/ldctd.log"; }
wait_until 10 "the reload with a wrong key in place refused" refused_in_place
tls_echo scanner ca2 > "$T/e8" 2>&1 || fail "the listener lost its key: $(cat "$T/e8")"
"$MKSERIES" --out "$T/s2" --rows 16 --cols 16 --slices 2 > /dev/null || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s2/*.dcm > "$T/storescu2.log" 2>&1 ||
    fail "storescu: $(cat "$T/storescu2.log")"
pacs_twice() { [ "$(sql "SELECT count(*) FROM sends WHERE destination = 'pacs' AND state = 'done'")" = 2 ]; }
wait_until 60 "the second series delivered with the key read before" pacs_twice
cp "$P/node2.key" "$T/live/node.key"
refusals=$(grep -c "reload failed" "$T/ldctd.log")

# Files that do not load: the reload is refused, the listener keeps its own.
write_config "stable_seconds = 1" "devices = cpu" "tls_port = $TLS_PORT" \
    "tls_certificate = $T/live/node.crt" "tls_private_key = $P/pacs.key" \
    "tls_ca_certificates = $P/ca.crt"
kill -HUP "$DAEMON_PID"
refused() { [ "$(grep -c "reload failed" "$T/ldctd.log")" -gt "$refusals" ]; }
wait_until 10 "the reload with a wrong key refused" refused
grep -q "reload: tls_port: the TLS private key $P/pacs.key does not belong" "$T/ldctd.log" ||
    fail "the refusal's reason: $(grep "reload" "$T/ldctd.log" | tail -3)"
tls_echo scanner ca2 > "$T/e6" 2>&1 || fail "the listener lost its files: $(cat "$T/e6")"
tls_echo scanner2 ca2 > "$T/e7" 2>&1 && fail "the revocation list lost after a refused reload"
# tls_port = 0 and no tls_ keys: the rest of the file applies.
accepted=$(grep -c "configuration reloaded from" "$T/ldctd.log")
write_config "stable_seconds = 1" "devices = cpu"
kill -HUP "$DAEMON_PID"
one_more() { [ "$(grep -c "configuration reloaded from" "$T/ldctd.log")" -gt "$accepted" ]; }
wait_until 10 "the reload that turns TLS off accepted" one_more
grep -q "reload: the TLS listener keeps its tls_ keys until the restart" "$T/ldctd.log" ||
    fail "no line saying the listener keeps its keys"
tls_echo scanner ca2 > "$T/e9" 2>&1 || fail "the listener lost its files: $(cat "$T/e9")"
stop_daemon || fail "exit code $? after SIGTERM"

# checked KEYS...: a configuration of KEYS that ldct check-config passes;
# what it printed is in check.out.
checked() {
    write_config "$@"
    "$LDCT" check-config "$T/ldctd.conf" > "$T/check.out" 2>&1 || fail "check-config: $(cat "$T/check.out")"
}
# A revocation list that does not load is named by check-config.
write_config "${TLS_KEYS[@]}" "tls_crl = $P/ca.crt"
"$LDCT" check-config "$T/ldctd.conf" > "$T/check.out" 2>&1 && fail "check-config passed a CRL file without a CRL"
grep -q "tls_port: cannot read the TLS certificate revocation list $P/ca.crt" "$T/check.out" ||
    fail "check-config: $(cat "$T/check.out")"
write_config "tls_crl = $P/crls.pem"
"$LDCT" check-config "$T/ldctd.conf" > "$T/check.out" 2>&1 && fail "check-config passed tls_crl without CAs"
grep -q "tls_crl needs tls_ca_certificates" "$T/check.out" || fail "check-config: $(cat "$T/check.out")"
# A list in a trusted CA's name that its key did not sign.
write_config "${TLS_KEYS[@]}" "tls_crl = $P/forged.crl"
"$LDCT" check-config "$T/ldctd.conf" > "$T/check.out" 2>&1 && fail "check-config passed a forged list"
grep -q "tls_port: the revocation list from CN=ldct test ca in $P/forged.crl is not signed by that CA's key in $P/ca.crt" \
    "$T/check.out" || fail "check-config on a forged list: $(cat "$T/check.out")"
# Two CAs, a list from one: the other one is named.
cat "$P/ca.crt" "$P/ca2.crt" > "$P/two.crt"
checked "${TLS_KEYS[@]}" "tls_ca_certificates = $P/two.crt" "tls_crl = $P/ca.crl"
grep -q "TLS: tls_crl $P/ca.crl: no revocation list from CN=ldct test ca2: peers with certificates it issued are refused" \
    "$T/check.out" || fail "check-config on a CA without a list: $(cat "$T/check.out")"
[ "$(grep -c "TLS: tls_crl $P/ca.crl: " "$T/check.out")" = 1 ] || fail "not one warning: $(cat "$T/check.out")"
# A key rollover: two CAs with one name and a list from one key. The other
# is named, with its serial number; with its own list too, none is.
cat "$P/ca.crt" "$P/forger.crt" > "$P/rollover.crt"
checked "${TLS_KEYS[@]}" "tls_ca_certificates = $P/rollover.crt" "tls_crl = $P/ca.crl"
serial=$(openssl x509 -in "$P/forger.crt" -noout -serial | cut -d= -f2)
grep -q "TLS: tls_crl $P/ca.crl: no revocation list from CN=ldct test ca (serial $serial): peers" \
    "$T/check.out" || fail "check-config on a rollover without the new list: $(cat "$T/check.out")"
[ "$(grep -c "TLS: tls_crl $P/ca.crl: " "$T/check.out")" = 1 ] || fail "not one warning: $(cat "$T/check.out")"
# Each key with its own list, but lists without an authorityKeyIdentifier:
# OpenSSL picks a list by name then, and refuses the peers of one CA
# (openssl verify shows it, on peers whose certificates name their CA's key
# as a rollover needs); each CA is named. With the identifier, both CAs'
# peers verify and nothing is said.
cat "$P/ca.crl" "$P/forged.crl" > "$P/both.crl"
checked "${TLS_KEYS[@]}" "tls_ca_certificates = $P/rollover.crt" "tls_crl = $P/both.crl"
[ "$(grep -c "has no authorityKeyIdentifier naming that CA's key, and another list has its name" "$T/check.out")" = 2 ] ||
    fail "check-config on lists without an authorityKeyIdentifier: $(cat "$T/check.out")"
echo "authorityKeyIdentifier = keyid" > "$P/leaf.ext"
for k in ca forger; do
    openssl x509 -req -in "$P/pacs.csr" -CA "$P/$k.crt" -CAkey "$P/$k.key" -CAcreateserial \
        -extfile "$P/leaf.ext" -out "$P/leaf-$k.crt" -days 2 2> /dev/null || fail "openssl leaf of $k"
done
verified() { openssl verify -crl_check -CAfile "$P/rollover.crt" -CRLfile "$1" "$P/$2.crt" > /dev/null 2>&1; }
verified "$P/both.crl" leaf-ca && verified "$P/both.crl" leaf-forger &&
    fail "both CAs' peers verify without the identifier"
printf '%s\n' "crl_extensions = akid" "[akid]" "authorityKeyIdentifier = keyid:always" >> "$P/ca.cnf"
for k in ca forger; do
    openssl ca -config "$P/ca.cnf" -keyfile "$P/$k.key" -cert "$P/$k.crt" -gencrl \
        -out "$P/$k.akid.crl" > /dev/null 2>&1 || fail "openssl ca -gencrl $k with akid"
done
cat "$P/ca.akid.crl" "$P/forger.akid.crl" > "$P/both.akid.crl"
verified "$P/both.akid.crl" leaf-ca && verified "$P/both.akid.crl" leaf-forger ||
    fail "a CA's peer refused with both identified lists"
checked "${TLS_KEYS[@]}" "tls_ca_certificates = $P/rollover.crt" "tls_crl = $P/both.akid.crl"
grep -q "no revocation list\|is not used\|authorityKeyIdentifier" "$T/check.out" &&
    fail "a warning with both identified lists: $(cat "$T/check.out")"
# A root with its intermediate, a list from the intermediate only: the
# root is named (the peers it issued itself would be refused).
cat "$P/ca.crt" "$P/inter.crt" > "$P/chain.crt"
checked "${TLS_KEYS[@]}" "tls_ca_certificates = $P/chain.crt" "tls_crl = $P/inter.crl"
grep -q "TLS: tls_crl $P/inter.crl: no revocation list from CN=ldct test ca: .*(a CA that issues only intermediate CAs needs none)" \
    "$T/check.out" || fail "check-config on a root without a list: $(cat "$T/check.out")"
grep -q "no revocation list from CN=inter" "$T/check.out" && fail "the intermediate named: $(cat "$T/check.out")"
# A list from a CA that may not sign lists.
write_config "${TLS_KEYS[@]}" "tls_ca_certificates = $P/nocrl.crt" "tls_crl = $P/nocrl.crl"
"$LDCT" check-config "$T/ldctd.conf" > "$T/check.out" 2>&1 && fail "check-config passed a list its CA may not sign"
grep -q "the revocation list from CN=ldct test nocrl in $P/nocrl.crl is signed by a CA whose keyUsage leaves out cRLSign" \
    "$T/check.out" || fail "check-config on a CA without cRLSign: $(cat "$T/check.out")"
# Past: a certificate that expired yesterday, a list due a second after it
# was made.
openssl x509 -req -in "$P/node.csr" -CA "$P/ca.crt" -CAkey "$P/ca.key" -CAcreateserial \
    -out "$P/old.crt" -days -1 2> /dev/null || fail "openssl expired certificate"
openssl ca -config "$P/ca.cnf" -keyfile "$P/ca.key" -cert "$P/ca.crt" -gencrl -crlsec 1 \
    -out "$P/late.crl" > /dev/null 2>&1 || fail "openssl ca -gencrl -crlsec 1"
sleep 2
# Each refuses every peer: an error (exit 1, no "OK"), so that
# `check-config && systemctl reload` stops there.
past() { # CERT CRL: check-config fails, check.out says why
    write_config "tls_port = $TLS_PORT" "tls_certificate = $1" \
        "tls_private_key = $P/node.key" "tls_ca_certificates = $P/ca.crt" "tls_crl = $2"
    "$LDCT" check-config "$T/ldctd.conf" > "$T/check.out" 2>&1 && fail "check-config passed $1, $2"
    grep -q ": OK (" "$T/check.out" && fail "check-config said OK: $(cat "$T/check.out")"
}
past "$P/old.crt" "$P/ca.crl"
grep -q "TLS: tls_certificate $P/old.crt expired on .*: peers refuse it" "$T/check.out" ||
    fail "check-config on an expired certificate: $(cat "$T/check.out")"
past "$P/node.crt" "$P/late.crl"
grep -q "TLS: tls_crl $P/late.crl was due for its next update on .*: every peer is refused" \
    "$T/check.out" || fail "check-config on a list past its update: $(cat "$T/check.out")"
exit 0
