#!/usr/bin/env bash
# Broken peers at the DIMSE level, played by tests/tools/rawscu.py: a dataset
# flagged complete but cut inside its pixel data is refused (0xC000), not
# acknowledged (it once was: only the header was read back); one cut inside
# its header is refused with a reason that says so; bytes that are not DICOM
# close only their own connection; a peer that stalls mid-dataset is dropped
# after the DIMSE timeout, holds no other peer meanwhile, and leaves no
# partial file. Nothing refused reaches the database.
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
$RAW 127.0.0.1 "$PORT" store "$T/s/IMG0004.dcm" --stall 700 --wait 20 > "$T/stall.out" &
stall=$!
sleep 0.5
timeout 5 echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "C-ECHO blocked by a stalled peer"
timeout 5 storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T/s/IMG0005.dcm" ||
    fail "C-STORE blocked by a stalled peer"
wait $stall || fail "rawscu stall"
secs=$(sed -nE 's/^closed after ([0-9]+).*/\1/p' "$T/stall.out")
[ -n "$secs" ] && [ "$secs" -le 8 ] || fail "stalled peer not dropped: $(cat "$T/stall.out")"
note "stalled peer dropped after $(cat "$T/stall.out" | cut -d' ' -f3) s (dimse_timeout 2)"
left=$(find "$STATE/spool/.tmp" -type f -size +0) # empty: made ahead (tmppool.h)
[ -z "$left" ] || fail "partial file left: $left"
[ "$(db_instances)" = 2 ] || fail "$(db_instances) instances recorded, expected 2"
assert_stored_identical "$T/s/IMG0001.dcm" "$T/s/IMG0005.dcm"
stop_daemon || fail "exit code $?"
