#!/usr/bin/env bash
# A series becomes stable after stable_seconds of quiet; a late instance
# reopens it; a series no rule matches is kept as unmatched and removed
# after retention_hours (0 here: at the next retention check) with a log
# line; a rule asking for a longer quiet time defers its series.
. "$(dirname "$0")/lib.sh"
write_config "stable_seconds = 2" "retention_hours = 0" \
    "[rule slow]" "match.series_description = SLOW*" "stable_seconds = 5" "action = discard" \
    "[rule mr-only]" "match.modality = MR"
start_daemon
"$MKSERIES" --out "$T/s" --rows 64 --cols 64 --slices 3 --series-description "FAST" > /dev/null ||
    fail "mkseries"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/IMG0001.dcm "$T"/s/IMG0002.dcm || fail storescu
uid=$(dcmdump -q +P 0020,000e "$T/s/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
state() { sql "SELECT state FROM series WHERE series_uid = '$1'"; }
[ "$(state "$uid")" = receiving ] || fail "not receiving: $(state "$uid")"
# The rules read SeriesDescription from the files; the database keeps no
# free text of a series.
[ "$(sql "SELECT count(*) FROM series WHERE description != ''")" = 0 ] ||
    fail "the database keeps the series description"
sleep 3
grep -q "series $uid is stable with 2 instance" "$T/ldctd.log" || fail "no stable log line"
[ "$(state "$uid")" = unmatched ] || [ "$(state "$uid")" = removed ] ||
    fail "not unmatched after the quiet time: $(state "$uid")"
grep -q "series $uid (CT, 2 instance(s)) matches no rule" "$T/ldctd.log" || fail "no log line"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/IMG0003.dcm || fail storescu
[ "$(state "$uid")" = receiving ] || fail "late instance did not reopen: $(state "$uid")"
gone() { [ "$(state "$uid")" = removed ]; }
wait_until 20 "unmatched series removed after retention_hours" gone
grep -q "series $uid removed after 0 h (no rule matched, 3 file(s))" "$T/ldctd.log" ||
    fail "no removal log line"
[ -z "$(find "$STATE/spool" -name '*.dcm')" ] || fail "files left in the spool"

"$MKSERIES" --out "$T/slow" --rows 32 --cols 32 --slices 2 --series-description "SLOW ONE" \
    > /dev/null || fail "mkseries"
slow=$(dcmdump -q +P 0020,000e "$T/slow/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/slow/*.dcm || fail storescu
sleep 3.5
grep -q "series $slow: waiting 5 s of quiet time (rule 'slow')" "$T/ldctd.log" ||
    fail "rule's stable_seconds not applied"
[ "$(state "$slow")" = receiving ] || fail "deferred series is $(state "$slow")"
discarded() { [ "$(state "$slow")" = discarded ] || [ "$(state "$slow")" = removed ]; }
wait_until 10 "series discarded after the rule's quiet time" discarded
stop_daemon || fail "exit code $?"
