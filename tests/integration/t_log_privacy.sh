#!/usr/bin/env bash
# No patient data in the log beyond UIDs, even when a sender puts it where
# a UID belongs: an instance whose SOP Instance UID holds a patient ID is
# refused, and the log names it by a placeholder, not by that text.
. "$(dirname "$0")/lib.sh"
start_daemon
"$MKSERIES" --out "$T/s" --rows 32 --cols 32 --slices 2 > /dev/null || fail "mkseries"
dcmodify -q -nb -m "(0008,0018)=PIDSECRET42.1" "$T/s/IMG0002.dcm" || fail "dcmodify"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm > "$T/storescu.log" 2>&1
[ "$(db_instances)" = 1 ] || fail "expected the valid instance only, found $(db_instances)"
wait_until 10 "the refusal logged" grep -q "refused" "$T/ldctd.log"
grep -q "PIDSECRET" "$T/ldctd.log" && fail "the log holds the text: $(grep PIDSECRET "$T/ldctd.log")"
grep -q "instance (not a valid UID, not logged) from STORESCU refused: 0xC000" "$T/ldctd.log" ||
    fail "no refusal line: $(grep refused "$T/ldctd.log")"
stop_daemon || fail "exit code $?"
