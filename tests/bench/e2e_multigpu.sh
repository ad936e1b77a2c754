#!/usr/bin/env bash
# One worker per GPU, checked on a machine with several GPUs (device tool,
# nvidia-h200-x2): NSERIES series are sent to ldctd at once, first with
# `devices = auto` (one worker per GPU), then with `devices = gpu:0`, each
# time to a fresh state and a fresh DCMTK storescp as the PACS. Prints one
# JSON line per job (the device it ran on, its times) and one per run
# (wall time from the first series becoming stable until the last derived
# send is done, the devices used), then a verdict line: every job done and
# delivered in both runs, the auto run used every GPU, and the pixel data
# of the derived instances are the same bytes in both runs (compared as
# sorted lists of SHA-256 digests, since the derived UIDs differ).
#
# Usage: tests/bench/e2e_multigpu.sh BIN_DIR [NSERIES] [SIZE] [THICKNESS] [ALGO]
#   BIN_DIR    holds ldctd, ldct, mkseries, storescp, storescu
#   NSERIES    series sent at once (default 4)
#   SIZE       ROWSxCOLSxSLICES (default 512x512x200)
#   THICKNESS  mm (default 1)
#   ALGO       the rule's algorithm (default auto)
# Exit status 0 only if the verdict holds.
set -eu
bin=$1
nseries=${2:-4}
size=${3:-512x512x200}
thick=${4:-1}
algo=${5:-auto}
IFS=x read -r rows cols slices <<< "$size"
find_bin() { for p in "$bin/$1" "$bin/tools/$1" "$(command -v "$1" || true)"; do
    [ -x "$p" ] && { echo "$p"; return; }; done; echo "missing $1" >&2; exit 1; }
LDCTD=$(find_bin ldctd) LDCT=$(find_bin ldct) MKSERIES=$(find_bin mkseries)
STORESCP=$(find_bin storescp) STORESCU=$(find_bin storescu)
T=$(mktemp -d /tmp/ldct-mgpu-XXXXXX)
trap 'rc=$?; kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf "$T"; exit $rc' EXIT
port() { echo $((20000 + RANDOM % 30000)); }

for s in $(seq 1 "$nseries"); do
    "$MKSERIES" --out "$T/s$s" --rows "$rows" --cols "$cols" --slices "$slices" \
        --thickness "$thick" --noise 20 --seed "$s" > /dev/null
done

