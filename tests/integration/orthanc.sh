# Orthanc as a real PACS on loopback, for integration tests (sourced after
# lib.sh). The PACS gets its own free DICOM and HTTP ports, its storage and
# index under $T/orthanc, its log in $T/orthanc.log, and is killed when the
# test exits (before lib.sh's cleanup, which is kept). Only curl and python3
# (for JSON) are needed besides Orthanc itself; start_orthanc skips the test
# (exit 77) when one of them is missing.
#
#   . "$(dirname "$0")/lib.sh"; . "$(dirname "$0")/orthanc.sh"
#   start_orthanc
#   write_config "[destination pacs]" "host = 127.0.0.1" \
#       "port = $ORTHANC_DICOM_PORT" "ae_title = $ORTHANC_AET"
#
# Functions (query functions print to stdout; on a REST error they print a
# message on stderr and return 1, so use them as `x=$(f ...) || fail ...`):
#   start_orthanc             start and wait until the REST API and the DICOM
#                             port answer (about 0.3 s); sets
#                             ORTHANC_DICOM_PORT, ORTHANC_HTTP_PORT (free
#                             ports, picked again if one was taken before the
#                             first start), ORTHANC_AET=ORTHANC, ORTHANC_URL,
#                             ORTHANC_PID; fails with the log's tail if
#                             Orthanc exits or does not answer within
#                             ORTHANC_START_TIMEOUT (20) s
#   stop_orthanc [--kill]     SIGTERM and wait (about 3.5 s: Orthanc's HTTP and
#                             DICOM servers poll once a second or so), or with
#                             --kill SIGKILL (a PACS crash; instances whose
#                             C-STORE was answered are kept); the ports are
#                             closed when it returns
#   restart_orthanc           stop (when running) and start again: same
#                             ports, same storage
#   orthanc_running           true while the process lives
#   orthanc_rest PATH [CURL ARGS]   GET (or what the args say) $ORTHANC_URL$PATH
#   orthanc_series_uids       SeriesInstanceUIDs stored, one per line
#   orthanc_series_id UID     Orthanc's id of the series (return 1: unknown)
#   orthanc_instance_count UID    instances of the series (0 when unknown)
#   orthanc_instances_total   instances stored, all series together
#   orthanc_series_tag UID TAG    the value of TAG (a keyword such as
#                             ImageType, or gggg,eeee) in the series' first
#                             instance (lowest InstanceNumber), as Orthanc's
#                             simplified tags give it: multiple values joined
#                             by '\', sequences as JSON; return 1 if absent
#   orthanc_download_series UID DIR   every instance as DIR/1.dcm ... DIR/N.dcm
#                             in InstanceNumber order (the stored files:
#                             the datasets as sent)
#   wait_orthanc_instances UID N TIMEOUT_S   poll (every 0.1 s, through
#                             restarts) until the series has at least N
#                             instances; on timeout fail (exit 1) saying how
#                             many there are
#
# Notes on Orthanc 1.10: it stores an instance once per SOPInstanceUID: a
# second C-STORE of the same instance answers 0x0000 and changes nothing, so
# counts cannot reveal duplicate sends; to see them, set
# ORTHANC_LOG_FLAGS=--verbose before start_orthanc and count the lines
# "Already stored" in $T/orthanc.log. It accepts any calling AE title and
# any called one (DicomCheckCalledAet false), every transfer syntax
# 1.2.840.10008.1.* and unknown SOP classes. A clean stop takes about 3.5 s.

ORTHANC_BIN=${ORTHANC_BIN:-$(command -v Orthanc || echo /usr/sbin/Orthanc)}
ORTHANC_AET=ORTHANC
ORTHANC_START_TIMEOUT=${ORTHANC_START_TIMEOUT:-20}
ORTHANC_LOG_FLAGS=${ORTHANC_LOG_FLAGS:-} # e.g. "--verbose --trace-dicom"
# Free ports are picked by the first start_orthanc; a test may set both
# ports itself after sourcing this file and before start_orthanc.
ORTHANC_DICOM_PORT=
ORTHANC_HTTP_PORT=
ORTHANC_URL=
ORTHANC_PID=
ORTHANC__OWN_PORTS=

