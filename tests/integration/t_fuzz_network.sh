#!/usr/bin/env bash
# A bounded run of tests/tools/dcmfuzz.py (fixed seed): 500 mutated
# instances of small series in seven transfer syntaxes (bit flips, bad
# lengths and VRs, repeated and reordered elements, broken sequences and
# pixel data, extreme image attributes, invalid UIDs, syntax mismatches)
# and 30 broken upper-layer exchanges, each on its own association. The
# daemon must answer C-ECHO after every one, keep every instance it
# answered 0x0000 exactly as sent, never acknowledge an invalid UID, log
# no patient data, and stop cleanly (under ASan, with no leak: LSan's
# exit status fails the stop; DCMTK's own leak on the association
# requests it refuses is kept out by scp/assoc_rq.cc, so nothing is
# suppressed). Accepted mutants are processed meanwhile.
. "$(dirname "$0")/lib.sh"
write_config "devices = cpu" "dimse_timeout = 5" "acse_timeout = 5" "stable_seconds = 2" \
    "interrupted_seconds = 2"
for ts in explicit implicit big deflate rle jpegll jpegls; do
    "$MKSERIES" --out "$T/seed-$ts" --rows 16 --cols 16 --slices 3 --ts "$ts" \
        > /dev/null 2>&1 || fail "mkseries $ts"
done
"$MKSERIES" --out "$T/seed-wide" --rows 96 --cols 96 --slices 3 > /dev/null 2>&1 ||
    fail "mkseries wide"
start_daemon
python3 "$ROOT/tests/tools/dcmfuzz.py" 127.0.0.1 "$PORT" "$T"/seed-* --seed 26 \
    --iterations 500 --pdu-iterations 30 --state "$STATE" --pid "$DAEMON_PID" \
    --echo-limit $((5 * SLOWDOWN)) --wait $((30 * SLOWDOWN)) > "$T/fuzz.out" 2>&1 ||
    { cat "$T/fuzz.out"; fail "dcmfuzz found a problem (above)"; }
note "$(grep -E '^(outcomes|acknowledged|echo probe)' "$T/fuzz.out" | tr '\n' ';')"
grep -aq "FUZZPHI\|PHIMARK\|19010101" "$T/ldctd.log" && fail "patient data in the log"
timeout $((5 * SLOWDOWN)) echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "no C-ECHO at the end"
stop_daemon || fail "exit code $? (a sanitizer report?)"
