#!/bin/sh
# Runs on the GPU machine (cuobjdump is not installed on the build machine):
# SASS opcode histogram of every kernel in BINARY whose mangled name matches
# the awk regex RE, one table per kernel, most frequent opcode first.
# Used to count instructions per offset group (docs/NOTES-gpu.md).
# Usage: tests/bench/sass_hist.sh BINARY RE [TOP]
BIN=$1
RE=$2
TOP=${3:-40}
CUOBJDUMP=${CUOBJDUMP:-$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)}
"$CUOBJDUMP" -sass "$BIN" | awk -v re="$RE" -v top="$TOP" '
function flush(   k, n, i, j, t, keys) {
    if (name == "") return
    n = 0
    for (k in cnt) keys[++n] = k
    for (i = 2; i <= n; i++) { # insertion sort by count, descending
        t = keys[i]
        for (j = i - 1; j >= 1 && cnt[keys[j]] < cnt[t]; j--) keys[j + 1] = keys[j]
        keys[j + 1] = t
    }
    printf "%s: %d instructions\n", name, total
    for (i = 1; i <= n && i <= top; i++) printf "  %6d %s\n", cnt[keys[i]], keys[i]
    split("", cnt)
    total = 0
    name = ""
}
/Function :/ { flush(); if ($0 ~ re) name = $3; next }
name != "" && /\/\*[0-9a-f][0-9a-f][0-9a-f][0-9a-f]+\*\/ / {
    line = $0
    sub(/^[ \t]*\/\*[0-9a-f]+\*\/[ \t]+/, "", line)
    sub(/^@!?U?P[0-9T][ \t]+/, "", line)
    split(line, f, /[ .;]/)
    if (f[1] == "") next
    cnt[f[1]]++
    total++
}
END { flush() }'
