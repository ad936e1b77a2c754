#!/usr/bin/env bash
# ldct's read commands on a damaged database say why, exit 1 and print no
# result that looks like one: a file cut short or that is no database
# gives SQLite's reason (it was only "database error"), a table missing
# names the table, and `ldct jobs` does not say "no jobs" when it could
# not read them; a newer schema names both versions; a damaged start
# time of a job is shown as "-".
. "$(dirname "$0")/lib.sh"
write_config
start_daemon
stop_daemon || fail "ldctd did not stop cleanly"
cp "$STATE/ldct.db" "$T/good.db"
use() { rm -f "$STATE"/ldct.db*; cp "$T/good.db" "$STATE/ldct.db"; }
ldct_fails() { # COMMAND...: runs ldct, which must exit 1; its stderr in $T/err
    "$LDCT" --state-dir "$STATE" "$@" > "$T/out" 2> "$T/err"
    local rc=$?
    [ $rc = 1 ] || fail "ldct $* exited $rc on a damaged database: $(cat "$T/out" "$T/err")"
    grep -q "Sanitizer\|runtime error" "$T/err" && fail "ldct $*: $(cat "$T/err")"
    return 0
}
use
truncate -s 8192 "$STATE/ldct.db"
for c in status series jobs; do
    ldct_fails $c
    grep -q "database disk image is malformed" "$T/err" || fail "cut short, ldct $c: $(cat "$T/err")"
    grep -q "cannot open $STATE/ldct.db" "$T/err" || fail "ldct $c does not name the file: $(cat "$T/err")"
done
use
head -c 5000 /dev/urandom > "$STATE/ldct.db"
for c in status series jobs "retry 1"; do
    ldct_fails $c
    grep -q "file is not a database" "$T/err" || fail "not a database, ldct $c: $(cat "$T/err")"
done
use
sqlite3 "$STATE/ldct.db" "DROP TABLE jobs"
for c in status jobs; do
    ldct_fails $c
    grep -q "no such table: jobs" "$T/err" || fail "table missing, ldct $c: $(cat "$T/err")"
    grep -q "no jobs" "$T/out" && fail "ldct $c printed 'no jobs' without a jobs table"
done
use
sqlite3 "$STATE/ldct.db" "PRAGMA user_version = 99"
for c in status series jobs "retry 1"; do
    ldct_fails $c
    grep -q "schema version 99" "$T/err" || fail "newer schema, ldct $c: $(cat "$T/err")"
done
# A job whose start time is damaged (negative) has not run as far as
# anyone can tell: "ran -", not an overflowed difference (-9.2e15 s; UB).
use
sqlite3 "$STATE/ldct.db" "INSERT INTO series (study_uid, series_uid, first_received_ms,
    last_received_ms, stable_seconds) VALUES ('1.2', '1.2.3', 1, 1, 30);
    INSERT INTO jobs (series_id, rule, action, algorithm, created_ms, started_ms, finished_ms,
    state) VALUES (last_insert_rowid(), 'r', 'process', 'nlm3d', 1, -9223372036854775808,
    1700000000000, 'done')" || fail "sqlite3"
"$LDCT" --state-dir "$STATE" jobs > "$T/out" 2> "$T/err" || fail "ldct jobs: $(cat "$T/err")"
grep -q "Sanitizer\|runtime error" "$T/err" && fail "ldct jobs: $(cat "$T/err")"
grep -q "^job 1 .*, ran -$" "$T/out" || fail "a damaged start time: $(cat "$T/out")"
