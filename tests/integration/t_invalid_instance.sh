#!/usr/bin/env bash
# An instance without a Series Instance UID is refused with 0xC000 and an
# error comment; the association goes on and the valid instances are stored.
# The refused instance is kept as received in the quarantine folder, with
# the reason beside it (DESIGN.md: quarantined for inspection), and is
# deleted quarantine_days after it came; /metrics counts what is kept.
. "$(dirname "$0")/lib.sh"
start_daemon
"$MKSERIES" --out "$T/s" --rows 64 --cols 64 --slices 3 || fail "mkseries"
dcmodify -q -nb -ea "(0020,000e)" "$T/s/IMG0002.dcm" || fail "dcmodify"
out=$(storescu -v -nh -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/IMG0001.dcm "$T"/s/IMG0002.dcm \
      "$T"/s/IMG0003.dcm 2>&1)
echo "$out" | grep -q "Error: CannotUnderstand" || fail "no C000 status: $out"
echo "$out" | grep -qi "0020,000E" || note "(storescu did not print the error comment)"
[ "$(db_instances)" = 2 ] || fail "expected the 2 valid instances, found $(db_instances)"
assert_stored_identical "$T"/s/IMG0001.dcm "$T"/s/IMG0003.dcm
grep -q "missing (0020,000E)" "$T/ldctd.log" || fail "no log line with the reason"
kept=("$STATE"/quarantine/*.dcm)
[ ${#kept[@]} = 1 ] && [ -f "${kept[0]}" ] || fail "expected 1 quarantined file: ${kept[*]}"
dataset_of "${kept[0]}" "$T/kept.raw" && dataset_of "$T/s/IMG0002.dcm" "$T/sent.raw" &&
    cmp -s "$T/kept.raw" "$T/sent.raw" || fail "the quarantined dataset differs from what was sent"
grep -q "missing (0020,000E)" "${kept[0]%.dcm}.reason" || fail "no reason file beside it"
stop_daemon || fail "exit code $?"

# A second refused instance; the first one made three days old. At the
# next start (quarantine_days = 2) the old one goes, the new one stays.
HTTP=$(free_port)
write_config "quarantine_days = 2" "http_port = $HTTP"
start_daemon
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/IMG0002.dcm > /dev/null 2>&1
two_kept() { [ "$(ls "$STATE"/quarantine/*.dcm | wc -l)" = 2 ]; }
wait_until 10 "a second quarantined instance" two_kept
stop_daemon || fail "exit code $?"
touch -d "3 days ago" "${kept[0]}" "${kept[0]%.dcm}.reason"
start_daemon
wait_until 10 "the old quarantined instance deleted" \
    grep -q "quarantine: deleted 1 refused instance(s) kept over 2 day(s)" "$T/ldctd.log"
[ ! -e "${kept[0]}" ] && [ ! -e "${kept[0]%.dcm}.reason" ] || fail "the old one is still there"
left=("$STATE"/quarantine/*)
[ ${#left[@]} = 2 ] || fail "expected the new instance and its reason: ${left[*]}"
bytes=$(( $(stat -c %s "${left[0]}") + $(stat -c %s "${left[1]}") ))
curl -s "http://127.0.0.1:$HTTP/metrics" > "$T/metrics.txt" || fail "GET /metrics"
grep -qx "ldct_quarantine_instances 1" "$T/metrics.txt" ||
    fail "metrics: $(grep quarantine "$T/metrics.txt")"
grep -qx "ldct_quarantine_bytes $bytes" "$T/metrics.txt" ||
    fail "metrics: $(grep quarantine "$T/metrics.txt") (want $bytes bytes)"
curl -s "http://127.0.0.1:$HTTP/status" | grep -q "\"quarantine\":{\"instances\":1,\"bytes\":$bytes}" ||
    fail "no quarantine in /status"
stop_daemon || fail "exit code $?"
