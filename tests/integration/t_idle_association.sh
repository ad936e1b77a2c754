#!/usr/bin/env bash
# A sender that leaves its association open after its last instance, until
# our dimse_timeout ends it, has sent a whole series: the series is not
# held for a resend (interrupted_seconds) but becomes stable after
# stable_seconds. A wait that ends with "no data" before dimse_timeout is a
# connection that ended early and counts as a cut (check_scp
# no_data_counts_as_idle_only_after_the_whole_dimse_timeout).
. "$(dirname "$0")/lib.sh"
RAW="python3 $ROOT/tests/tools/rawscu.py"
write_config "dimse_timeout = 2" "stable_seconds = 1" "interrupted_seconds = 600" \
    "[rule hold]" "action = discard"
"$MKSERIES" --out "$T/s" --rows 16 --cols 16 --slices 1 > /dev/null 2>&1 || fail "mkseries"
uid=$(dcmdump -q +P 0020,000e "$T/s/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
start_daemon
st=$($RAW 127.0.0.1 "$PORT" store "$T/s/IMG0001.dcm" --hold 4 2> /dev/null | head -n 1)
[ "$st" = 0x0000 ] || fail "the instance got ${st:-no status}"
grep -q "association with RAWSCU ended by an error: .*No data available" "$T/ldctd.log" ||
    fail "the open association was not ended by dimse_timeout"
stable() { grep -q "series $uid is stable with 1 instance(s)" "$T/ldctd.log"; }
wait_until 10 "the series is stable after the idle end" stable
! grep -q "series $uid: its association .* ended by an abort or an error" "$T/ldctd.log" ||
    fail "an association ended by dimse_timeout was taken as cut off"
! grep -q "before dimse_timeout" "$T/ldctd.log" || fail "the full wait was counted as early"
stop_daemon || fail "exit code $?"
