#!/usr/bin/env bash
# A UID attribute holding two values ("1.2.3\4.5.6") is invalid (VM 1) and
# refused with 0xC000 naming it; it was acknowledged under its first value
# (the network fuzz review: the stored and routed original carried the
# two values). The valid instance beside it is stored.
. "$(dirname "$0")/lib.sh"
RAW="python3 $ROOT/tests/tools/rawscu.py"
"$MKSERIES" --out "$T/s" --rows 16 --cols 16 --slices 4 > /dev/null 2>&1 || fail "mkseries"
series=$(dcmdump -q +P 0020,000e "$T/s/IMG0002.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
study=$(dcmdump -q +P 0020,000d "$T/s/IMG0003.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
dcmodify -q -nb -m "(0020,000e)=$series\\1.2.3" "$T/s/IMG0002.dcm" || fail "dcmodify series"
dcmodify -q -nb -m "(0020,000d)=$study\\1.2.3" "$T/s/IMG0003.dcm" || fail "dcmodify study"
sop=$(sop_of "$T/s/IMG0004.dcm")
dcmodify -q -nb -m "(0008,0018)=$sop\\1.2.3" "$T/s/IMG0004.dcm" || fail "dcmodify sop"
dataset_of "$T/s/IMG0004.dcm" "$T/sop.raw" || fail "dcmconv"
start_daemon
for i in 1 2 3; do
    st=$($RAW 127.0.0.1 "$PORT" store "$T/s/IMG000$i.dcm") || fail "rawscu IMG000$i"
    want=0xC000
    [ "$i" = 1 ] && want=0x0000
    [ "$st" = "$want" ] || fail "IMG000$i got $st, expected $want"
done
# The request names the first value, as a sender reading the first would.
st=$($RAW 127.0.0.1 "$PORT" store "$T/sop.raw" --raw-sop "$sop") || fail "rawscu sop"
[ "$st" = 0xC000 ] || fail "two SOP Instance UIDs got $st, expected 0xC000"
for tag in 0020,000E 0020,000D 0008,0018; do
    grep -q "invalid ($tag)" "$T/ldctd.log" || fail "no 'invalid ($tag)' in the log"
done
[ "$(db_instances)" = 1 ] || fail "$(db_instances) instances recorded, expected 1"
assert_stored_identical "$T/s/IMG0001.dcm"
stop_daemon || fail "exit code $?"
