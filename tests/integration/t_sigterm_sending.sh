#!/usr/bin/env bash
# SIGTERM while sending to a slow PACS. The send goes on during
# shutdown_grace_seconds: with a grace long enough the whole derived
# series arrives before the exit (a stop used to cut it after the file in
# flight, leaving half a series on the PACS until the next start). With a
# short grace it ends after the file in flight once the grace is over; the
# daemon exits 0 within grace + 2 s, the send is not counted as a failed
# attempt, and after the restart it goes on and every instance arrives.
. "$(dirname "$0")/lib.sh"
PACS_PORT=$(free_port)
mkdir -p "$T/pacs"
# 1 s per C-STORE: 8 files keep one association busy for 8 s.
storescp -aet SLOW --sleep-after 1 -od "$T/pacs" "$PACS_PORT" > "$T/storescp.log" 2>&1 &
config() { # GRACE
    write_config "stable_seconds = 1" "devices = cpu" "shutdown_grace_seconds = $1" \
        "[destination slow]" "host = 127.0.0.1" "port = $PACS_PORT" "ae_title = SLOW" \
        "[rule r]" "action = process" "algorithm = nlm2d" "destinations = slow"
}
files() { ls "$T/pacs" | wc -l; }
# Sends series $1 (8 slices, seed $2), SIGTERMs once the send is under way;
# sets took (seconds to the exit) and before (files on the PACS then).
send_and_stop() {
    "$MKSERIES" --out "$T/$1" --rows 32 --cols 32 --slices 8 --noise 20 --seed "$2" > /dev/null ||
        fail "mkseries"
    storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T/$1"/*.dcm || fail "storescu"
    local have=$(files)
    sending() { [ "$(sends_in sending)" = 1 ] && [ "$(files)" -ge $((have + 1)) ]; }
    wait_until 30 "the send under way" sending
    before=$(files)
    local start=$(date +%s)
    kill -TERM "$DAEMON_PID"
    local rc=0
    wait "$DAEMON_PID" || rc=$?
    DAEMON_PID=
    took=$(($(date +%s) - start))
    [ $rc = 0 ] || fail "daemon exit code $rc"
}

# 1. A grace of 3 s: 3 or 4 more files, then the send ends after its file.
config 3
start_daemon
send_and_stop a 1
[ "$took" -le 6 ] || fail "shutdown took $took s (grace 3 s + 2 s for the file in flight)"
got=$(files)
[ "$got" -ge $((before + 2)) ] || fail "the send stopped at the SIGTERM ($before files then, $got at the exit)"
[ "$got" -lt 8 ] || fail "the whole series went out within a 3 s grace ($got files)"
grep -q "interrupted by the shutdown" "$T/ldctd.log" || fail "no log line about the send"
grep -q "0 job(s) and 1 send(s) still queued; they go on at the next start" "$T/ldctd.log" ||
    fail "no word on what is left: $(tail -n 5 "$T/ldctd.log")"
[ "$(sql "SELECT attempts || ' ' || state FROM sends")" = "0 pending" ] ||
    fail "after the stop: $(sql "SELECT attempts || ' ' || state FROM sends") (want 0 pending)"
# No ldctd runs: the send waits for the next start, not for a time.
"$LDCT" --config "$T/ldctd.conf" jobs | grep -Eq "send 1 derived +pending to .*, next try once ldctd runs(, not before [0-9: -]+)?$" ||
    fail "ldct jobs while stopped: $("$LDCT" --config "$T/ldctd.conf" jobs)"
start_daemon
delivered() { [ "$(sends_in done)" = 1 ]; }
wait_until 40 "the send finished after the restart" delivered
[ "$(sql "SELECT attempts FROM sends")" = 1 ] || fail "attempts $(sql "SELECT attempts FROM sends")"
[ "$(files)" = 8 ] || fail "the PACS holds $(files) files, not 8"
stop_daemon || fail "exit code $?"

# 2. A grace of 20 s: the series is whole on the PACS before the exit.
config 20
start_daemon
send_and_stop b 2
[ "$(files)" = 16 ] || fail "the PACS holds $(files) files at the exit, not 16 (from $before at the SIGTERM)"
[ "$(sends_in done)" = 2 ] || fail "sends: $(sql "SELECT id, state, attempts FROM sends")"
[ "$took" -lt 15 ] || fail "the stop took $took s for 8 s of sending"
