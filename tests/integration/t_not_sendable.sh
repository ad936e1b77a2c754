#!/usr/bin/env bash
# A send that only the destination's configuration could make succeed is
# dead after its first attempt, with a message that says what to change,
# instead of being retried for hours: a JPEG 2000 original to a PACS that
# takes uncompressed data only (this node has no JPEG 2000 decoder), and an
# SOP class the PACS does not support. `ldct retry` sends it again once the
# destination accepts it.
. "$(dirname "$0")/lib.sh"
# A PACS that takes CT Image Storage in uncompressed syntaxes only.
cat > "$T/ctonly.cfg" <<'CFG'
[[TransferSyntaxes]]
[Uncompressed]
TransferSyntax1 = LocalEndianExplicit
TransferSyntax2 = LittleEndianImplicit
[Any]
TransferSyntax1 = JPEG2000LosslessOnly
TransferSyntax2 = LocalEndianExplicit
TransferSyntax3 = LittleEndianImplicit
[[PresentationContexts]]
[CTOnly]
PresentationContext1 = CTImageStorage\Uncompressed
[CTAny]
PresentationContext1 = CTImageStorage\Any
PresentationContext2 = MRImageStorage\Any
[[Profiles]]
[CTOnly]
PresentationContexts = CTOnly
[CTAny]
PresentationContexts = CTAny
CFG
PACS_PORT=$(free_port)
mkdir -p "$T/pacs"
storescp -aet PACS -xf "$T/ctonly.cfg" CTOnly -od "$T/pacs" "$PACS_PORT" > "$T/storescp.log" 2>&1 &
pacs=$!
write_config "stable_seconds = 1" "devices = cpu" \
    "[destination pacs]" "host = 127.0.0.1" "port = $PACS_PORT" "ae_title = PACS" \
    "timeout = 5" "retry_initial_seconds = 1" "retry_max_attempts = 50" \
    "[rule r]" "action = route" "destinations = pacs"
start_daemon
# A JPEG 2000 series: JPEG Lossless files relabelled (the same UID length);
# the fragments are stored and sent as received, never decoded here.
"$MKSERIES" --out "$T/j2k" --rows 32 --cols 32 --slices 3 --noise 20 --ts jpegll \
    --uid-root 1.2.826.0.1.3680043.10.543.71 > /dev/null || fail "mkseries j2k"
perl -0777 -pi -e 's/1\.2\.840\.10008\.1\.2\.4\.70(?![0-9.])/1.2.840.10008.1.2.4.90/g' "$T"/j2k/*.dcm
dcmdump -q +P 0002,0010 "$T/j2k/$(ls "$T/j2k" | head -1)" | grep -q JPEG2000 || fail "relabelling"
# An MR series (SOP class changed; routed as received).
"$MKSERIES" --out "$T/mr" --rows 32 --cols 32 --slices 2 --noise 20 \
    --uid-root 1.2.826.0.1.3680043.10.543.72 > /dev/null || fail "mkseries mr"
dcmodify -q -nb -m "(0008,0016)=1.2.840.10008.5.1.4.1.1.4" \
    -m "(0008,0060)=MR" "$T"/mr/*.dcm || fail "dcmodify mr"
storescu -xv -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/j2k/*.dcm || fail "storescu j2k"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/mr/*.dcm || fail "storescu mr"
dead2() { [ "$(sql "SELECT count(*) FROM sends WHERE state = 'dead'")" = 2 ]; }
wait_until 30 "both sends dead" dead2
[ "$(sql "SELECT group_concat(attempts) FROM sends")" = "1,1" ] ||
    fail "retried although no retry can help: attempts $(sql "SELECT group_concat(attempts) FROM sends")"
err_of() { sql "SELECT s.last_error FROM sends s JOIN jobs j ON j.id = s.job_id
                JOIN series r ON r.id = j.series_id WHERE r.series_uid LIKE '$1%'"; }
err_of 1.2.826.0.1.3680043.10.543.71 | grep -q "cannot convert from JPEG 2000.*cannot decode it.*not retried: once \[destination pacs\] accepts it.*ldct retry [0-9]" ||
    fail "JPEG 2000 error: $(err_of 1.2.826.0.1.3680043.10.543.71)"
err_of 1.2.826.0.1.3680043.10.543.72 | grep -q "SOP class 1.2.840.10008.5.1.4.1.1.4 not accepted.*not retried" ||
    fail "MR error: $(err_of 1.2.826.0.1.3680043.10.543.72)"
grep -Eq "$LOG_HEAD error: send [0-9]* to pacs is dead after 1 attempt\(s\): 3 of 3 file\(s\) not stored" "$T/ldctd.log" ||
    fail "no error line for the dead send"
[ "$(ls "$T/pacs" | wc -l)" = 0 ] || fail "the PACS got files"
# The PACS is reconfigured to take both: ldct retry delivers.
kill "$pacs"; wait "$pacs" 2>/dev/null
storescp -aet PACS -xf "$T/ctonly.cfg" CTAny -od "$T/pacs" "$PACS_PORT" >> "$T/storescp.log" 2>&1 &
for j in $(sql "SELECT job_id FROM sends"); do
    "$LDCT" --config "$T/ldctd.conf" retry "$j" > /dev/null || fail "ldct retry $j"
done
wait_until 30 "delivery after the PACS accepts them" all_sends_done
[ "$(ls "$T/pacs" | wc -l)" = 5 ] || fail "the PACS has $(ls "$T/pacs" | wc -l) files"
stop_daemon || fail "exit code $?"
