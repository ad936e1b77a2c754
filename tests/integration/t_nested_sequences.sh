#!/usr/bin/env bash
# A C-STORE whose dataset nests 200000 sequences (7 MB) once overflowed the
# stack of the thread that parsed it and killed the daemon. Now it is
# refused (0xC000) with the reason in the log, in Explicit VR and in the
# Deflated transfer syntax (sent by tests/tools/rawscu.py: storescu itself
# cannot read such a file), and the daemon goes on serving; a dataset that
# nests 20 deep (an SR content tree is about that) is still stored.
. "$(dirname "$0")/lib.sh"
RAW="python3 $ROOT/tests/tools/rawscu.py"
write_config "stable_seconds = 60"
start_daemon
root=1.2.826.0.1.3680043.9.7.58
# Writes a CT dataset (Explicit VR Little Endian, no meta header) with DEPTH
# nested Content Sequences of undefined length into FILE.
nested() { # FILE DEPTH SOP
    python3 - "$@" <<'PY'
import struct, sys
path, depth, sop = sys.argv[1], int(sys.argv[2]), sys.argv[3].encode()
def el(g, e, vr, v):
    v += b"\0" * (len(v) % 2)
    return struct.pack("<HH", g, e) + vr + struct.pack("<H", len(v)) + v
head = (el(8, 0x16, b"UI", b"1.2.840.10008.5.1.4.1.1.2") + el(8, 0x18, b"UI", sop) +
        el(0x20, 0x0D, b"UI", b"1.2.826.0.1.3680043.9.7.58") +
        el(0x20, 0x0E, b"UI", b"1.2.826.0.1.3680043.9.7.58.1"))
opening = struct.pack("<HH2sHI", 0x0040, 0xA730, b"SQ", 0, 0xFFFFFFFF) + \
    struct.pack("<HHI", 0xFFFE, 0xE000, 0xFFFFFFFF)
closing = struct.pack("<HHI", 0xFFFE, 0xE00D, 0) + struct.pack("<HHI", 0xFFFE, 0xE0DD, 0)
open(path, "wb").write(head + opening * depth + closing * depth)
PY
}
nested "$T/deep.raw" 200000 "$root.1" || fail "writing the deep dataset"
st=$($RAW 127.0.0.1 "$PORT" store "$T/deep.raw" --raw-sop "$root.1" --wait 20) ||
    fail "rawscu: daemon gone? $(kill -0 "$DAEMON_PID" 2>&1)"
[ "$st" = 0xC000 ] || fail "200000 nested sequences got $st"
grep -q "sequences nested deeper than 128 levels" "$T/ldctd.log" || fail "no reason in the log"
kill -0 "$DAEMON_PID" || fail "daemon died"
# The same in the Deflated transfer syntax (the scanner inflates as it goes;
# a PDV fragment must have an even length, hence the padding byte).
nested "$T/deep2.raw" 100000 "$root.2" || fail "writing the second deep dataset"
python3 -c 'import sys, zlib
z = zlib.compressobj(9, zlib.DEFLATED, -15)
d = z.compress(open(sys.argv[1], "rb").read()) + z.flush()
open(sys.argv[2], "wb").write(d + b"\0" * (len(d) % 2))' \
    "$T/deep2.raw" "$T/deep2.z" || fail "deflating"
st=$($RAW 127.0.0.1 "$PORT" store "$T/deep2.z" --raw-sop "$root.2" --ts 1.2.840.10008.1.2.1.99 \
    --wait 20 2> "$T/raw.err") || fail "rawscu deflated: $(cat "$T/raw.err")"
[ "$st" = 0xC000 ] || fail "100000 nested sequences, deflated, got $st"
[ "$(grep -c "sequences nested deeper than 128 levels" "$T/ldctd.log")" = 2 ] ||
    fail "deflated deep dataset refused without the reason"
nested "$T/ok.raw" 20 "$root.3" || fail "writing the shallow dataset"
st=$($RAW 127.0.0.1 "$PORT" store "$T/ok.raw" --raw-sop "$root.3") || fail "rawscu shallow"
[ "$st" = 0x0000 ] || fail "20 nested sequences got $st"
[ "$(db_instances)" = 1 ] || fail "$(db_instances) instances recorded, expected 1"
echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "daemon stopped answering"
stop_daemon || fail "exit code $?"
