#!/usr/bin/env bash
# `bench/profile.sh [PHASE] [EVENT]`: where the server's CPU (or its thread
# switches) goes under one load, as the README's profiles were taken. Starts a
# bench-release server on a fresh store, runs `wrk -c64` for 10 s on PHASE (create,
# get, legacy or healthz; default create) and records the server with
# `perf record -g` for 5 s of it, from second 3. EVENT: `cpu` (default,
# sampled at 1999 Hz), `dwarf` (sampled at 300 Hz, each stack unwound from
# its DWARF tables: call paths through the host without the frame-pointer
# build below; the report leaves inlined frames out, which it would take
# minutes to name) or `switches` (every `sched:sched_switch`). Then prints
# the share of samples by thread, and by the frames below `Runtime::handle`
# (cpu) or by where threads slept or lost their core (switches); see
# `bench/perf_tree.py` to break down other frames.
#
# Call paths through Rust code need frame pointers; build a host with them
# apart (a second target directory: the whole of wasmtime is rebuilt, ~9 min):
#   RUSTFLAGS="-C force-frame-pointers=yes" CARGO_TARGET_DIR=/tmp/fp-target \
#     cargo build --profile bench-release -p mmc-host
#   PROFILE_BIN=/tmp/fp-target/bench-release/mmc bench/profile.sh get
# (Not MMC_BIN: every MMC_* variable is read as configuration.)
# Wasm frames are unwound by wasmtime's own frame pointers; glibc's are not.
# Output stays in $PROFILE_DIR (default /tmp/mmc-profile): perf.data, perf.txt
# (`perf script`), wrk.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh # serve_for_profile
PHASE=${1:-create} EVENT=${2:-cpu}
serve_for_profile "$PHASE"
SCRIPT_ARGS=()
case $EVENT in
  cpu) PERF_EVENT=(-g -F 1999) ;;
  dwarf) PERF_EVENT=(--call-graph dwarf,32768 -F 300) SCRIPT_ARGS=(--no-inline) ;;
  switches) PERF_EVENT=(-g -e sched:sched_switch) ;;
  *) echo "unknown event $EVENT (cpu dwarf switches)" >&2; exit 2 ;;
esac
sleep 1
wrk -t2 -c64 -d10s --latency "${ARGS[@]}" > "$OUT/wrk.txt" &
WRK=$!
sleep 3
perf record "${PERF_EVENT[@]}" -p "$SERVER" -o "$OUT/perf.data" -- sleep 5 > /dev/null 2>&1
wait $WRK
grep -E "Requests/sec|^ +(50|99)%" "$OUT/wrk.txt"
# No debuginfod: without network it makes `perf script` hang.
DEBUGINFOD_URLS= perf script "${SCRIPT_ARGS[@]}" -i "$OUT/perf.data" 2>/dev/null > "$OUT/perf.txt"
echo "--- by thread"
perf report -i "$OUT/perf.data" --no-children --sort comm -g none --stdio 2>/dev/null | grep -E '^ +[0-9]' | head -8
if [ "$EVENT" = switches ]; then
  echo "--- where threads went to sleep or were preempted"
  python3 bench/perf_tree.py "$OUT/perf.txt" --callers | head -16
else
  echo "--- below Runtime::handle (the component calls of requests)"
  python3 bench/perf_tree.py "$OUT/perf.txt" 'mmc_runtime::calls::<impl mmc_runtime::Runtime>::handle' 1 | head -12
fi
echo "(more: python3 bench/perf_tree.py $OUT/perf.txt FRAME [DEPTH])"
