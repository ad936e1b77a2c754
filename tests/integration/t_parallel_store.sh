#!/usr/bin/env bash
# Four storescu processes at once send two series of 64 slices each; every
# instance is in the database and the spool, with the dataset that was sent.
. "$(dirname "$0")/lib.sh"
start_daemon
for s in 1 2; do
    "$MKSERIES" --out "$T/s$s" --rows 128 --cols 128 --slices 64 --seed $s --noise 20 \
        || fail "mkseries failed"
done
pids=()
for s in 1 2; do
    files=("$T"/s$s/*.dcm)
    storescu -aec LDCTNODE -aet CT1 127.0.0.1 "$PORT" "${files[@]:0:32}" & pids+=($!)
    storescu -aec LDCTNODE -aet CT2 127.0.0.1 "$PORT" "${files[@]:32}" & pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || fail "a storescu failed"; done
[ "$(db_instances)" = 128 ] || fail "expected 128 instances, found $(db_instances)"
[ "$(find "$STATE/spool" -name '*.dcm' | wc -l)" = 128 ] || fail "spool does not hold 128 files"
assert_stored_identical "$T"/s1/*.dcm "$T"/s2/*.dcm
json=$("$LDCT" --state-dir "$STATE" series --json)
[ "$(echo "$json" | grep -o '"instances":64' | wc -l)" = 2 ] || fail "ldct series: $json"
[ "$("$LDCT" --state-dir "$STATE" series --limit 1 | wc -l)" = 2 ] || fail "series --limit 1: not a header and one line"
"$LDCT" --state-dir "$STATE" status | grep -q "instances:   128" || fail "ldct status"
stop_daemon || fail "exit code $?"
