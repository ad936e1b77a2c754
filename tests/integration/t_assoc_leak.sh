#!/usr/bin/env bash
# A-ASSOCIATE-RQs that DCMTK 3.6.7 refuses after building lists it then
# leaks (a transfer syntax over 64 bytes after 40 good ones, a presentation
# context without a transfer syntax, a broken extended negotiation
# sub-item) no longer grow the daemon: they are refused before DCMTK reads
# them (the network fuzz review's open item). 3000 of them grew its
# resident memory by 26 MB before, now by under 0.1 MB. Well-formed
# associations (C-ECHO, a C-STORE of a series) still work afterwards.
. "$(dirname "$0")/lib.sh"
RAW="python3 $ROOT/tests/tools/rawscu.py"
# Under ASan, freed memory is held in quarantine and would count as growth.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=0:thread_local_quarantine_size_kb=0"
write_config "acse_timeout = 5"
start_daemon
rss_kb() { sed -nE 's/^VmRSS:\s+([0-9]+) kB/\1/p' "/proc/$DAEMON_PID/status"; }
# A first round lets thread stacks and malloc arenas reach their steady size.
$RAW 127.0.0.1 "$PORT" leaky-associate --count 300 > "$T/warm.out" 2>&1 ||
    fail "rawscu: $(cat "$T/warm.out")"
before=$(rss_kb)
$RAW 127.0.0.1 "$PORT" leaky-associate --count 3000 > "$T/leaky.out" 2>&1 ||
    fail "rawscu: $(cat "$T/leaky.out")"
after=$(rss_kb)
grep -q "^3000 of 3000 closed without an answer" "$T/leaky.out" ||
    fail "not every malformed request was refused: $(cat "$T/leaky.out")"
note "resident memory ${before} kB -> ${after} kB over 3000 malformed requests"
[ $((after - before)) -lt 4096 ] ||
    fail "resident memory grew by $((after - before)) kB over 3000 malformed requests"
[ "$(grep -c "refused before DCMTK reads it" "$T/ldctd.log")" -eq 3300 ] ||
    fail "expected one log line per refused request"
grep "refused before DCMTK reads it" "$T/ldctd.log" | grep -qv "from 127.0.0.1" &&
    fail "a refusal logged without the peer address"
timeout $((10 * SLOWDOWN)) echoscu -aec LDCTNODE 127.0.0.1 "$PORT" || fail "no C-ECHO afterwards"
"$MKSERIES" --out "$T/series" --rows 16 --cols 16 --slices 3 > /dev/null 2>&1 || fail "mkseries"
timeout $((30 * SLOWDOWN)) storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/series/*.dcm ||
    fail "storescu failed afterwards"
await_instances 3
[ "$(db_instances)" -eq 3 ] || fail "the series was not stored"
stop_daemon || fail "exit code $?"
