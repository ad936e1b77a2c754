#!/usr/bin/env bash
# One peer address cannot take every association. With max_associations = 5
# the default max_associations_per_host (a quarter kept for the others, at
# least one) lets 127.0.0.2 run 4, counted over the plain and the TLS port
# together: with 3 plain and 1 TLS association held, its next one is refused
# (A-ASSOCIATE-RJ transient, service provider, local limit exceeded; the log
# names the host and the limit) while 127.0.0.1 still gets in, and a slot
# the host gives back can be taken again; a reload that changes the key
# names the limit in force (it needs a restart). An explicit
# max_associations_per_host = 1 applies as set.
. "$(dirname "$0")/lib.sh"
command -v openssl > /dev/null || skip "no openssl"
RAW="python3 $ROOT/tests/tools/rawscu.py"
P="$T/pki" && mkdir -p "$P"
tls_ca "$P" ca
tls_cert "$P" node ca
tls_cert "$P" scanner ca
TLS_PORT=$(free_port)
HOLDERS=()

# Opens an association from 127.0.0.2 that stays idle (output in $T/hold$1;
# more arguments go to rawscu: the TLS port and files).
hold_from_second_host() {
    local n=$1 port=$PORT
    shift
    [ $# -gt 0 ] && port=$TLS_PORT
    $RAW 127.0.0.1 "$port" associate --source 127.0.0.2 --wait $((20 * SLOWDOWN)) "$@" \
        > "$T/hold$n" 2>&1 &
    HOLDERS+=($!)
    wait_until 10 "association $n from 127.0.0.2 accepted" grep -q "^accepted" "$T/hold$n"
}

# The first line rawscu printed for one more association from 127.0.0.2.
one_more_from_second_host() {
    $RAW 127.0.0.1 "$PORT" associate --source 127.0.0.2 --wait 5 > "$T/more" 2>&1
    head -n 1 "$T/more"
}

release_holders() {
    kill "${HOLDERS[@]}" 2> /dev/null
    wait "${HOLDERS[@]}" 2> /dev/null
    HOLDERS=()
}

write_config "max_associations = 5" "tls_port = $TLS_PORT" "tls_certificate = $P/node.crt" \
    "tls_private_key = $P/node.key" "tls_ca_certificates = $P/ca.crt"
start_daemon
grep -q "listening on port $PORT (at most 5 associations, 4 from one host)" "$T/ldctd.log" ||
    fail "the start does not give the limits: $(grep listening "$T/ldctd.log")"
for i in 1 2 3; do hold_from_second_host "$i"; done
hold_from_second_host 4 --tls "$P/ca.crt" "$P/scanner.crt" "$P/scanner.key"
# Result 2 (transient), source 3 (service provider, presentation), reason 2.
answer=$(one_more_from_second_host)
[ "$answer" = "rejected (result 2, source 3, reason 2)" ] ||
    fail "a fifth association from 127.0.0.2: $answer"
grep -q "from 127.0.0.2 (calling RAWSCU, called LDCTNODE) rejected: local limit exceeded (all max_associations_per_host = 4 in use by 127.0.0.2)" \
    "$T/ldctd.log" || fail "the refusal does not name the limit: $(grep rejected "$T/ldctd.log")"
out=$(echoscu -aec LDCTNODE 127.0.0.1 "$PORT" 2>&1) || fail "127.0.0.1 refused beside 127.0.0.2: $out"
kill "${HOLDERS[0]}"
wait_until 10 "the slot of a closed association given back" \
    sh -c "$RAW 127.0.0.1 $PORT associate --source 127.0.0.2 --wait 1 | grep -q '^accepted'"
release_holders
# The key needs a restart; a reload names the value in force.
write_config "max_associations = 5" "max_associations_per_host = 2" "tls_port = $TLS_PORT" \
    "tls_certificate = $P/node.crt" "tls_private_key = $P/node.key" "tls_ca_certificates = $P/ca.crt"
kill -HUP "$DAEMON_PID"
wait_until 10 "the reload names the limit in force" grep -q \
    "reload: max_associations_per_host = 2 takes effect after a restart (running with 0, i.e. 4)" \
    "$T/ldctd.log"
stop_daemon || fail "exit code $?"

write_config "max_associations = 5" "max_associations_per_host = 1"
start_daemon
hold_from_second_host 5
answer=$(one_more_from_second_host)
[ "$answer" = "rejected (result 2, source 3, reason 2)" ] ||
    fail "a second association from 127.0.0.2: $answer"
grep -q "rejected: local limit exceeded (all max_associations_per_host = 1 in use by 127.0.0.2)" \
    "$T/ldctd.log" || fail "the explicit limit is not the one applied"
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "127.0.0.1 refused beside 127.0.0.2"
release_holders
stop_daemon || fail "exit code $?"
