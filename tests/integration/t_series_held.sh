#!/usr/bin/env bash
# ldct series marks a series held for its sender's resend (receiving*) by
# the running ldctd's interrupted_seconds, which the daemon records in its
# database at each start and reload, not by the value of the configuration
# ldct was given: with only --state-dir that was the built-in 600 s (or
# another file's value with --config), so a daemon running with
# interrupted_seconds below the series' stable_seconds (nothing held) was
# shown holding it, and one above was shown not holding it.
. "$(dirname "$0")/lib.sh"
"$MKSERIES" --out "$T/s" --rows 8 --cols 8 --slices 2 > /dev/null || fail "mkseries"
write_config "stable_seconds = 60" "interrupted_seconds = 30" "[rule none]" "action = discard"
start_daemon
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm || fail "storescu"
[ "$(sql "SELECT state FROM series")" = receiving ] || fail "series not receiving"
# A kill leaves the series cut off as far as the next start knows: that
# start marks it interrupted (it waits for the sender's resend).
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2> /dev/null
DAEMON_PID=
start_daemon
marked() { [ "$(sql "SELECT interrupted_ms > 0 FROM series")" = 1 ]; }
wait_until 10 "the series marked interrupted at the unclean start" marked
recorded() { sql "SELECT value FROM node_settings WHERE name = 'interrupted_seconds'"; }
[ "$(recorded)" = 30 ] || fail "interrupted_seconds recorded as '$(recorded)', not 30"
# 30 s do not extend the series' 60 s of quiet: not held. The built-in
# 600 s would say it is.
state_of() { "$LDCT" "$@" series | awk 'NR == 2 {print $4}'; }
[ "$(state_of --state-dir "$STATE")" = receiving ] ||
    fail "--state-dir: '$(state_of --state-dir "$STATE")' with the daemon's 30 s"
printf '[node]\nstate_dir = %s\ninterrupted_seconds = 5\n' "$STATE" > "$T/other.conf"
[ "$(state_of --config "$T/other.conf")" = receiving ] || fail "--config of another file"
# Reloaded with 120 s: held now, whatever ldct is given.
write_config "stable_seconds = 60" "interrupted_seconds = 120" "[rule none]" "action = discard"
kill -HUP "$DAEMON_PID"
reloaded() { [ "$(recorded)" = 120 ]; }
wait_until 10 "interrupted_seconds = 120 recorded at the reload" reloaded
[ "$(state_of --state-dir "$STATE")" = 'receiving*' ] ||
    fail "--state-dir after the reload: '$(state_of --state-dir "$STATE")'"
[ "$(state_of --config "$T/other.conf")" = 'receiving*' ] || fail "--config after the reload"
"$LDCT" --state-dir "$STATE" series --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert len(s) == 1 and s[0]["held_for_resend"] is True, s' || fail "series --json"
stop_daemon || fail "exit code $?"

# ldct release ends a hold: the series goes on once quiet for its
# stable_seconds, instead of waiting interrupted_seconds for a resend that
# will not come. The first series stays held until --all.
write_config "stable_seconds = 3" "interrupted_seconds = 600" "[rule none]" "action = discard"
start_daemon
"$MKSERIES" --out "$T/r" --rows 8 --cols 8 --slices 2 > /dev/null || fail "mkseries"
uid2=$(dcmdump -q +P 0020,000e "$T/r/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/r/*.dcm || fail "storescu"
kill -9 "$DAEMON_PID"
wait "$DAEMON_PID" 2> /dev/null
DAEMON_PID=
state2() { sql "SELECT state FROM series WHERE series_uid = '$uid2'"; }
[ "$(state2)" = receiving ] || fail "series 2 is $(state2) before the kill (a slow machine?)"
start_daemon
held2() { [ "$(sql "SELECT interrupted_ms > 0 FROM series WHERE series_uid = '$uid2'")" = 1 ]; }
wait_until 10 "series 2 held at the unclean start" held2
"$LDCT" --state-dir "$STATE" release 1.2.3.4 2> "$T/err"; rc=$?
[ $rc = 1 ] && grep -q "no series 1.2.3.4" "$T/err" || fail "release of no series: $rc $(cat "$T/err")"
"$LDCT" --state-dir "$STATE" release 2> /dev/null; [ $? = 2 ] || fail "release without a series"
"$LDCT" --state-dir "$STATE" jobs --all 2> "$T/err"; rc=$?
[ $rc = 2 ] && grep -q "\-\-all is an option of release" "$T/err" || fail "jobs --all: $rc"
out=$("$LDCT" --state-dir "$STATE" release "$uid2") || fail "release: $out"
[ "$out" = "released 1 held series; each is processed once quiet for its stable_seconds" ] ||
    fail "release said: $out"
discarded2() { [ "$(state2)" = discarded ]; }
wait_until 20 "the released series processed (discarded by its rule)" discarded2
"$LDCT" --state-dir "$STATE" release "$uid2" 2> "$T/err" && fail "a discarded series released"
grep -q "is discarded, not receiving: nothing to release" "$T/err" || fail "$(cat "$T/err")"
[ "$(sql "SELECT state || ' ' || (interrupted_ms > 0) FROM series WHERE series_uid != '$uid2'")" = \
    "receiving 1" ] || fail "release of series 2 touched the other one"
[ "$("$LDCT" --state-dir "$STATE" release --all --json)" = '{"released":1}' ] || fail "release --all"
[ "$(sql "SELECT interrupted_ms FROM series WHERE series_uid != '$uid2'")" = 0 ] ||
    fail "release --all left the hold"
"$LDCT" --state-dir "$STATE" release --all | grep -qx "no series is held" || fail "release --all again"
stop_daemon || fail "exit code $?"
