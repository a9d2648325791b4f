#!/usr/bin/env bash
# `make soak`: creates for SOAK_SECONDS (default 600) at a fraction of capacity (few
# connections), each payment with its own callback_url (loopback: refused at delivery,
# as a client's made-up destinations are), sampling the server's RSS; reports the
# payments made and RSS at start and end; fails on any non-2xx, on memory growth
# beyond SOAK_MAX_GROWTH_MIB (default 64) between the first minute and the last sample
# (warm-up: caches, instance slots), or beyond SOAK_MAX_STEADY_GROWTH_MIB (default 16)
# over the second half (steady state: what grows with the payments themselves).
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET_DIR=${CARGO_TARGET_DIR:-target}
MMC=${SOAK_BIN:-$TARGET_DIR/bench-release/mmc}
SECONDS_TOTAL=${SOAK_SECONDS:-600}
CONNS=${SOAK_CONNECTIONS:-4}
PORT=${SOAK_PORT:-18098}
BASE="http://127.0.0.1:$PORT"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
DATA=$(mktemp -d)
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$DATA"' EXIT
export MMC_CACHE_DIR="$TARGET_DIR/mmc-cache" MMC_LOG=warn MMC_RATE_LIMIT__PER_SECOND=0 MMC_RATE_LIMIT__PER_CLIENT_PER_SECOND=0 MMC_ADMIN__LISTEN=127.0.0.1:0
M=$("$MMC" merchants create --name Soak --data-dir "$DATA" | python3 -c 'import sys,json;print(json.load(sys.stdin)["id"])')
KEY=$("$MMC" keys create --merchant "$M" --env test --data-dir "$DATA" | python3 -c 'import sys,json;print(json.load(sys.stdin)["key"])')
"$MMC" serve --listen 127.0.0.1:$PORT --data-dir "$DATA" --components-dir "$TARGET_DIR/components" > "$DATA/server.log" 2>&1 &
SERVER=$!
until curl -sf "$BASE/healthz" >/dev/null; do sleep 0.05; done
start=$(awk '/VmRSS/ {print int($2/1024)}' /proc/$SERVER/status)
echo "t=0s rss=${start} MiB"
wrk -t1 -c"$CONNS" -d"${SECONDS_TOTAL}s" -H "Authorization: Bearer $KEY" -s bench/create_callbacks.lua "$BASE" > "$DATA/soak.txt" &
LOAD=$!
samples=()
for ((t = 0; t < SECONDS_TOTAL; t += 30)); do
  sleep 30
  rss=$(awk '/VmRSS/ {print int($2/1024)}' /proc/$SERVER/status)
  samples+=("$rss")
  echo "t=$((t + 30))s rss=${rss} MiB"
done
wait $LOAD
cat "$DATA/soak.txt"
non2xx=$(awk '/Non-2xx/ {print $5}' "$DATA/soak.txt"); errors=$(awk '/Socket errors/ {print}' "$DATA/soak.txt")
first=${samples[1]:-${samples[0]}}; last=${samples[-1]}
payments=$(awk '/requests in/ {print $1}' "$DATA/soak.txt")
echo "payments created (each its own callback_url): ${payments:-?}"
half=${samples[$(( ${#samples[@]} / 2 ))]}
echo "RSS start ${start} MiB, first minute ${first} MiB, half-way ${half} MiB, end ${last} MiB; non-2xx: ${non2xx:-0}; ${errors:-no socket errors}"
[ -z "$non2xx" ] && [ -z "$errors" ] && [ $((last - first)) -le ${SOAK_MAX_GROWTH_MIB:-64} ] \
  && [ $((last - half)) -le ${SOAK_MAX_STEADY_GROWTH_MIB:-16} ]
