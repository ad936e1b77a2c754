#!/usr/bin/env bash
# Ingest benchmark: the same N instances (default 500 of 512x512) sent over
# loopback by one storescu to ldctd and to DCMTK's storescp, in one run.
# Prints both throughputs and their ratio (ldctd / storescp). ldctd fsyncs
# every file, its directory and its database commit; storescp does not.
# storescp runs with TCP_NODELAY=1 (DCMTK leaves Nagle on by default).
# BUILD is a build directory (relative to the repository or absolute) or a
# bundle's bin/ (tests/bench/ingest_device.sh); TMPDIR picks the disk.
# SENDERS=K splits the instances over K storescu processes sending at once
# (several scanners; storescp then runs with --fork to take them at once).
# usage: [SENDERS=K] tests/bench/ingest.sh [BUILD] [N] [ROUNDS]
set -eu
build=${1:-build} n=${2:-500} rounds=${3:-3} senders=${SENDERS:-1}
root=$(cd "$(dirname "$0")/../.." && pwd)
case $build in /*) b=$build ;; *) b=$root/$build ;; esac
tool() { if [ -x "$b/$1" ]; then echo "$b/$1"; else echo "$b/$(basename "$1")"; fi; }
t=$(mktemp -d "${TMPDIR:-/tmp}/ldct-bench-XXXXXX")
pids=()
trap 'kill ${pids[*]} 2>/dev/null; wait 2>/dev/null; rm -rf "$t"' EXIT
export TCP_NODELAY=1
"$(tool tools/mkseries)" --out "$t/series" --rows 512 --cols 512 --slices "$n" --noise 20 2>/dev/null
files=("$t"/series/*.dcm)
bytes=$(du -cb "${files[@]}" | tail -n1 | cut -f1)

port1=$((20000 + RANDOM % 10000)) port2=$((30000 + RANDOM % 10000))
printf '[node]\nport = %d\nstate_dir = %s/state\nmin_free_mb = 0\nlog_level = warning\n' \
    "$port1" "$t" > "$t/ldctd.conf"
"$(tool ldctd)" --config "$t/ldctd.conf" 2> "$t/ldctd.log" & pids+=($!)
mkdir -p "$t/storescp"
fork=()
[ "$senders" -gt 1 ] && fork=(--fork)
storescp "${fork[@]}" -od "$t/storescp" -aet STORESCP "$port2" & pids+=($!)
sleep 1

send() { # AE PORT -> seconds (SENDERS storescu at once, each every SENDERS-th file)
    local s e k i part
    s=$(date +%s.%N)
    for ((k = 0; k < senders; k++)); do
        part=()
        for ((i = k; i < ${#files[@]}; i += senders)); do part+=("${files[i]}"); done
        storescu -aec "$1" 127.0.0.1 "$2" "${part[@]}" &
    done
    wait_senders
    e=$(date +%s.%N)
    awk -v s="$s" -v e="$e" 'BEGIN {printf "%.4f\n", e - s}'
}
wait_senders() { # every background storescu, not the servers in pids
    local j
    for j in $(jobs -p); do
        case " ${pids[*]} " in *" $j "*) ;; *) wait "$j" ;; esac
    done
}
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ours=() theirs=()
for r in $(seq 1 "$rounds"); do
    ours+=("$(send LDCTNODE "$port1")")
    theirs+=("$(send STORESCP "$port2")")
    rm -rf "${t:?}/storescp"/*
done
o=$(median "${ours[@]}") s=$(median "${theirs[@]}")
stored=$("$(tool ldct)" --state-dir "$t/state" status | awk '/^instances:/ {print $2}')
[ "$stored" = "$n" ] || { echo "ldctd stored $stored of $n" >&2; exit 1; }
fs=$(findmnt -n -o FSTYPE,SOURCE -T "$t" | tr -s ' ' ' ')
awk -v k="$senders" -v fs="$fs" -v n="$n" -v b="$bytes" -v o="$o" -v s="$s" -v r="$rounds" 'BEGIN {
    printf "instances %d (%.1f MB), %d sender(s), median of %d rounds, spool on %s\n", n,
           b / 1e6, k, r, fs
    printf "ldctd:    %.2f s  %.1f instances/s  %.1f MB/s\n", o, n / o, b / 1e6 / o
    printf "storescp: %.2f s  %.1f instances/s  %.1f MB/s\n", s, n / s, b / 1e6 / s
    printf "ratio ldctd/storescp: %.2f\n", s / o }'
