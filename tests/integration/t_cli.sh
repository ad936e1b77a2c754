#!/usr/bin/env bash
# ldct check-config explains every error with file:line and exits non-zero
# (--json: the same lines in a JSON object), suggests the section a
# misspelt header meant, warns about a destination no rule sends to;
# the example configuration is valid (its rules listed in match order); ldct reads a database read-only; ldctd
# with a missing or bad configuration exits 1 with the reason.
. "$(dirname "$0")/lib.sh"
"$LDCT" check-config "$ROOT/config/ldctd.conf.example" > "$T/out" || fail "example config invalid: $(cat "$T/out")"
# The rules in match order, with where their results go.
[ "$(grep "^rule " "$T/out" | sed 's/  */ /g')" = "rule projections priority 20, process (fdk) -> results folder
rule cardiac priority 15, process (adaptive4d) -> results folder
rule lowdose-chest priority 10, process (auto) -> pacs" ] || fail "check-config's rules: $(cat "$T/out")"
printf '[node]\nport = 70000\nfoo = bar\n[destination x]\nport = 104\n' > "$T/bad.conf"
"$LDCT" check-config "$T/bad.conf" 2> "$T/err" && fail "bad config accepted"
grep -q "bad.conf:2: port = 70000: out of range" "$T/err" || fail "line 2: $(cat "$T/err")"
grep -q "bad.conf:3: unknown option 'foo'" "$T/err" || fail "line 3: $(cat "$T/err")"
grep -q "bad.conf:4: destination 'x' needs host" "$T/err" || fail "line 4: $(cat "$T/err")"
"$LDCT" check-config "$T/bad.conf" --json > "$T/bad.json" 2> "$T/err"; rc=$?
[ $rc = 1 ] && [ ! -s "$T/err" ] || fail "check-config --json of a bad file: $rc $(cat "$T/err")"
python3 - "$T/bad.json" <<'PY' || fail "check-config --json: $(cat "$T/bad.json")"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["ok"] is False and d["file"].endswith("bad.conf"), d
assert any("bad.conf:2: port = 70000: out of range" in e for e in d["errors"]), d
assert any("bad.conf:3: unknown option 'foo'" in e for e in d["errors"]), d
assert any("bad.conf:4: destination 'x' needs host" in e for e in d["errors"]), d
PY
"$LDCT" check-config "$ROOT/config/ldctd.conf.example" --json > "$T/ok.json" ||
    fail "example config --json: $(cat "$T/ok.json")"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["ok"] and not d["errors"] and d["rules"] == 3, d' \
    "$T/ok.json" || fail "example config --json: $(cat "$T/ok.json")"
printf '[destinaton pacs]\n[nod]\n[node x]\n' > "$T/sect.conf"
"$LDCT" check-config "$T/sect.conf" 2> "$T/err" && fail "misspelt sections accepted"
grep -qF "sect.conf:1: unknown section [destinaton pacs] (did you mean [destination pacs]?)" "$T/err" &&
    grep -qF "sect.conf:2: unknown section [nod] (did you mean [node]?)" "$T/err" &&
    grep -qF "sect.conf:3: [node] takes no name (found [node x])" "$T/err" ||
    fail "section suggestions: $(cat "$T/err")"
printf '[destination pacs]\nhost = h\nport = 104\nae_title = P\n[destination spare]\nhost = h\nport = 105\nae_title = S\n[rule r]\ndestinations = pacs\n' > "$T/spare.conf"
"$LDCT" check-config "$T/spare.conf" > /dev/null 2> "$T/err" || fail "a spare destination is an error: $(cat "$T/err")"
grep -qF "spare.conf:5: warning: no rule sends to destination 'spare'" "$T/err" || fail "no warning: $(cat "$T/err")"
if grep -q "'pacs'" "$T/err"; then fail "warned about a used destination: $(cat "$T/err")"; fi
"$LDCT" check-config "$T/spare.conf" --json | grep -qF "spare.conf:5: warning: no rule sends to destination 'spare'" ||
    fail "no warning in JSON"
printf '[rule r]\nalgorithm = nlm3d\npatch_weighting = box\n' > "$T/pw.conf"
"$LDCT" check-config "$T/pw.conf" 2> "$T/err" && fail "patch_weighting = box accepted"
grep -q "pw.conf:3: patch_weighting = box: expected uniform or gaussian" "$T/err" ||
    fail "patch_weighting: $(cat "$T/err")"
printf '[rule r]\nalgorithm = nlm2d\ndistance_cutoff = -1\ndistance_cutoff = nan\n' > "$T/dc.conf"
"$LDCT" check-config "$T/dc.conf" 2> "$T/err" && fail "distance_cutoff = -1 accepted"
grep -q "dc.conf:3: distance_cutoff = -1: out of range (0 to 80)" "$T/err" &&
    grep -q "dc.conf:4: distance_cutoff = nan: out of range" "$T/err" ||
    fail "distance_cutoff: $(cat "$T/err")"
"$LDCT" --state-dir "$T/nothing" status 2> "$T/err" && fail "status without a database succeeded"
grep -q "cannot open $T/nothing/ldct.db: no such file (has ldctd run with state directory $T/nothing?" "$T/err" ||
    fail "no clear error: $(cat "$T/err")"
[ "$(wc -l < "$T/err")" = 1 ] || fail "the missing database reported more than once: $(cat "$T/err")"
# Every subcommand that opens the database says the same, retry (read-write)
# included, and creates no database where ldctd never ran.
mkdir "$T/empty"
for c in status series jobs "retry 1"; do
    for dir in nothing empty; do
        "$LDCT" --state-dir "$T/$dir" $c > /dev/null 2> "$T/err" && fail "ldct $c without a database succeeded"
        grep -q "cannot open $T/$dir/ldct.db: no such file (has ldctd run with state directory $T/$dir?" \
            "$T/err" && [ "$(wc -l < "$T/err")" = 1 ] || fail "ldct $c in $dir: $(cat "$T/err")"
    done
done
[ -z "$(ls "$T/empty")" ] || fail "ldct retry created $(ls "$T/empty") in a state directory ldctd never used"
(cd "$T/empty" && "$LDCT" retry 1) 2> "$T/err" && fail "ldct retry 1 without --config succeeded"
grep -q "^ldct: cannot open ./var/ldct/ldct.db: no such file (has ldctd run" "$T/err" || fail "retry: $(cat "$T/err")"
"$LDCT" frobnicate 2>/dev/null; [ $? = 2 ] || fail "unknown command must exit 2"
"$LDCTD" --bogus 2>/dev/null; [ $? = 2 ] || fail "ldctd: unknown argument must exit 2"
"$LDCTD" --config "$T/missing.conf" 2> "$T/err"; rc=$?
[ $rc = 1 ] || fail "ldctd with a missing config exits $rc, not 1"
grep -q "cannot read $T/missing.conf" "$T/err" || fail "no clear error: $(cat "$T/err")"
"$LDCTD" --config "$T/bad.conf" 2> "$T/err"; [ $? = 1 ] || fail "ldctd with a bad config must exit 1"
tail -n 1 "$T/err" | grep -q "ldctd not started" || fail "no closing line: $(tail -n 2 "$T/err")"
# ldct status: the series broken down by every state, adding up to the total,
# in the text and in the JSON; extra arguments are a usage error (exit 2).
"$MKSERIES" --out "$T/s" --rows 8 --cols 8 --slices 1 > /dev/null || fail "mkseries"
write_config "stable_seconds = 1" "devices = cpu" "[rule none]" "match.modality = MR" "action = process"
start_daemon
storescu -aec LDCTNODE 127.0.0.1 "$PORT" "$T"/s/*.dcm || fail "storescu"
unmatched() { [ "$(sql "SELECT state FROM series")" = unmatched ]; }
wait_until 30 "series unmatched" unmatched
"$LDCT" --config "$T/ldctd.conf" status > "$T/status.txt" || fail "ldct status"
grep -q "^series: *1 (0 receiving, 0 stable, 0 queued, 0 done, 0 failed, 1 unmatched, 0 discarded, 0 removed)" \
    "$T/status.txt" || fail "status text: $(cat "$T/status.txt")"
"$LDCT" --config "$T/ldctd.conf" status --json | python3 -c '
import json, sys
s = json.load(sys.stdin)
assert sum(s["series_states"].values()) == s["series"] == 1, s
assert s["series_states"]["unmatched"] == 1 and s["receiving"] == 0, s
assert s["ldctd"] == {"state": "running", "pid": int(sys.argv[1])}, s' "$DAEMON_PID" ||
    fail "status JSON"
for c in status series jobs version; do
    "$LDCT" --config "$T/ldctd.conf" $c extra-word > /dev/null 2> "$T/err"; rc=$?
    [ $rc = 2 ] || fail "ldct $c extra-word exits $rc, not 2"
    grep -q "unexpected argument 'extra-word'" "$T/err" || fail "ldct $c: $(cat "$T/err")"
done
"$LDCT" --config "$T/ldctd.conf" check-config "$T/ldctd.conf" extra > /dev/null 2>&1; rc=$?
[ $rc = 2 ] || fail "check-config with two files exits $rc"
stop_daemon || fail "exit code $?"
"$LDCT" --config "$T/ldctd.conf" status | grep -qx "ldctd: *not running (it stopped cleanly)" ||
    fail "status after a stop: $("$LDCT" --config "$T/ldctd.conf" status)"
