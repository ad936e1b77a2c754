#!/usr/bin/env bash
# Peers whose A-ASSOCIATE-RQ DCMTK cannot parse, and that then keep the
# connection open, are closed at once and block nobody. They were held for
# DCMTK's default 180 s in ASC_dropSCPAssociation, each counted as a
# connection waiting for its request, so 33 of them (the limit is 32) kept
# every other peer out for three minutes (the network fuzz review). The
# request (a user identity sub-item whose primary field runs past it) is
# now refused before DCMTK reads it (scp/assoc_rq.cc); the connection
# takes the same way out.
. "$(dirname "$0")/lib.sh"
RAW="python3 $ROOT/tests/tools/rawscu.py"
write_config "acse_timeout = 30"
start_daemon
pids=()
for i in $(seq 1 33); do
    $RAW 127.0.0.1 "$PORT" bad-associate --wait 20 > "$T/bad$i.out" 2>&1 &
    pids+=($!)
done
logged() {
    [ "$(grep -c "refused before DCMTK reads it: a user identity sub-item" \
        "$T/ldctd.log")" -ge "$1" ]
}
wait_until 20 "32 unreadable requests read" logged 32
timeout $((5 * SLOWDOWN)) echoscu -to 5 -aec LDCTNODE 127.0.0.1 "$PORT" ||
    fail "C-ECHO blocked by 33 peers with unreadable association requests"
wait "${pids[@]}"
for i in $(seq 1 33); do
    secs=$(sed -nE 's/^closed after ([0-9]+).*/\1/p' "$T/bad$i.out")
    [ -n "$secs" ] && [ "$secs" -le $((2 * SLOWDOWN)) ] ||
        fail "peer $i with an unreadable request not closed at once: $(cat "$T/bad$i.out")"
done
logged 33 || fail "not every unreadable request was logged"
stop_daemon || fail "exit code $?"
