#!/usr/bin/env bash
# PACS down: the series is processed while Orthanc is stopped, the send is
# retried with growing delays (visible in ldct jobs), a second destination
# that is up gets its copy meanwhile; Orthanc comes back and everything is
# delivered. A send to a destination that stays down ends dead, and
# `ldct retry --to` sends it to another destination instead, but never to
# one that has the series already (up got it; it used to get it twice).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/orthanc.sh"
start_orthanc
stop_orthanc
UP_PORT=$(free_port)
mkdir -p "$T/up"
storescp -aet UP -od "$T/up" "$UP_PORT" > "$T/storescp.log" 2>&1 &
up=$!
SPARE_PORT=$(free_port)
mkdir -p "$T/spare"
storescp -aet SPARE -od "$T/spare" "$SPARE_PORT" > "$T/storescp-spare.log" 2>&1 &
spare=$!
DEAD_PORT=$(free_port)
HTTP=$(free_port)
write_config "stable_seconds = 1" "devices = cpu" "http_port = $HTTP" \
    "[destination pacs]" "host = 127.0.0.1" "port = $ORTHANC_DICOM_PORT" \
    "ae_title = $ORTHANC_AET" "timeout = 5" "retry_initial_seconds = 1" \
    "retry_multiplier = 2" "retry_max_seconds = 2" "retry_max_attempts = 100" \
    "[destination up]" "host = 127.0.0.1" "port = $UP_PORT" "ae_title = UP" \
    "[destination spare]" "host = 127.0.0.1" "port = $SPARE_PORT" "ae_title = SPARE" \
    "[destination nowhere]" "host = 127.0.0.1" "port = $DEAD_PORT" "ae_title = NONE" \
    "timeout = 2" "retry_initial_seconds = 1" "retry_max_attempts = 2" \
    "[rule r]" "action = process" "destinations = pacs, up, nowhere"
start_daemon
"$MKSERIES" --out "$T/s" --rows 64 --cols 64 --slices 8 --noise 20 > /dev/null || fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm || fail "storescu"
retried() { [ "$(sql "SELECT attempts >= 3 AND state = 'pending' FROM sends
                      WHERE destination = 'pacs'")" = 1 ]; }
wait_until 60 "three failed attempts to the stopped PACS" retried
# One warning per failed attempt (the send's, naming the destination), not three.
grep -Eq "$LOG_HEAD warning: scp: (SCU association request|sending to)" "$T/ldctd.log" &&
    fail "repeated warnings: $(grep -E "warning: scp: (SCU|sending)" "$T/ldctd.log" | head -2)"
grep -Eq "$LOG_HEAD warning: send [0-9]+ to pacs failed \(attempt 1\): cannot associate with" "$T/ldctd.log" ||
    fail "no warning for the failed attempt: $(grep "to pacs" "$T/ldctd.log" | head -3)"
sql "SELECT last_error FROM sends WHERE destination = 'pacs'" | grep -qi "connect\|refused\|network" ||
    fail "last error: $(sql "SELECT last_error FROM sends WHERE destination = 'pacs'")"
[ "$(sql "SELECT state FROM sends WHERE destination = 'up'")" = done ] ||
    fail "the destination that is up waited for the one that is down"
[ "$(ls "$T/up" | wc -l)" = 8 ] || fail "storescp got $(ls "$T/up" | wc -l) files"
"$LDCT" --config "$T/ldctd.conf" jobs | grep -Eq "send 1 derived +pending to pacs, attempts [0-9]+, next try in" ||
    fail "ldct jobs does not show the retry: $("$LDCT" --config "$T/ldctd.conf" jobs)"
dead() { [ "$(sql "SELECT state FROM sends WHERE destination = 'nowhere'")" = dead ]; }
wait_until 30 "the send to a destination that stays down ends dead" dead
grep -Eq "$LOG_HEAD error: send [0-9]* to nowhere is dead after 2 attempt\(s\): .*; once it can be sent: ldct retry 1$" \
    "$T/ldctd.log" || fail "the dead send's line: $(grep "is dead" "$T/ldctd.log")"
# Monitoring sees which destination is down: its send retrying (between
# attempts), the other's dead; the one that is up has nothing open.
metric_is() { curl -s "http://127.0.0.1:$HTTP/metrics" | grep -qx "$1"; }
wait_until 10 "pacs retrying in /metrics" metric_is \
    'ldct_destination_sends{destination="pacs",state="retrying"} 1'
metric_is 'ldct_destination_sends{destination="nowhere",state="dead"} 1' ||
    fail "metrics: $(curl -s "http://127.0.0.1:$HTTP/metrics" | grep destination_sends)"
