#!/usr/bin/env bash
# `bench/wal_mix.sh [PHASE] [SCRIPT]`: what fills the WAL under one load.
# Starts a release server on a fresh store, runs `wrk -c64` for 8 s on PHASE
# (create, legacy; default create; SCRIPT replaces the phase's wrk script,
# e.g. a create.lua variant), copies the database and its WAL at second 5,
# and prints the WAL's frames (pages written at commits) by B-tree, and by
# namespace/table for the components' `kv` table (bench/wal_mix.py).
# WAL bytes drive CPU: the committer's writeback in fdatasync, the
# checkpointer's copy and the applier's writes grow with them.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh # serve_for_profile
PHASE=${1:-create}
serve_for_profile "$PHASE"
if [ -n "${2:-}" ]; then
  ARGS=("${ARGS[@]/bench\/$PHASE.lua/$2}")
fi
wrk -t2 -c64 -d8s --latency "${ARGS[@]}" > "$OUT/wrk.txt" &
WRK=$!
sleep 5
cp "$DATA/mmc.db" "$OUT/wal-mix.db"
cp "$DATA/mmc.db-wal" "$OUT/wal-mix.db-wal"
wait $WRK
grep -E "Requests/sec" "$OUT/wrk.txt"
python3 bench/wal_mix.py "$OUT/wal-mix.db" "$OUT/wal-mix.db-wal"
