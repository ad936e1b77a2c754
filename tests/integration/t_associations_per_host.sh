#!/usr/bin/env bash
# One peer address cannot take every association: with max_associations = 5
# the default max_associations_per_host (half, rounded up) lets 127.0.0.2
# hold 3 idle associations; its fourth is refused (transient, local limit
# exceeded, the log names the host and the limit) while 127.0.0.1 still gets
# in, and a slot the host gives back can be taken again. An explicit
# max_associations_per_host = 1 applies as set.
. "$(dirname "$0")/lib.sh"
RAW="python3 $ROOT/tests/tools/rawscu.py"
HOLDERS=()

# Opens an association from 127.0.0.2 that stays idle (output in $T/hold$1).
hold_from_second_host() {
    $RAW 127.0.0.1 "$PORT" associate --source 127.0.0.2 --wait $((20 * SLOWDOWN)) \
        > "$T/hold$1" 2>&1 &
    HOLDERS+=($!)
    wait_until 10 "association $1 from 127.0.0.2 accepted" grep -q "^accepted" "$T/hold$1"
}

# The first line rawscu printed for one more association from 127.0.0.2.
one_more_from_second_host() {
    $RAW 127.0.0.1 "$PORT" associate --source 127.0.0.2 --wait 5 2>&1 | head -n 1
}

release_holders() {
    kill "${HOLDERS[@]}" 2> /dev/null
    wait "${HOLDERS[@]}" 2> /dev/null
    HOLDERS=()
}

write_config "max_associations = 5" "dimse_timeout = 60"
start_daemon
for i in 1 2 3; do hold_from_second_host "$i"; done
[ "$(one_more_from_second_host)" = rejected ] || fail "a fourth association from 127.0.0.2 was not refused"
grep -q "from 127.0.0.2 (calling RAWSCU, called LDCTNODE) rejected: local limit exceeded (all max_associations_per_host = 3 in use by 127.0.0.2)" \
    "$T/ldctd.log" || fail "the refusal does not name the limit: $(grep rejected "$T/ldctd.log")"
out=$(echoscu -aec LDCTNODE 127.0.0.1 "$PORT" 2>&1) || fail "127.0.0.1 refused beside 127.0.0.2: $out"
kill "${HOLDERS[0]}"
wait_until 10 "the slot of a closed association given back" \
    sh -c "$RAW 127.0.0.1 $PORT associate --source 127.0.0.2 --wait 1 | grep -q '^accepted'"
release_holders
stop_daemon || fail "exit code $?"

write_config "max_associations = 5" "max_associations_per_host = 1"
start_daemon
hold_from_second_host 4
[ "$(one_more_from_second_host)" = rejected ] || fail "a second association from 127.0.0.2 was not refused"
grep -q "rejected: local limit exceeded (all max_associations_per_host = 1 in use by 127.0.0.2)" \
    "$T/ldctd.log" || fail "the explicit limit is not the one applied"
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "127.0.0.1 refused beside 127.0.0.2"
release_holders
stop_daemon || fail "exit code $?"
