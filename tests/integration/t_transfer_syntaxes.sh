#!/usr/bin/env bash
# Instances in every supported transfer syntax are accepted and stored as
# received (same transfer syntax, same dataset).
. "$(dirname "$0")/lib.sh"
start_daemon
declare -A uid=([implicit]=1.2.840.10008.1.2 [explicit]=1.2.840.10008.1.2.1
    [big]=1.2.840.10008.1.2.2 [deflate]=1.2.840.10008.1.2.1.99
    [jpegll]=1.2.840.10008.1.2.4.70 [jpegls]=1.2.840.10008.1.2.4.80 [rle]=1.2.840.10008.1.2.5)
# storescu proposes a compressed transfer syntax only when told to.
declare -A flag=([implicit]=-xi [explicit]=-xe [big]=-xb [deflate]=-xd [jpegll]=-xs
    [jpegls]=-xt [rle]=-xr)
for ts in implicit explicit big deflate jpegll jpegls rle; do
    "$MKSERIES" --out "$T/$ts" --rows 64 --cols 64 --slices 2 --ts "$ts" || fail "mkseries $ts"
    storescu -R "${flag[$ts]}" -aec LDCTNODE 127.0.0.1 "$PORT" "$T/$ts"/*.dcm || fail "storescu $ts"
    assert_stored_identical "$T/$ts"/*.dcm
    got=$(sqlite3 "$STATE/ldct.db" "SELECT DISTINCT transfer_syntax_uid FROM instances
        JOIN series ON series.id = series_id WHERE instances.path LIKE '%' ||
        (SELECT series_uid FROM series ORDER BY last_received_ms DESC LIMIT 1) || '%'")
    [ "$got" = "${uid[$ts]}" ] || fail "$ts stored as '$got'"
    note "$ts ok"
done
stop_daemon || fail "exit code $?"
