#!/usr/bin/env bash
# The books at scale: one account-day of BOOKS_RECORDS (1,000,000) test
# payments through the simulator and as many movements in its statement,
# seeded straight into a store (bench/seed_books.py), reconciled by one
# `POST /admin/v1/reconciliation/runs` on the bench-release build, on SQLite
# and on PostgreSQL. Measured: the run's wall time, and the server's
# resident memory before it and at its peak during it (VmHWM, reset just
# before the run). Targets: ≤ 60 s and ≤ 128 MiB of growth.
#
# Usage: bench/books.sh [sqlite|postgres]... (both by default). Prints one
# line per engine: "engine|records|seconds|rss before MiB|peak MiB|growth MiB|matched".
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh # fresh_database, drop_database
TARGET_DIR=${CARGO_TARGET_DIR:-target}
MMC=${MMC:-"$TARGET_DIR/bench-release/mmc"}
N=${BOOKS_RECORDS:-1000000}
PORT=${BOOKS_PORT:-18199}
DAY=2026-06-01
DAY_MS=1780272000000
ADMIN_TOKEN=adm_books_0123456789abcdef0123456789abcdef
export MMC_CACHE_DIR="$TARGET_DIR/mmc-cache" MMC_LOG=warn MMC_ADMIN__LISTEN=127.0.0.1:$((PORT + 1)) MMC_ADMIN__TOKEN=$ADMIN_TOKEN
# Only the day asked: the daily round would run the seeded day too.
export MMC_BOOKS__DAILY=false
DATA=$(mktemp -d)
SERVER=
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$DATA"' EXIT

run() { # engine
  local engine=$1 dir="$DATA/$1" url=
  mkdir -p "$dir"
  if [ "$engine" = postgres ]; then
    local pg; pg=$(./scripts/test-postgres.sh)
    url=$(fresh_database "$pg" mmc_books)
    export MMC_STORAGE__URL=$url
    export MMC_WEBHOOKS__SECRETS_KEY=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  else
    unset MMC_STORAGE__URL
  fi
  local m; m=$("$MMC" merchants create --name Books --data-dir "$dir" | python3 -c 'import sys,json;print(json.load(sys.stdin)["id"])')
  if [ "$engine" = postgres ]; then
    python3 bench/seed_books.py --postgres "$url" "$m" "$N" "$DAY_MS"
  else
    python3 bench/seed_books.py --sqlite "$dir/mmc.db" "$m" "$N" "$DAY_MS"
  fi
  "$MMC" serve --listen 127.0.0.1:$PORT --data-dir "$dir" --components-dir "$TARGET_DIR/components" > "$dir/server.log" 2>&1 &
  SERVER=$!
  until curl -sf "http://127.0.0.1:$PORT/healthz" >/dev/null; do
    kill -0 $SERVER 2>/dev/null || { echo "the server did not start:" >&2; tail -20 "$dir/server.log" >&2; exit 1; }
    sleep 0.05
  done
  sleep 1
  local rss0; rss0=$(awk '/VmRSS/ {print $2}' /proc/$SERVER/status)
  echo 5 > /proc/$SERVER/clear_refs # the peak (VmHWM) from now on
  local t0; t0=$(date +%s%N)
  local report; report=$(curl -sf -X POST -H "Authorization: Bearer $ADMIN_TOKEN" \
    -d "{\"date\":\"$DAY\",\"account\":\"simulator\"}" "http://127.0.0.1:$((PORT + 1))/admin/v1/reconciliation/runs")
  local t1; t1=$(date +%s%N)
  local peak; peak=$(awk '/VmHWM/ {print $2}' /proc/$SERVER/status)
  kill $SERVER; wait $SERVER 2>/dev/null || true
  SERVER=
  if [ "$engine" = postgres ]; then
    drop_database "${url%/*}/postgres" mmc_books
    unset MMC_STORAGE__URL MMC_WEBHOOKS__SECRETS_KEY
  fi
  local matched; matched=$(python3 -c 'import sys,json;r=json.loads(sys.argv[1])["data"][0];print(r["counts"]["matched"] if r["status"]=="reconciled" else r["status"]+": "+str(r["reason"]))' "$report")
  python3 -c "
import sys
e, n, t0, t1, rss0, peak, matched = sys.argv[1:]
print(f'{e}|{n}|{(int(t1) - int(t0)) / 1e9:.1f}|{int(rss0) // 1024}|{int(peak) // 1024}|{(int(peak) - int(rss0)) // 1024}|{matched}')
" "$engine" "$N" "$t0" "$t1" "$rss0" "$peak" "$matched"
}

for engine in "${@:-sqlite postgres}"; do
  for e in $engine; do run "$e"; done
done
