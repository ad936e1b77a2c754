#!/usr/bin/env bash
# End-to-end latency of the node (issue 4): a ROWSxCOLSxSLICES series is
# sent to ldctd; the figure is the time from the moment the series is
# stable (series.stable_ms) until the derived send is done (the last C-STORE
# response from the PACS), with the job's own breakdown. The PACS is DCMTK's
# storescp (Orthanc is not on the GPU machine), run with TCP_NODELAY=1: with
# Nagle on, DCMTK peers wait ~90 ms per instance for delayed ACKs. Prints
# one JSON line per run (ready_s: daemon start until its "ready" line).
#
# Usage: tests/bench/e2e.sh BIN_DIR [DEVICES] [RUNS] [SIZE] [THICKNESS]
#   BIN_DIR    holds ldctd, ldct, mkseries, storescp, storescu (build dir
#              with tools/, or a bundle's bin/ after sourcing its env.sh)
#   DEVICES    ldctd's devices setting (default auto)
#   RUNS       series sent one after the other (default 3; report the median)
#   SIZE       ROWSxCOLSxSLICES (default 512x512x200)
#   THICKNESS  mm (default 1: nlm3d; > 2 selects nlm2d)
set -eu
bin=$1
devices=${2:-auto}
runs=${3:-3}
size=${4:-512x512x200}
thick=${5:-1}
IFS=x read -r rows cols slices <<< "$size"
find_bin() { for p in "$bin/$1" "$bin/tools/$1" "$(command -v "$1" || true)"; do
    [ -x "$p" ] && { echo "$p"; return; }; done; echo "missing $1" >&2; exit 1; }
LDCTD=$(find_bin ldctd) LDCT=$(find_bin ldct) MKSERIES=$(find_bin mkseries)
STORESCP=$(find_bin storescp) STORESCU=$(find_bin storescu)
T=$(mktemp -d /tmp/ldct-e2e-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; rm -rf "$T"' EXIT
port() { echo $((20000 + RANDOM % 30000)); }
PACS_PORT=$(port) PORT=$(port)
mkdir -p "$T/pacs"
TCP_NODELAY=1 "$STORESCP" -aet PACS -od "$T/pacs" "$PACS_PORT" > "$T/storescp.log" 2>&1 &
cat > "$T/ldctd.conf" <<CONF
[node]
port = $PORT
state_dir = $T/state
min_free_mb = 0
stable_seconds = 1
devices = $devices
log_level = info
[destination pacs]
host = 127.0.0.1
port = $PACS_PORT
ae_title = PACS
[rule bench]
action = process
destinations = pacs
CONF
t_start=$(date +%s%N)
"$LDCTD" --config "$T/ldctd.conf" > "$T/ldctd.log" 2>&1 &
for _ in $(seq 1 1000); do grep -q "ldctd ready" "$T/ldctd.log" && break; sleep 0.01; done
ready_s=$(( ($(date +%s%N) - t_start) / 1000000 ))
for r in $(seq 1 "$runs"); do
    "$MKSERIES" --out "$T/s$r" --rows "$rows" --cols "$cols" --slices "$slices" \
        --thickness "$thick" --noise 20 --seed "$r" > /dev/null
    "$STORESCU" -aec LDCTNODE 127.0.0.1 "$PORT" "$T/s$r"/*.dcm
    for _ in $(seq 1 6000); do
        n=$("$LDCT" --config "$T/ldctd.conf" jobs --json | python3 -c '
import json, sys
print(sum(1 for j in json.load(sys.stdin) if j["state"] == "failed" or
          (j["sends"] and all(s["state"] == "done" for s in j["sends"]))))')
        [ "$n" -ge "$r" ] && break
        sleep 0.1
    done
done
"$LDCT" --config "$T/ldctd.conf" jobs --json > "$T/jobs.json"
"$LDCT" --config "$T/ldctd.conf" series --json > "$T/series.json"
python3 - "$T/jobs.json" "$T/series.json" "$T/ldctd.log" "$size" "$devices" "$ready_s" <<'PY'
import json, re, sys
jobs = json.load(open(sys.argv[1]))
series = {s["series_uid"]: s for s in json.load(open(sys.argv[2]))}
done = {}
for line in open(sys.argv[3]):
    m = re.search(r"job (\d+) done: .* (\S+) on (\S+)(?: \(GPU failed\))?(?:, [^;]*)?; "
                  r"load ([\d.]+) s, filter ([\d.]+) s, write ([\d.]+) s", line)
    if m:
        done[int(m.group(1))] = m.groups()[1:]
for j in sorted(jobs, key=lambda j: j["id"]):
    s = series[j["series_uid"]]
    send = j["sends"][0] if j["sends"] else None
    algo, dev, load, filt, write = done.get(j["id"], ("?", "?", 0, 0, 0))
    out = {"size": sys.argv[4], "devices": sys.argv[5], "job": j["id"], "state": j["state"],
           "ready_s": int(sys.argv[6]) / 1000, "algorithm": algo, "device": dev,
           "stable_to_delivered_s": (send["finished_ms"] - s["stable_ms"]) / 1000 if send else None,
           "queue_wait_s": (j["started_ms"] - s["stable_ms"]) / 1000,
           "job_s": (j["finished_ms"] - j["started_ms"]) / 1000,
           "load_s": float(load), "filter_s": float(filt), "write_s": float(write),
           "send_s": (send["finished_ms"] - j["finished_ms"]) / 1000 if send else None}
    print(json.dumps(out))
PY
