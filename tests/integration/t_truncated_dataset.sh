#!/usr/bin/env bash
# Broken peers at the DIMSE level, played by tests/tools/rawscu.py: a dataset
# flagged complete but cut inside its pixel data is refused (0xC000), not
# acknowledged (it once was: only the header was read back); one cut inside
# its header is refused with a reason that says so; bytes that are not DICOM
# close only their own connection. Nothing refused reaches the database and
# no partial file is left.
. "$(dirname "$0")/lib.sh"
RAW="python3 $ROOT/tests/tools/rawscu.py"
write_config "dimse_timeout = 2" "stable_seconds = 60"
"$MKSERIES" --out "$T/s" --rows 16 --cols 16 --slices 5 > /dev/null 2>&1 || fail "mkseries"
start_daemon
# The dataset is 1372 bytes, its pixel data the last 524 (16 x 16 x 2 + 12).
st=$($RAW 127.0.0.1 "$PORT" store "$T/s/IMG0001.dcm") || fail "rawscu store"
[ "$st" = 0x0000 ] || fail "a whole dataset got $st"
st=$($RAW 127.0.0.1 "$PORT" store "$T/s/IMG0002.dcm" --cut 1100) || fail "rawscu cut"
[ "$st" = 0xC000 ] || fail "a dataset cut inside its pixel data got $st"
st=$($RAW 127.0.0.1 "$PORT" store "$T/s/IMG0003.dcm" --cut 600) || fail "rawscu cut header"
[ "$st" = 0xC000 ] || fail "a dataset cut inside its header got $st"
grep -q "the dataset cannot be parsed (truncated or not DICOM)" "$T/ldctd.log" ||
    fail "no reason for the truncated dataset in the log"
[ "$(db_instances)" = 1 ] || fail "$(db_instances) instances recorded, expected the whole one only"
out=$($RAW 127.0.0.1 "$PORT" garbage --wait 5) || fail "rawscu garbage"
case "$out" in closed*) ;; *) fail "garbage: $out" ;; esac
timeout 5 storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T/s/IMG0005.dcm" || fail "storescu"
[ -z "$(ls -A "$STATE/spool/.tmp")" ] || fail "partial file left: $(ls "$STATE/spool/.tmp")"
[ "$(db_instances)" = 2 ] || fail "$(db_instances) instances recorded, expected 2"
assert_stored_identical "$T/s/IMG0001.dcm" "$T/s/IMG0005.dcm"
stop_daemon || fail "exit code $?"