orthanc__fail() {
    if [ -f "$T/orthanc.log" ]; then
        echo "--- last lines of $T/orthanc.log:" >&2
        tail -n 20 "$T/orthanc.log" >&2
    fi
    fail "$@"
}

# Kills Orthanc at exit, then runs the EXIT trap that was set before (lib.sh's
# cleanup, which waits for every child and removes $T).
orthanc__on_exit() {
    if [ -n "$ORTHANC_PID" ]; then
        { kill -9 "$ORTHANC_PID" && wait "$ORTHANC_PID"; } 2> /dev/null
    fi
    eval "${ORTHANC__PREV_EXIT:-}"
}

orthanc__chain_exit_trap() {
    # `trap -p EXIT` prints: trap -- 'COMMAND' EXIT (quoted for reuse).
    local -a prev
    eval "prev=($(trap -p EXIT))"
    [ "${prev[2]:-}" = orthanc__on_exit ] && return 0 # sourced twice
    ORTHANC__PREV_EXIT=${prev[2]:-}
    trap orthanc__on_exit EXIT
}
orthanc__chain_exit_trap

orthanc_rest() {
    local path=$1
    shift
    curl -sS -f --max-time 30 "$@" "$ORTHANC_URL$path" || {
        echo "orthanc: REST call $path failed" >&2
        return 1
    }
}

orthanc_running() { [ -n "$ORTHANC_PID" ] && kill -0 "$ORTHANC_PID" 2>/dev/null; }

orthanc__write_config() {
    mkdir -p "$T/orthanc/storage" || fail "cannot create $T/orthanc"
    cat > "$T/orthanc/orthanc.json" << EOF
{
  "Name" : "ldct-it",
  "StorageDirectory" : "$T/orthanc/storage",
  "IndexDirectory" : "$T/orthanc/storage",
  "TemporaryDirectory" : "$T/orthanc",
  "StorageCompression" : false,
  "Plugins" : [],
  "LuaScripts" : [],
  "ConcurrentJobs" : 1,
  "SaveJobs" : false,
  "StableAge" : 1,
  "HttpServerEnabled" : true,
  "HttpPort" : $ORTHANC_HTTP_PORT,
  "HttpThreadsCount" : 8,
  "RemoteAccessAllowed" : false,
  "AuthenticationEnabled" : false,
  "WebDavEnabled" : false,
  "OrthancExplorerEnabled" : false,
  "DicomServerEnabled" : true,
  "DicomAet" : "$ORTHANC_AET",
  "DicomPort" : $ORTHANC_DICOM_PORT,
  "DicomThreadsCount" : 4,
  "DicomCheckCalledAet" : false,
  "DicomCheckModalityHost" : false,
  "DicomAlwaysAllowEcho" : true,
  "DicomAlwaysAllowStore" : true,
  "UnknownSopClassAccepted" : true,
  "AcceptedTransferSyntaxes" : [ "1.2.840.10008.1.*" ],
  "DicomModalities" : {},
  "OrthancPeers" : {}
}
EOF
}

orthanc__pick_ports() {
    local tries=0
    ORTHANC_DICOM_PORT=$(free_port)
    ORTHANC_HTTP_PORT=$(free_port)
    while [ "$ORTHANC_HTTP_PORT" = "$ORTHANC_DICOM_PORT" ] ||
        [ "$ORTHANC_HTTP_PORT" = "${PORT:-}" ] || [ "$ORTHANC_DICOM_PORT" = "${PORT:-}" ]; do
        tries=$((tries + 1))
        [ $tries -lt 20 ] || fail "no free ports for Orthanc"
        ORTHANC_DICOM_PORT=$(free_port)
        ORTHANC_HTTP_PORT=$(free_port)
    done
    ORTHANC__OWN_PORTS=1
}

