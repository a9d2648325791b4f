#!/usr/bin/env bash
# `bench/callgrind.sh [PHASE] [SECONDS]`: instructions per request, counted by
# valgrind's callgrind. Unlike req/s and CPU time on a shared VM, the count
# does not move with the machine's speed, so a change of 1% shows. Starts a
# bench-release server on a fresh store under callgrind with its counting
# off, warms it with PHASE (create, get, legacy or healthz; default create:
# one second, then five more counted and thrown away), counts one `wrk -t1`
# run of SECONDS (default 30) at CALLGRIND_CONNECTIONS (default 16: with one,
# each create commits alone and SQLite writes five times the WAL pages per
# create that `make bench` does), and prints the instructions per request and
# the functions with the most, on their own and with what they call.
# Everything in the process counts, the jobs and workers a request sets off
# included.
# The server runs with `limits.reserve_address_space=false` (valgrind cannot
# reserve the default pool's address space) and 8 call slots: its Wasm code
# checks memory bounds explicitly, so Wasm's share is larger than in a
# normal build; compare builds with each other under this script, not with
# perf's profiles.
# Output stays in $PROFILE_DIR (default /tmp/mmc-profile): callgrind.out.*,
# readable with `callgrind_annotate`.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh # serve_for_profile
PHASE=${1:-create} SECONDS_COUNTED=${2:-30}
command -v valgrind >/dev/null || { apt-get update -qq && apt-get install -y -qq valgrind; }
export MMC_LIMITS__RESERVE_ADDRESS_SPACE=false MMC_LIMITS__CONCURRENT_CALLS=8
OUT=${PROFILE_DIR:-/tmp/mmc-profile}
mkdir -p "$OUT"
rm -f "$OUT"/callgrind.out*
# Components compiled natively first, for this engine's settings: one
# compiled under valgrind takes minutes, and runs from memory, where its code
# has no names to read.
target=${CARGO_TARGET_DIR:-target} WARM=$(mktemp -d)
MMC_CACHE_DIR="$target/mmc-cache" MMC_ADMIN__LISTEN=127.0.0.1:18397 MMC_LOG=warn \
  serve_fresh "${PROFILE_BIN:-$target/bench-release/mmc}" "$WARM" "$target/components" 18398
kill "$SERVER" && wait "$SERVER" || true
rm -rf "$WARM"
# Counting starts off: start-up is not measured, and runs at valgrind's
# translation speed only.
SERVE_WRAP="valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$OUT/callgrind.out"
export SERVE_WRAP
serve_for_profile "$PHASE"
C=${CALLGRIND_CONNECTIONS:-16}
wrk -t1 -c"$C" -d1s "${ARGS[@]}" > /dev/null # translated by valgrind before counting
callgrind_control --instr=on "$SERVER" > /dev/null
wrk -t1 -c"$C" -d5s "${ARGS[@]}" > /dev/null
callgrind_control --zero "$SERVER" > /dev/null
wrk -t1 -c"$C" -d"${SECONDS_COUNTED}s" "${ARGS[@]}" > "$OUT/wrk.txt"
callgrind_control --dump "$SERVER" > /dev/null
cp "/proc/$SERVER/maps" "$OUT/maps" # where each component's code was, to name it
requests=$(awk '/requests in/ {print $1}' "$OUT/wrk.txt")
dump=$(ls -t "$OUT"/callgrind.out* | head -1)
total=$(callgrind_annotate "$dump" 2>/dev/null | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
echo "$PHASE: $requests requests, $total instructions, $((total / requests)) per request"
grep -E "Non-2xx" "$OUT/wrk.txt" || true
# Per request, the function's own instructions or with those it calls; Wasm
# code named by bench/wasm_symbols.py (`component:function`).
per_request() { # callgrind_annotate options...
  callgrind_annotate "$@" "$dump" 2>/dev/null \
    | sed -E 's#[^ ]*/registry/src/[^/]+/##; s#\[[^]]*\]$##' \
    | python3 bench/wasm_symbols.py "$OUT/maps" \
    | awk -v n="$requests" '/^ *[0-9,]+ \(/ && !/PROGRAM TOTALS/ {
        c=$1; gsub(",", "", c); $1=""; $2=""; sub(/^ +/, ""); printf "%10d  %s\n", c / n, substr($0, 1, 150)}' \
    | head -"${CALLGRIND_TOP:-20}" || true # head's early exit is not a failure
}
echo "--- own instructions per request"
per_request
echo "--- inclusive of callees, per request"
per_request --inclusive=yes
