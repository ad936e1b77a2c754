# Shared helpers for the integration tests (sourced). Each test runs the
# real daemon on a free loopback port in its own temporary state directory
# and talks to it with DCMTK's command-line peers.
set -u
BUILD=${BUILD:-build}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
LDCTD="$ROOT/$BUILD/ldctd"
LDCT="$ROOT/$BUILD/ldct"
MKSERIES="$ROOT/$BUILD/tools/mkseries"
# How many times slower than a plain build the build under test runs:
# LDCT_TEST_SLOWDOWN, a whole number, default 1 (about 20 for a build
# with -fsanitize=address,undefined). wait_until and start_daemon wait
# that many times longer; a test whose work must fit within one of the
# daemon's own limits (the shutdown grace) shrinks the work instead. At
# 1 every wait and every size is what the tests state.
SLOWDOWN=${LDCT_TEST_SLOWDOWN:-1}
# The head of a log line in ldctd.log (a file: date, time, UTC offset), then
# the level word: grep -E "$LOG_HEAD warning: ...".
LOG_HEAD="^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3} [+-][0-9]{4}"
[[ $SLOWDOWN =~ ^[1-9][0-9]{0,2}$ ]] || {
    echo "FAIL: LDCT_TEST_SLOWDOWN must be a whole number from 1 to 999" >&2
    exit 2
}
T=$(mktemp -d /tmp/ldct-it-XXXXXX)
DAEMON_PID=
export TCP_NODELAY=1

fail() { echo "FAIL: $*" >&2; [ -f "$T/ldctd.log" ] && tail -n 20 "$T/ldctd.log" >&2; exit 1; }
skip() { echo "SKIP: $*"; exit 77; }
note() { echo "  $*"; }

cleanup() {
    [ -n "$DAEMON_PID" ] && kill -9 "$DAEMON_PID" 2>/dev/null
    # Peers a test left running in the background (storescp, listeners).
    local j
    for j in $(jobs -p); do kill "$j" 2>/dev/null; done
    wait 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

# A free TCP port on loopback, below Linux's ephemeral range (32768 and
# up): a port there can be the local end of another program's connection,
# which the connect probe does not see, and the bind then fails (t_cli
# once got "Address already in use" on 49386).
free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$((20000 + RANDOM % 12700))
        (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo "$p"; return; }
    done
    fail "no free port"
}

PORT=$(free_port)
STATE="$T/state"

