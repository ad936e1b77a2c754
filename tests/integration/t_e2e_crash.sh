#!/usr/bin/env bash
# kill -9 of the daemon while a job runs, and again while its send is in
# flight: after each restart the work is redone from the database and the
# PACS holds the derived series exactly once, with the UIDs fixed for the
# job (same series UID, same instance count).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/orthanc.sh"
start_orthanc
config_to() { # PORT TIMEOUT
    write_config "stable_seconds = 1" "devices = cpu" "shutdown_grace_seconds = 1" \
        "[destination pacs]" "host = 127.0.0.1" "port = $1" "ae_title = $ORTHANC_AET" \
        "timeout = $2" "retry_initial_seconds = 1" \
        "[rule r]" "action = process" "destinations = pacs" "search_radius = 7"
}
kill9() {
    kill -9 "$DAEMON_PID"
    wait "$DAEMON_PID" 2>/dev/null
    DAEMON_PID=
}
derived_series_in_pacs() { orthanc_series_uids | grep -vxF -f "$T/originals" | sort; }

# 1. kill -9 during processing.
config_to "$ORTHANC_DICOM_PORT" 10
start_daemon
# 256x256x48 at S 7: about 2 s on this machine's CPU (128x128 took 0.5 s
# on a fast day, and the job ended before the kill).
"$MKSERIES" --out "$T/a" --rows 256 --cols 256 --slices 48 --thickness 1 --noise 20 > /dev/null ||
    fail "mkseries"
dcmdump -q +P 0020,000e "$T/a/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/' > "$T/originals"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/a/*.dcm || fail "storescu"
wait_until 30 "job 1 running" job_is 1 running
sleep 0.5
job_is 1 running || fail "job 1 finished too fast to interrupt (make the series larger)"
"$LDCT" --config "$T/ldctd.conf" status | grep -qx "ldctd: *running (pid $DAEMON_PID)" ||
    fail "ldct status does not say ldctd runs: $("$LDCT" --config "$T/ldctd.conf" status)"
kill9
# ldct tells the job shown as running from one that runs (ldctd.lock).
out=$("$LDCT" --config "$T/ldctd.conf" status)
echo "$out" | grep -q "^ldctd: *not running: its last run was killed or crashed" ||
    fail "ldct status after kill -9: $out"
echo "$out" | grep -q "^cut off: *job 1 " || fail "the job is not shown as cut off: $out"
echo "$out" | grep "^cut off: *job 1 " | grep -q " for " && fail "a cut-off job's time runs on: $out"
ran() { "$LDCT" --config "$T/ldctd.conf" jobs | sed -nE 's/^job 1 .*, ran ([0-9.]+ s)$/\1/p'; }
ran1=$(ran)
sleep 1.2
[ -n "$ran1" ] && [ "$(ran)" = "$ran1" ] || fail "job 1's run time goes on after the kill: $ran1, then $(ran)"
"$LDCT" --config "$T/ldctd.conf" status --json | grep -q '"ldctd":{"state":"killed","pid":null}' ||
    fail "ldct status --json after kill -9: $("$LDCT" --config "$T/ldctd.conf" status --json)"
"$LDCT" --config "$T/ldctd.conf" jobs | grep -q "cut off: ldctd was killed or crashed" ||
    fail "ldct jobs does not mark job 1 cut off: $("$LDCT" --config "$T/ldctd.conf" jobs)"
"$LDCT" --config "$T/ldctd.conf" jobs --json | grep -q '"cut_off":true' || fail "jobs --json: no cut_off"
uid1=$(sql "SELECT derived_series_uid FROM jobs WHERE id = 1")
start_daemon
grep -q "recovered after an unclean stop: 1 job(s)" "$T/ldctd.log" || fail "no recovery logged"
wait_until 120 "job 1 redone and delivered" all_sends_done
[ "$(sql "SELECT attempts FROM jobs WHERE id = 1")" = 2 ] || fail "job 1 not run twice"
[ "$(sql "SELECT derived_series_uid FROM jobs WHERE id = 1")" = "$uid1" ] || fail "UID changed"
[ "$(derived_series_in_pacs)" = "$uid1" ] || fail "PACS has: $(derived_series_in_pacs)"
[ "$(orthanc_instance_count "$uid1")" = 48 ] || fail "derived count $(orthanc_instance_count "$uid1")"

# 2. kill -9 while the send is in flight: the PACS is hung (accepts TCP,
# never answers) so the send stays in 'sending'.
stop_daemon || fail "exit code $?"
HUNG_PORT=$(free_port)
python3 -c 'import socket, sys, time
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8); c = []
while True: c.append(s.accept()[0])' "$HUNG_PORT" &
hung=$!
config_to "$HUNG_PORT" 60
start_daemon
"$MKSERIES" --out "$T/b" --rows 64 --cols 64 --slices 10 --thickness 1 --noise 20 > /dev/null ||
    fail "mkseries"
dcmdump -q +P 0020,000e "$T/b/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/' >> "$T/originals"
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/b/*.dcm || fail "storescu"
sending() { [ "$(sends_in sending 2)" = 1 ]; }
wait_until 60 "send of job 2 in flight" sending
"$LDCT" --config "$T/ldctd.conf" series | grep -q "^$(tail -n 1 "$T/originals") .* sending 0/1 " ||
    fail "ldct series, send in flight: $("$LDCT" --config "$T/ldctd.conf" series)"
kill9
kill "$hung"
# No ldctd runs now: the send still marked 'sending' is shown as cut off.
cli() { "$LDCT" --config "$T/ldctd.conf" "$@"; }
cli series | grep -q "^$(tail -n 1 "$T/originals") .* cut off 0/1 " ||
    fail "ldct series after the kill: $(cli series)"
cli status | grep -q "^sends: .* 1 cut off," || fail "ldct status after the kill: $(cli status)"
cli jobs | grep -A1 "send .* sending to" | grep -q "cut off: ldctd was killed or crashed during" ||
    fail "ldct jobs after the kill: $(cli jobs)"
cli jobs --json | grep -q '"state":"sending",.*"cut_off":true' ||
    fail "ldct jobs --json after the kill: $(cli jobs --json)"
uid2=$(sql "SELECT derived_series_uid FROM jobs WHERE id = 2")
config_to "$ORTHANC_DICOM_PORT" 10
start_daemon
grep -q "0 job(s) and 1 send(s) queued again" "$T/ldctd.log" || fail "send not recovered"
wait_until 60 "send of job 2 delivered after the restart" all_sends_done
[ "$(sql "SELECT attempts FROM jobs WHERE id = 2")" = 1 ] || fail "job 2 was redone"
[ "$(derived_series_in_pacs)" = "$(printf '%s\n' "$uid1" "$uid2" | sort)" ] ||
    fail "PACS has: $(derived_series_in_pacs)"
[ "$(orthanc_instance_count "$uid2")" = 10 ] || fail "derived count $(orthanc_instance_count "$uid2")"
stop_daemon || fail "exit code $?"