# Runs Orthanc and waits until it answers: 0 ready, 1 it exited (fails on
# the timeout).
orthanc__launch() {
    ORTHANC_URL="http://127.0.0.1:$ORTHANC_HTTP_PORT"
    echo "=== start $(date +%T.%N)" >> "$T/orthanc.log"
    # shellcheck disable=SC2086 # the log flags are words
    "$ORTHANC_BIN" $ORTHANC_LOG_FLAGS "$T/orthanc/orthanc.json" >> "$T/orthanc.log" 2>&1 &
    ORTHANC_PID=$!
    local deadline=$((SECONDS + ORTHANC_START_TIMEOUT)) sys
    while :; do
        if ! kill -0 "$ORTHANC_PID" 2> /dev/null; then
            wait "$ORTHANC_PID" 2> /dev/null
            ORTHANC_PID=
            return 1
        fi
        # Our own process answering on our HTTP port, with our DICOM port
        # open (it opens the DICOM port first, but check both).
        sys=$(curl -s -f --max-time 2 "$ORTHANC_URL/system" 2> /dev/null) &&
            printf '%s' "$sys" | grep -Eq "\"DicomPort\" *: *$ORTHANC_DICOM_PORT\b" &&
            (exec 3<> "/dev/tcp/127.0.0.1/$ORTHANC_DICOM_PORT") 2> /dev/null && return 0
        [ $SECONDS -lt $deadline ] ||
            orthanc__fail "Orthanc did not answer on $ORTHANC_URL within ${ORTHANC_START_TIMEOUT}s"
        sleep 0.1
    done
}

start_orthanc() {
    orthanc_running && fail "start_orthanc: Orthanc is already running"
    [ -x "$ORTHANC_BIN" ] || skip "Orthanc not installed ($ORTHANC_BIN)"
    command -v curl > /dev/null || skip "curl not installed"
    command -v python3 > /dev/null || skip "python3 not installed"
    # Ports are picked once (a restart keeps them, and those set by the
    # caller are kept); until the first start succeeds, a port that someone
    # else took since free_port probed it gives a new pair.
    if [ -z "$ORTHANC_HTTP_PORT" ] || [ -z "$ORTHANC_DICOM_PORT" ]; then
        orthanc__pick_ports
    fi
    local attempt lines
    for attempt in 1 2 3; do
        [ -f "$T/orthanc/orthanc.json" ] || orthanc__write_config
        lines=$(wc -l 2> /dev/null < "$T/orthanc.log" || echo 0)
        if orthanc__launch; then
            ORTHANC__OWN_PORTS=
            return 0
        fi
        if [ -z "$ORTHANC__OWN_PORTS" ] || [ $attempt -eq 3 ] ||
            ! tail -n +$((lines + 1)) "$T/orthanc.log" | grep -q "already in use"; then
            orthanc__fail "Orthanc exited during start"
        fi
        note "Orthanc: port $ORTHANC_DICOM_PORT or $ORTHANC_HTTP_PORT taken, trying others"
        orthanc__pick_ports
        rm -f "$T/orthanc/orthanc.json"
    done
}

# shellcheck disable=SC2120 # tests call it with --kill
stop_orthanc() {
    local sig=TERM
    [ "${1:-}" = --kill ] && sig=KILL
    orthanc_running || fail "stop_orthanc: Orthanc is not running"
    echo "=== stop ($sig) $(date +%T.%N)" >> "$T/orthanc.log"
    local rc=0
    # The braces keep bash's "Killed" job notice out of the test's output.
    { kill -$sig "$ORTHANC_PID" && wait "$ORTHANC_PID"; } 2> /dev/null || rc=$?
    ORTHANC_PID=
    # A clean stop exits 0; SIGKILL gives 137.
    [ $sig = KILL ] || [ $rc -eq 0 ] || orthanc__fail "Orthanc exited with $rc on SIGTERM"
    return 0
}

restart_orthanc() {
    orthanc_running && stop_orthanc
    start_orthanc
}

# The REST helpers are one Python process each (its start, not the HTTP
# calls, is what costs: about 0.15 s on a busy CI machine), so the queries
# and the polling live in this script.
ORTHANC__PY="$T/orthanc/rest.py"
mkdir -p "$T/orthanc" || fail "cannot create $T/orthanc"
cat > "$ORTHANC__PY" << 'EOF' || fail "cannot write $ORTHANC__PY"
# orthanc.sh's REST client: rest.py HTTP_PORT COMMAND ARGS... (see orthanc.sh).
import http.client, json, os, re, sys, time

PORT = int(sys.argv[1])


class Fail(Exception):
    pass