# run NAME DEVICES: one daemon, every series sent at once, waits until each
# job is failed or delivered (at most 10 minutes).
run() {
    local name=$1 devices=$2 d="$T/$1"
    local pacs_port port
    pacs_port=$(port)
    port=$(port)
    mkdir -p "$d/pacs"
    TCP_NODELAY=1 "$STORESCP" -aet PACS -od "$d/pacs" "$pacs_port" > "$d/storescp.log" 2>&1 &
    local pacs_pid=$!
    cat > "$d/ldctd.conf" <<CONF
[node]
port = $port
state_dir = $d/state
min_free_mb = 0
stable_seconds = 1
devices = $devices
log_level = info
[destination pacs]
host = 127.0.0.1
port = $pacs_port
ae_title = PACS
[rule bench]
action = process
algorithm = $algo
destinations = pacs
CONF
    "$LDCTD" --config "$d/ldctd.conf" > "$d/ldctd.log" 2>&1 &
    local ldctd_pid=$!
    for _ in $(seq 1 1000); do grep -q "ldctd ready" "$d/ldctd.log" && break; sleep 0.01; done
    grep -q "ldctd ready" "$d/ldctd.log" || { echo "ldctd ($devices) did not start:" >&2;
        tail -n 5 "$d/ldctd.log" >&2; exit 1; }
    local sends=()
    for s in $(seq 1 "$nseries"); do
        "$STORESCU" -aec LDCTNODE 127.0.0.1 "$port" "$T/s$s"/*.dcm &
        sends+=($!)
    done
    wait "${sends[@]}"
    for _ in $(seq 1 6000); do
        n=$("$LDCT" --config "$d/ldctd.conf" jobs --json | python3 -c '
import json, sys
print(sum(1 for j in json.load(sys.stdin) if j["state"] == "failed" or
          (j["sends"] and all(s["state"] == "done" for s in j["sends"]))))') || n=0
        [ "$n" -ge "$nseries" ] && break
        sleep 0.1
    done
    "$LDCT" --config "$d/ldctd.conf" jobs --json > "$d/jobs.json"
    "$LDCT" --config "$d/ldctd.conf" series --json > "$d/series.json"
    kill "$ldctd_pid"
    wait "$ldctd_pid" || true
    kill "$pacs_pid"
    wait "$pacs_pid" 2> /dev/null || true
}

run auto auto
run one gpu:0

python3 - "$T" "$nseries" "$size" "$algo" <<'PY'
import hashlib, json, os, re, sys
root, nseries, size, algo = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def pixel_digest(path):
    b = open(path, "rb").read()
    i = b.rfind(b"\xe0\x7f\x10\x00")
    if i < 0:
        return None
    if b[i + 4:i + 6] in (b"OW", b"OB"):
        n, start = int.from_bytes(b[i + 8:i + 12], "little"), i + 12
    else:
        n, start = int.from_bytes(b[i + 4:i + 8], "little"), i + 8
    return hashlib.sha256(b[start:start + n]).hexdigest()

def job_lines(log):
    done = {}
    for line in open(log):
        m = re.search(r"job (\d+) done: .* (\S+) on (\S+)( \(GPU failed\))?(?:, [^;]*)?; "
                      r"load ([\d.]+) s, filter ([\d.]+) s, write ([\d.]+) s", line)
        if m:
            g = m.groups()
            done[int(g[0])] = (g[1], g[2] + (" (GPU failed)" if g[3] else ""), *g[4:])
    return done

runs = {}
for name in ("auto", "one"):
    d = os.path.join(root, name)
    jobs = json.load(open(os.path.join(d, "jobs.json")))
    series = {s["series_uid"]: s for s in json.load(open(os.path.join(d, "series.json")))}
    done = job_lines(os.path.join(d, "ldctd.log"))
    stable, delivered, devices, ok = [], [], set(), 0
    for j in sorted(jobs, key=lambda j: j["id"]):
        s = series[j["series_uid"]]
        send = j["sends"][0] if j["sends"] else None
        a, dev, load, filt, write = done.get(j["id"], ("?", "?", 0, 0, 0))
        devices.add(dev)
        stable.append(s["stable_ms"])
        if j["state"] == "done" and send and send["state"] == "done":
            ok += 1
            delivered.append(send["finished_ms"])
        print(json.dumps({"run": name, "job": j["id"], "state": j["state"], "algorithm": a,
                          "device": dev, "queue_wait_s": (j["started_ms"] - s["stable_ms"]) / 1000,
                          "job_s": (j["finished_ms"] - j["started_ms"]) / 1000,
                          "load_s": float(load), "filter_s": float(filt), "write_s": float(write)}))
    pacs = os.path.join(d, "pacs")
    digests = sorted(filter(None, (pixel_digest(os.path.join(pacs, f)) for f in os.listdir(pacs))))
    runs[name] = {"jobs": len(jobs), "delivered": ok, "devices": sorted(devices),
                  "instances": len(digests), "digests": digests,
                  "wall_s": (max(delivered) - min(stable)) / 1000 if delivered else None}
    print(json.dumps({"run": name, "size": size, "series": nseries, "algo": algo,
                      **{k: v for k, v in runs[name].items() if k != "digests"}}))

a, o = runs["auto"], runs["one"]
slices = int(size.split("x")[2])
checks = {
    "every job delivered (auto)": a["jobs"] == nseries and a["delivered"] == nseries,
    "every job delivered (gpu:0)": o["jobs"] == nseries and o["delivered"] == nseries,
    "auto used more than one GPU": len([d for d in a["devices"] if d.startswith("gpu:")]) > 1,
    "no job fell back to the CPU": all(d.startswith("gpu:") for d in a["devices"] + o["devices"]),
    "every derived instance stored": a["instances"] == o["instances"] == nseries * slices,
    "same pixel data in both runs": a["digests"] == o["digests"],
}
print(json.dumps({"verdict": all(checks.values()), "checks": checks,
                  "speedup": o["wall_s"] / a["wall_s"] if a["wall_s"] and o["wall_s"] else None}))
sys.exit(0 if all(checks.values()) else 1)
PY
