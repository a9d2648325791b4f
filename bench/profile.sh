#!/usr/bin/env bash
# `bench/profile.sh [PHASE] [EVENT]`: where the server's CPU (or its thread
# switches) goes under one load, as the README's profiles were taken. Starts a
# release server on a fresh store, runs `wrk -c64` for 10 s on PHASE (create,
# get, legacy or healthz; default create) and records the server with
# `perf record -g` for 5 s of it, from second 3. EVENT: `cpu` (default,
# sampled at 1999 Hz) or `switches` (every `sched:sched_switch`). Then prints
# the share of samples by thread, and by the frames below `Runtime::handle`
# (cpu) or by where threads slept or lost their core (switches); see
# `bench/perf_tree.py` to break down other frames.
#
# Call paths through Rust code need frame pointers; build a host with them
# apart (a second target directory: the whole of wasmtime is rebuilt, ~9 min):
#   RUSTFLAGS="-C force-frame-pointers=yes" CARGO_TARGET_DIR=/tmp/fp-target \
#     cargo build --release -p mmc-host
#   PROFILE_BIN=/tmp/fp-target/release/mmc bench/profile.sh get
# (Not MMC_BIN: every MMC_* variable is read as configuration.)
# Wasm frames are unwound by wasmtime's own frame pointers; glibc's are not.
# Output stays in $PROFILE_DIR (default /tmp/mmc-profile): perf.data, perf.txt
# (`perf script`), wrk.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh # bench_key, serve_fresh, first_payment
PHASE=${1:-create} EVENT=${2:-cpu}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
MMC=${PROFILE_BIN:-$TARGET_DIR/release/mmc}
OUT=${PROFILE_DIR:-/tmp/mmc-profile}
PORT=${PROFILE_PORT:-18399}
BASE="http://127.0.0.1:$PORT"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
command -v perf >/dev/null || { echo "perf is needed (apt-get install linux-perf)" >&2; exit 1; }
mkdir -p "$OUT"
DATA=$(mktemp -d)
SERVER=
trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER"; rm -rf "$DATA"' EXIT
export MMC_CACHE_DIR="$TARGET_DIR/mmc-cache" MMC_LOG=warn MMC_RATE_LIMIT__PER_SECOND=0 \
  MMC_RATE_LIMIT__PER_CLIENT_PER_SECOND=0 MMC_ADMIN__LISTEN=127.0.0.1:$((PORT + 1)) \
  MMC_ADMIN__TOKEN=adm_bench_0123456789abcdef0123456789ab

KEY=$(bench_key "$MMC" "$DATA")
serve_fresh "$MMC" "$DATA" "$TARGET_DIR/components" "$PORT"
AUTH=(-H "Authorization: Bearer $KEY")
ID=$(first_payment "$BASE" "$KEY" profile)
[ -n "$ID" ] || { echo "no payment could be created; see $DATA/server.log" >&2; exit 1; }
case $PHASE in
  create) ARGS=("${AUTH[@]}" -s bench/create.lua "$BASE") ;;
  get) ARGS=("${AUTH[@]}" "$BASE/api/v1/collect/payments/$ID") ;;
  legacy) ARGS=("${AUTH[@]}" -s bench/legacy.lua "$BASE") ;;
  healthz) ARGS=("$BASE/healthz") ;;
  *) echo "unknown phase $PHASE (create get legacy healthz)" >&2; exit 2 ;;
esac
case $EVENT in
  cpu) PERF_EVENT=(-F 1999) ;;
  switches) PERF_EVENT=(-e sched:sched_switch) ;;
  *) echo "unknown event $EVENT (cpu switches)" >&2; exit 2 ;;
esac
sleep 1
wrk -t2 -c64 -d10s --latency "${ARGS[@]}" > "$OUT/wrk.txt" &
WRK=$!
sleep 3
perf record -g "${PERF_EVENT[@]}" -p "$SERVER" -o "$OUT/perf.data" -- sleep 5 > /dev/null 2>&1
wait $WRK
grep -E "Requests/sec|^ +(50|99)%" "$OUT/wrk.txt"
# No debuginfod: without network it makes `perf script` hang.
DEBUGINFOD_URLS= perf script -i "$OUT/perf.data" 2>/dev/null > "$OUT/perf.txt"
echo "--- by thread"
perf report -i "$OUT/perf.data" --no-children --sort comm -g none --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -8
if [ "$EVENT" = switches ]; then
  echo "--- where threads went to sleep or were preempted"
  python3 bench/perf_tree.py "$OUT/perf.txt" --callers | head -16
else
  echo "--- below Runtime::handle (the component calls of requests)"
  python3 bench/perf_tree.py "$OUT/perf.txt" 'mmc_host::runtime::Runtime::handle' 1 | head -12
fi
echo "(more: python3 bench/perf_tree.py $OUT/perf.txt FRAME [DEPTH])"
