#!/usr/bin/env bash
# A C-STORE-RQ whose *command set* nests 100000 sequences used to kill the
# daemon inside DCMTK's command parser (recursion overflowing the thread's
# stack) before any of our code ran. The connection's reads now follow the
# PDU/PDV headers and close the connection once a command message passes
# 64 KiB (scp/server.cc, pdu_guard): the association ends, the reason is
# logged, the daemon lives on and stores the next series as usual.
. "$(dirname "$0")/lib.sh"
write_config "stable_seconds = 60"
start_daemon
"$MKSERIES" --out "$T/series" --rows 16 --cols 16 --slices 2 2>/dev/null || fail "mkseries"
one=$(ls "$T"/series/*.dcm | head -n1)
python3 "$ROOT/tests/tools/rawscu.py" 127.0.0.1 "$PORT" store "$one" --nest-command 100000 \
    --wait 10 > "$T/raw.out" 2>&1 || true
sleep 0.5
kill -0 "$DAEMON_PID" 2>/dev/null || fail "the daemon died: $(cat "$T/raw.out")"
grep -q "DIMSE command message over 65536 bytes" "$T/ldctd.log" || fail "no reason in the log"
grep -q "^0x0000" "$T/raw.out" && fail "the nested command was answered with success"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/series/*.dcm || fail "storescu after the attack"
[ "$(db_instances)" = 2 ] || fail "expected 2 instances, got $(db_instances)"
stop_daemon || fail "exit code $?"
