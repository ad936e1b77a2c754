#!/usr/bin/env bash
# kill -9 of the daemon in the middle of a transfer: after a restart, every
# instance that storescu saw acknowledged is present, readable and identical,
# and the series cut off waits for the resend as an interrupted one (a
# clean stop and start leaves a receiving series as it is).
. "$(dirname "$0")/lib.sh"
"$MKSERIES" --out "$T/s" --rows 256 --cols 256 --slices 300 --noise 10 || fail "mkseries"
start_daemon
storescu -v -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm > "$T/storescu.log" 2>&1 &
sender=$!
await_instances 40 0.05
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2>/dev/null
DAEMON_PID=
wait "$sender" && fail "storescu finished although the daemon was killed"
# Files whose C-STORE response was Success, in the order storescu sent them.
acked=$(awk '/Sending file:/ {f=$NF} /Received Store Response \(Success\)/ {print f}' \
        "$T/storescu.log")
n=$(echo "$acked" | grep -c .)
[ "$n" -ge 40 ] && [ "$n" -lt 300 ] || fail "expected a partial transfer, $n acknowledged"
note "$n instances acknowledged before kill -9"
start_daemon
[ "$(db_instances)" -ge "$n" ] || fail "only $(db_instances) rows for $n acknowledged"
# shellcheck disable=SC2086
assert_stored_identical $acked
for f in $(sqlite3 "$STATE/ldct.db" "SELECT path FROM instances"); do
    dcmdump -q "$f" > /dev/null || fail "unreadable $f"
done
# Only the empty files made ahead for the next stores (pipeline/tmppool.h).
[ -z "$(find "$STATE/spool/.tmp" -type f -size +0)" ] || fail "partial files left after restart"
[ "$(sql "SELECT state || ' ' || (interrupted_ms > 0) FROM series")" = "receiving 1" ] ||
    fail "after kill -9 the series is $(sql "SELECT state || ' ' || (interrupted_ms > 0) FROM series")"
grep -q "1 series were receiving when the last run ended without stopping" "$T/ldctd.log" ||
    fail "no log line for the series cut off by the kill"
# ldct series tells a held series from one that is still arriving.
out=$("$LDCT" --config "$T/ldctd.conf" series)
echo "$out" | grep -q " receiving\* " || fail "ldct series does not mark the held series: $out"
echo "$out" | grep -q "^\* held for the sender's resend" || fail "no footnote: $out"
"$LDCT" --config "$T/ldctd.conf" series --json | grep -q '"held_for_resend":true' ||
    fail "ldct series --json: no held_for_resend"
# With interrupted_seconds 0 the mark adds no wait: once the daemon runs
# with it (a reload), nothing is shown as held, whatever file ldct reads
# (the daemon's value is recorded in its database; t_series_held).
cp "$T/ldctd.conf" "$T/hold.conf"
echo "interrupted_seconds = 0" >> "$T/ldctd.conf"
kill -HUP "$DAEMON_PID"
wait_until 10 "the reload" grep -q "configuration reloaded" "$T/ldctd.log"
grep -q "configuration reloaded from $T/ldctd.conf: interrupted_seconds 600 -> 0$" "$T/ldctd.log" ||
    fail "the reload does not say what changed: $(grep "reloaded" "$T/ldctd.log")"
"$LDCT" --config "$T/hold.conf" series | grep -q "receiving\*" &&
    fail "a series shown as held although the daemon runs with interrupted_seconds = 0"
# The rest can be sent again; resends of acknowledged ones stay one row each.
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm || fail "resend failed"
[ "$(db_instances)" = 300 ] || fail "expected 300 rows, found $(db_instances)"
[ "$(sql "SELECT interrupted_ms > 0 FROM series")" = 0 ] || fail "the resend did not clear the mark"
stop_daemon || fail "exit code $?"
start_daemon
[ "$(sql "SELECT state || ' ' || (interrupted_ms > 0) FROM series")" = "receiving 0" ] ||
    fail "after a clean stop the series is $(sql "SELECT state || ' ' || (interrupted_ms > 0) FROM series")"
grep -q "[0-9] receiving" "$STATE/ldctd.lock" || fail "lock while running: $(cat "$STATE/ldctd.lock")"
stop_daemon || fail "exit code $?"
# A bare pid is what an older ldctd leaves even after a clean stop (or
# after refusing this database): no crash to assume.
echo 4242 > "$STATE/ldctd.lock"
start_daemon
[ "$(sql "SELECT state || ' ' || (interrupted_ms > 0) FROM series")" = "receiving 0" ] ||
    fail "after an older ldctd's lock the series is $(sql "SELECT state || ' ' || (interrupted_ms > 0) FROM series")"
grep -q "was left by an older ldctd" "$T/ldctd.log" || fail "no log line for the older lock"
stop_daemon || fail "exit code $?"