curl -s "http://127.0.0.1:$HTTP/metrics" | grep -q 'destination="up"' && fail "up listed"
"$LDCT" --config "$T/ldctd.conf" status | grep -q "^  to nowhere: 0 queued, 0 retrying, 0 sending, 1 dead$" ||
    fail "ldct status: $("$LDCT" --config "$T/ldctd.conf" status)"
"$LDCT" --config "$T/ldctd.conf" status --json | python3 -c '
import json, sys
d = {x["destination"]: x for x in json.load(sys.stdin)["destinations"]}
assert set(d) == {"pacs", "nowhere"} and d["nowhere"]["dead"] == 1, d' ||
    fail "ldct status --json: $("$LDCT" --config "$T/ldctd.conf" status --json)"
# The series is processed ("done") but not delivered: ldct series says so.
"$LDCT" --config "$T/ldctd.conf" series | grep -Eq " done +1 dead " ||
    fail "ldct series hides the dead send: $("$LDCT" --config "$T/ldctd.conf" series)"
"$LDCT" --config "$T/ldctd.conf" series --json | grep -q '"delivery":"1 dead"' ||
    fail "ldct series --json: $("$LDCT" --config "$T/ldctd.conf" series --json)"
restart_orthanc
pacs_done() { [ "$(sql "SELECT state FROM sends WHERE destination = 'pacs'")" = done ]; }
wait_until 30 "delivery once the PACS is back" pacs_done
uid=$(sql "SELECT derived_series_uid FROM jobs WHERE id = 1")
[ "$(orthanc_instance_count "$uid")" = 8 ] || fail "PACS has $(orthanc_instance_count "$uid")"
"$LDCT" --config "$T/ldctd.conf" retry 1 --to elsewhere 2> "$T/err" && fail "retry --to elsewhere"
grep -q "has no \[destination elsewhere\]" "$T/err" || fail "retry --to elsewhere: $(cat "$T/err")"
# A plain retry, given a file without [destination nowhere] (renamed or
# removed), is refused: the send would only die again. Nothing changes.
sed -e '/^\[destination nowhere\]/,/^\[/{/^\[rule/!d}' \
    -e 's/destinations = pacs, up, nowhere/destinations = pacs, up/' "$T/ldctd.conf" > "$T/renamed.conf"
"$LDCT" check-config "$T/renamed.conf" > /dev/null || fail "renamed.conf: $("$LDCT" check-config "$T/renamed.conf")"
"$LDCT" --config "$T/renamed.conf" retry 1 2> "$T/err"
rc=$?
[ $rc = 2 ] || fail "retry to a destination the file lacks exited $rc"
grep -q "job 1 would send to 'nowhere' and fail again: $T/renamed.conf has no \[destination nowhere\] .*ldct retry 1 --to DEST \[--from nowhere\]" "$T/err" ||
    fail "retry to a missing destination: $(cat "$T/err")"
[ "$(sql "SELECT state FROM sends WHERE destination = 'nowhere'")" = dead ] || fail "the refused retry changed the send"
# up has the series: the dead send stays nowhere's, retried there.
"$LDCT" --config "$T/ldctd.conf" retry 1 --to up > "$T/out" || fail "ldct retry --to up"
grep -q "1 item(s) queued again, 0 send(s) moved to up; 1 dead send(s) retried to their own destination instead" \
    "$T/out" || fail "retry --to up: $(cat "$T/out")"
[ "$(sql "SELECT count(*) FROM sends WHERE destination = 'up'")" = 1 ] || fail "a second send to up"
wait_until 30 "the send to nowhere dead again" dead
"$LDCT" --config "$T/ldctd.conf" retry 1 --to spare --json > "$T/out" || fail "ldct retry --to spare"
[ "$(cat "$T/out")" = '{"job":1,"queued_again":1,"moved":1,"kept":0}' ] || fail "retry --to spare: $(cat "$T/out")"
[ "$(sql "SELECT count(*) FROM sends WHERE destination = 'nowhere'")" = 0 ] ||
    fail "retry --to did not move the dead send"
spare_done() { [ "$(sql "SELECT state FROM sends WHERE destination = 'spare'")" = done ]; }
wait_until 30 "the redirected send delivered to spare" spare_done
grep -q "send [0-9]*: derived series of job 1 to spare, queued again by ldct retry" "$T/ldctd.log" ||
    fail "no log line for the retried send: $(grep "send" "$T/ldctd.log" | tail -3)"
[ "$(ls "$T/spare" | wc -l)" = 8 ] || fail "spare has $(ls "$T/spare" | wc -l) files"
[ "$(ls "$T/up" | wc -l)" = 8 ] || fail "up has $(ls "$T/up" | wc -l) files"
kill "$up" "$spare"
stop_daemon || fail "exit code $?"
