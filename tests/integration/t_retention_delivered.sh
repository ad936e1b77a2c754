#!/usr/bin/env bash
# Retention of processed series: once a series' derived instances (and,
# with action both, its originals) are delivered to every destination, its
# spool files and outbox files are removed retention_hours later (0 here:
# at the next retention check), with a log line and the study folder that
# it leaves empty (spool/ and outbox/ stay); a series whose send is
# still undelivered keeps every file until it is delivered.
. "$(dirname "$0")/lib.sh"
UP_PORT=$(free_port)
DOWN_PORT=$(free_port)
mkdir -p "$T/up" "$T/late"
storescp -aet UP -od "$T/up" "$UP_PORT" > "$T/storescp.log" 2>&1 &
write_config "stable_seconds = 1" "devices = cpu" "retention_hours = 0" \
    "[destination up]" "host = 127.0.0.1" "port = $UP_PORT" "ae_title = UP" \
    "[destination later]" "host = 127.0.0.1" "port = $DOWN_PORT" "ae_title = LATER" \
    "timeout = 2" "retry_initial_seconds = 1" "retry_multiplier = 1" "retry_max_seconds = 1" \
    "[rule wait]" "match.series_description = WAIT*" "action = process" \
    "algorithm = nlm2d" "destinations = later" "priority = 5" \
    "[rule r]" "action = both" "algorithm = nlm2d" "destinations = up"
start_daemon
"$MKSERIES" --out "$T/s" --rows 32 --cols 32 --slices 3 --noise 20 > /dev/null || fail "mkseries"
"$MKSERIES" --out "$T/w" --rows 32 --cols 32 --slices 2 --noise 20 --series-description "WAIT" \
    > /dev/null || fail "mkseries"
uid=$(dcmdump -q +P 0020,000e "$T/s/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
wuid=$(dcmdump -q +P 0020,000e "$T/w/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm "$T"/w/*.dcm || fail "storescu"
state() { sql "SELECT state FROM series WHERE series_uid = '$1'"; }
# The log line comes after the rows' commit and the files' removal.
gone() { grep -q "series $uid removed after 0 h (processed and delivered, 6 file(s))" "$T/ldctd.log"; }
wait_until 60 "delivered series removed, with its log line" gone
[ "$(state "$uid")" = removed ] || fail "series is $(state "$uid")"
[ "$(ls "$T/up" | wc -l)" = 6 ] || fail "storescp got $(ls "$T/up" | wc -l) files, not 3 + 3"
[ -z "$(find "$STATE/spool" -path "*$uid*" -name '*.dcm')" ] || fail "spool files left"
study=$(dcmdump -q +P 0020,000d "$T/s/IMG0001.dcm" | sed -E 's/.*\[([^]]*)\].*/\1/')
[ ! -d "$STATE/spool/$study" ] || fail "empty study folder left: $(find "$STATE/spool/$study")"
job=$(sql "SELECT id FROM jobs WHERE series_id = (SELECT id FROM series WHERE series_uid = '$uid')")
[ ! -d "$STATE/outbox/$job" ] || fail "outbox of job $job left: $(ls "$STATE/outbox/$job")"
# The series whose destination is down keeps its files.
[ "$(state "$wuid")" = done ] || fail "waiting series is $(state "$wuid")"
[ "$(find "$STATE/spool" -path "*$wuid*" -name '*.dcm' | wc -l)" = 2 ] || fail "spool files gone early"
wjob=$(sql "SELECT id FROM jobs WHERE series_id = (SELECT id FROM series WHERE series_uid = '$wuid')")
[ "$(ls "$STATE/outbox/$wjob" | wc -l)" = 2 ] || fail "outbox files gone before delivery"
storescp -aet LATER -od "$T/late" "$DOWN_PORT" > "$T/storescp2.log" 2>&1 &
wgone() { grep -q "series $wuid removed after 0 h (processed and delivered, 4 file(s))" "$T/ldctd.log"; }
wait_until 30 "series removed once delivered" wgone
[ "$(ls "$T/late" | wc -l)" = 2 ] || fail "late destination got $(ls "$T/late" | wc -l) files"
[ ! -d "$STATE/outbox/$wjob" ] || fail "outbox of job $wjob left"
left=$(find "$STATE/spool" -mindepth 1 -maxdepth 1 ! -name .tmp)
[ -z "$left" ] || fail "folders left in the spool: $left"
[ -d "$STATE/spool" ] && [ -d "$STATE/outbox" ] || fail "spool/ or outbox/ removed"
stop_daemon || fail "exit code $?"