# tls_ca DIR NAME: a self-signed CA, DIR/NAME.crt and .key, valid 2 days.
tls_ca() {
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$1/$2.key" -out "$1/$2.crt" -days 2 \
        -subj "/CN=ldct test $2" 2> /dev/null || fail "openssl CA $2"
}
# tls_cert DIR NAME CA [BITS [REQ_ARGS...]]: DIR/NAME.crt (CN=NAME, BITS-bit
# RSA, extensions from REQ_ARGS kept) and .key, signed by CA, valid 2 days.
tls_cert() {
    local d=$1 n=$2 ca=$3 bits=${4:-2048}
    shift $(($# < 4 ? $# : 4))
    openssl req -newkey "rsa:$bits" -nodes -keyout "$d/$n.key" -out "$d/$n.csr" -subj "/CN=$n" \
        "$@" 2> /dev/null &&
        openssl x509 -req -in "$d/$n.csr" -CA "$d/$ca.crt" -CAkey "$d/$ca.key" -CAcreateserial \
            -copy_extensions copy -out "$d/$n.crt" -days 2 2> /dev/null || fail "openssl $n"
}

# Writes $T/ldctd.conf: a [node] section on $PORT with extra lines from "$@".
write_config() {
    {
        echo "[node]"
        echo "port = $PORT"
        echo "state_dir = $STATE"
        echo "min_free_mb = 0"
        echo "log_level = debug"
        for line in "$@"; do echo "$line"; done
    } > "$T/ldctd.conf"
}

# Starts the daemon on $T/ldctd.conf and waits until it answers C-ECHO.
start_daemon() {
    [ -f "$T/ldctd.conf" ] || write_config
    local from=$(($(cat "$T/ldctd.log" 2>/dev/null | wc -l) + 1))
    "$LDCTD" --config "$T/ldctd.conf" >> "$T/ldctd.log" 2>&1 &
    DAEMON_PID=$!
    for _ in $(seq 1 $((100 * SLOWDOWN))); do
        tail -n +"$from" "$T/ldctd.log" 2>/dev/null | grep -q "ldctd ready" && return 0
        kill -0 "$DAEMON_PID" 2>/dev/null || fail "ldctd exited during start"
        sleep 0.1
    done
    fail "ldctd did not become ready"
}

# Stops the daemon with SIGTERM and returns its exit code.
stop_daemon() {
    kill -TERM "$DAEMON_PID"
    local rc=0
    wait "$DAEMON_PID" || rc=$?
    DAEMON_PID=
    return $rc
}

# Number of instance rows in the database.
db_instances() { sqlite3 "$STATE/ldct.db" "SELECT count(*) FROM instances"; }

# Waits (200 polls of INTERVAL s, default 0.02) until the database holds at
# least N instances, so a test can act in the middle of a transfer; goes on
# either way (the test checks what it needs).
await_instances() {
    local n=$1 interval=${2:-0.02}
    for _ in $(seq 1 200); do
        [ "$(db_instances 2>/dev/null || echo 0)" -ge "$n" ] && return 0
        sleep "$interval"
    done
}

# The dataset of a DICOM file without its meta header, for comparisons.
dataset_of() { dcmconv -q -F "$1" "$2"; }

# Fails unless the stored copy of every file in DIR is present and has the
# same dataset as the file that was sent.
assert_stored_identical() {
    local f sop stored
    for f in "$@"; do
        sop=$(dcmdump -q +P 0008,0018 "$f" | sed -E 's/.*\[([^]]*)\].*/\1/')
        stored=$(sqlite3 "$STATE/ldct.db" "SELECT path FROM instances WHERE sop_instance_uid='$sop'")
        [ -n "$stored" ] || fail "instance $sop of $f not in the database"
        [ -f "$stored" ] || fail "stored file $stored missing"
        dataset_of "$f" "$T/a.ds" && dataset_of "$stored" "$T/b.ds" || fail "dcmconv failed"
        cmp -s "$T/a.ds" "$T/b.ds" || fail "stored $stored differs from sent $f"
    done
}

# Runs "$@" every 0.2 s until it succeeds; fails with MSG after TIMEOUT s
# (times SLOWDOWN).
# Usage: wait_until TIMEOUT MSG CMD [ARGS...]
wait_until() {
    local timeout=$(($1 * SLOWDOWN)) msg=$2 i
    shift 2
    for i in $(seq 1 $((timeout * 5))); do
        "$@" > /dev/null 2>&1 && return 0
        kill -0 "${DAEMON_PID:-$$}" 2>/dev/null || fail "ldctd died while waiting: $msg"
        sleep 0.2
    done
    fail "timed out after ${timeout}s: $msg"
}

# SQL on the daemon's database (read-only use).
sql() { sqlite3 -cmd ".timeout 5000" "$STATE/ldct.db" "$1"; }

# State of job N ("" if absent) and its last error.
job_state() { sql "SELECT state FROM jobs WHERE id = $1"; }
job_error() { sql "SELECT last_error FROM jobs WHERE id = $1"; }
job_is() { [ "$(job_state "$1")" = "$2" ]; }

# Number of sends in state S (optionally of job N).
sends_in() { sql "SELECT count(*) FROM sends WHERE state = '$1'${2:+ AND job_id = $2}"; }
all_sends_done() { [ "$(sql "SELECT count(*) FROM sends WHERE state <> 'done'")" = 0 ] &&
    [ "$(sql "SELECT count(*) FROM sends")" -gt 0 ]; }

# SOP Instance UID of a DICOM file.
sop_of() { dcmdump -q +P 0008,0018 "$1" | sed -E 's/.*\[([^]]*)\].*/\1/'; }
