#!/usr/bin/env bash
# Every ldct command answers --help (and -h) with its usage on stdout and
# exit 0, without touching the state directory; `ldct bench` names all five
# algorithms; a bad --limit is a usage error (exit 2), not "all jobs".
# (Before: `ldct --help` said "unknown option '--help'" and exited 2,
# `ldct bench --help` said "unknown or missing algorithm" and listed only
# nlm2d|nlm3d, `ldct tune fdk --help` said "bad value", and
# `ldct jobs --limit abc` listed every job.)
. "$(dirname "$0")/lib.sh"
cd "$T" || fail "cd"
helps() { # EXPECTED-FIRST-WORDS ARGS...
    local want=$1
    shift
    "$LDCT" "$@" > "$T/o" 2> "$T/e"
    local rc=$?
    [ $rc = 0 ] || fail "ldct $*: exit $rc ($(head -n 1 "$T/e"))"
    grep -qF "$want" "$T/o" || fail "ldct $*: no '$want' on stdout: $(head -n 2 "$T/o")"
    [ ! -s "$T/e" ] || fail "ldct $*: stderr: $(head -n 1 "$T/e")"
}
helps "usage: ldct [--config FILE" --help
helps "usage: ldct [--config FILE" -h
helps "usage: ldct [--config FILE" status --help
helps "usage: ldct [--config FILE" jobs --help
helps "usage: ldct [--config FILE" check-config --help
helps "usage: ldct filter" filter --help
helps "usage: ldct phantom" phantom --help
helps "usage: ldct quality" quality --help
helps "nlm2d|nlm3d|anlm|adaptive4d|fdk" bench --help
helps "usage: bench nlm2d|nlm3d" bench nlm3d --help
helps "usage: bench anlm" bench anlm --help
helps "usage: bench adaptive4d" bench adaptive4d -h
helps "usage: bench fdk" bench fdk --help
helps "usage: tune fdk" tune fdk --help
helps "usage: tune fdk" --state-dir "$T/st" tune --help
[ ! -e "$T/var" ] && [ ! -e "$T/st" ] || fail "--help created a state directory"
"$LDCT" bench > /dev/null 2> "$T/e"; rc=$?
[ $rc = 2 ] || fail "bench without an algorithm exits $rc, not 2"
grep -qF "nlm2d|nlm3d|anlm|adaptive4d|fdk" "$T/e" || fail "bench: algorithms not listed"
"$LDCT" --state-dir "$T" jobs --limit abc > /dev/null 2> "$T/e"; rc=$?
[ $rc = 2 ] || fail "--limit abc exits $rc, not 2"
grep -q "limit abc" "$T/e" || fail "--limit abc: no message: $(cat "$T/e")"
# An option given last without its value says so (it was "unknown option"),
# in two lines, not the whole usage; --version is version.
for args in "jobs --limit" "retry 2 --to" "status --config" "--state-dir"; do
    "$LDCT" $args > /dev/null 2> "$T/e"; rc=$?
    [ $rc = 2 ] || fail "ldct $args exits $rc, not 2"
    [ "$(head -n 1 "$T/e")" = "ldct: ${args##* } needs a value" ] && [ "$(wc -l < "$T/e")" = 2 ] ||
        fail "ldct $args: $(cat "$T/e")"
done
"$LDCT" --state-dir "$T" jobs --limit 2000000 > /dev/null 2> "$T/e"
grep -q "expected a count from 0 (all) to 1000000" "$T/e" || fail "--limit's range: $(cat "$T/e")"
[ "$("$LDCT" --version)" = "$("$LDCT" version)" ] || fail "ldct --version: $("$LDCT" --version 2>&1)"
"$LDCT" --version --json | python3 -c 'import json,sys; d=json.load(sys.stdin); assert d["version"] and d["database_schema"] > 0, d' ||
    fail "ldct --version --json: $("$LDCT" --version --json 2>&1)"
# Global options before a command with its own: --json moves after its name
# where it has one, anything else is refused with the reason (it was
# "unknown command 'phantom'").
"$LDCT" --json phantom --out "$T/ph" > /dev/null 2> "$T/e"; rc=$?
[ $rc = 2 ] && grep -q "^ldct: --json is not an option of phantom; its options follow its name" "$T/e" ||
    fail "--json phantom: $rc $(cat "$T/e")"
[ ! -e "$T/ph" ] || fail "--json phantom wrote a phantom"
"$LDCT" --json quality --help | grep -q "usage: ldct quality" || fail "--json quality --help"
# retry --to: a configuration that cannot be used is a failure (1), a call
# without --config or to a destination it lacks a usage error (2), as the
# README says; so is a job number past the largest.
printf '[node]\nport = x\n' > "$T/bad.conf"
printf '[destination pacs]\nhost = 127.0.0.1\nport = 104\nae_title = PACS\n' > "$T/ok.conf"
exits() { # STATUS ARGS...: ldct ARGS exits STATUS
    local want=$1 rc=0
    shift
    "$LDCT" "$@" > /dev/null 2> "$T/e" || rc=$?
    [ $rc = "$want" ] || fail "ldct $* exits $rc, not $want: $(cat "$T/e")"
}
exits 1 --config "$T/bad.conf" retry 3 --to pacs
exits 2 --state-dir "$T" retry 3 --to pacs
exits 2 --config "$T/ok.conf" retry 3 --to elsewhere
exits 2 --state-dir "$T" retry 99999999999999999999
exit 0
