#!/usr/bin/env bash
# ldct as a user who may not touch the state says so (it said "no such
# file" and "database error"), and a member of ldctd's group reads the
# state while ldctd is stopped (it failed with "attempt to write a
# readonly database": SQLite's -shm file could not be created in the
# daemon's folder), with the same result as the daemon's own user.
. "$(dirname "$0")/lib.sh"
command -v setpriv > /dev/null || skip "setpriv not installed"
[ "$(id -u)" = 0 ] || skip "needs root to run ldct as other users"
"$MKSERIES" --out "$T/s" --rows 32 --cols 32 --slices 3 > /dev/null || fail "mkseries"
start_daemon
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm > "$T/storescu.log" 2>&1 ||
    fail "storescu: $(tail -n 3 "$T/storescu.log")"
stop_daemon || fail "ldctd did not stop cleanly"
# The state as the unit leaves it: the daemon's user and group, 0750/0640.
chmod 755 "$T"
chown -R 4200:4200 "$STATE"
[ ! -e "$STATE/ldct.db-wal" ] && [ ! -e "$STATE/ldct.db-shm" ] || fail "a stop left -wal or -shm"
as() { local u=$1; shift; setpriv --reuid "$u" --regid "$u" --clear-groups "$LDCT" --state-dir "$STATE" "$@"; }
member() { setpriv --reuid 4201 --regid 4201 --groups 4200 "$LDCT" --state-dir "$STATE" "$@"; }
for c in status series jobs; do
    member $c > "$T/member.out" 2> "$T/err" || fail "ldct $c as a group member: $(cat "$T/err")"
    as 4200 $c > "$T/owner.out" || fail "ldct $c as the owner"
    cmp -s "$T/member.out" "$T/owner.out" || fail "ldct $c: the member read $(cat "$T/member.out")"
    as 4300 $c > /dev/null 2> "$T/err" && fail "ldct $c as another user succeeded"
    grep -q "cannot read $STATE/ldct.db: permission denied" "$T/err" ||
        fail "ldct $c as another user: $(cat "$T/err")"
done
member status | grep -q "^series: *1 " || fail "the member does not see the series: $(member status)"
member retry 1 > /dev/null 2> "$T/err" && fail "ldct retry as a group member succeeded"
grep -q "cannot change $STATE/ldct.db: permission denied (.*sudo -u ldct" "$T/err" ||
    fail "ldct retry as a group member: $(cat "$T/err")"
[ "$(wc -l < "$T/err")" = 1 ] || fail "more than one line: $(cat "$T/err")"