def call(method, path, body=None, raw=False):
    try:
        c = http.client.HTTPConnection("127.0.0.1", PORT, timeout=30)
        c.request(method, path, body=body)
        r = c.getresponse()
        data = r.read()
        c.close()
    except OSError as e:
        raise Fail("%s %s: %s" % (method, path, e))
    if r.status != 200:
        raise Fail("%s %s: HTTP %d %s" % (method, path, r.status, data[:300].decode(errors="replace")))
    return data if raw else json.loads(data)


def series_id(uid):
    ids = [r["ID"] for r in call("POST", "/tools/lookup", uid.encode()) if r.get("Type") == "Series"]
    return ids[0] if ids else None


def instance_ids(uid):
    sid = series_id(uid)
    if sid is None:
        raise Fail("no series %s" % uid)

    def key(i):
        n = i.get("MainDicomTags", {}).get("InstanceNumber", "").strip()
        idx = i.get("IndexInSeries") or 0
        return (0, int(n), idx, i["ID"]) if re.fullmatch(r"-?\d+", n) else (1, 0, idx, i["ID"])

    return [i["ID"] for i in sorted(call("GET", "/series/%s/instances" % sid), key=key)]


def count(uid):
    sid = series_id(uid)
    return 0 if sid is None else len(call("GET", "/series/" + sid)["Instances"])


def tag(uid, name):
    ids = instance_ids(uid)
    if not ids:
        raise Fail("series %s has no instance" % uid)
    if re.fullmatch(r"[0-9A-Fa-f]{4},[0-9A-Fa-f]{4}", name):
        name = name.lower()
        tags = call("GET", "/instances/%s/tags?short" % ids[0])
    else:
        tags = call("GET", "/instances/%s/simplified-tags" % ids[0])
    if name not in tags:
        raise Fail("tag %s absent from the first instance of %s" % (name, uid))
    v = tags[name]
    print(v if isinstance(v, str) else json.dumps(v))


def download(uid, out):
    os.makedirs(out, exist_ok=True)
    for n, i in enumerate(instance_ids(uid), 1):
        with open(os.path.join(out, "%d.dcm" % n), "wb") as f:
            f.write(call("GET", "/instances/%s/file" % i, raw=True))


def wait(uid, want, timeout):
    deadline = time.monotonic() + float(timeout)
    while True:
        try:
            n = count(uid)
        except Fail as e:  # Orthanc restarting: keep polling
            n = "unknown (%s)" % e
        if isinstance(n, int) and n >= int(want):
            return
        if time.monotonic() >= deadline:
            print(n)
            sys.exit(1)
        time.sleep(0.1)


def main():
    cmd, args = sys.argv[2], sys.argv[3:]
    if cmd == "series-uids":
        for s in call("GET", "/series?expand"):
            print(s["MainDicomTags"].get("SeriesInstanceUID", ""))
    elif cmd == "series-id":
        sid = series_id(args[0])
        if sid is None:
            sys.exit(1)
        print(sid)
    elif cmd == "instance-count":
        print(count(args[0]))
    elif cmd == "instances-total":
        print(call("GET", "/statistics")["CountInstances"])
    elif cmd == "series-tag":
        tag(args[0], args[1])
    elif cmd == "download":
        download(args[0], args[1])
    elif cmd == "wait":
        wait(*args)
    else:
        raise Fail("unknown command " + cmd)


try:
    main()
except Fail as e:
    sys.stderr.write("orthanc: %s\n" % e)
    sys.exit(1)
EOF

orthanc__py() { python3 "$ORTHANC__PY" "$ORTHANC_HTTP_PORT" "$@"; }

orthanc_series_uids() { orthanc__py series-uids; }
orthanc_series_id() { orthanc__py series-id "$1"; }
orthanc_instance_count() { orthanc__py instance-count "$1"; }
orthanc_instances_total() { orthanc__py instances-total; }
orthanc_series_tag() { orthanc__py series-tag "$1" "$2"; }
orthanc_download_series() { orthanc__py download "$1" "$2"; }

wait_orthanc_instances() {
    local n
    n=$(orthanc__py wait "$1" "$2" "$3") ||
        orthanc__fail "series $1: ${n:-?} instance(s) in Orthanc after ${3}s, expected $2"
}
