#!/usr/bin/env bash
# `bench/sched.sh [PHASE]`: where the wall time of the server's threads goes
# under one load — running, runnable but waiting for a core, or asleep (on a
# commit, a lock, an idle pool) — to tell a latency bounded by the cores from
# one bounded by waits. Starts a release server on a fresh store, runs
# `wrk -c64` for 10 s on PHASE (create, get, legacy or healthz; default
# create), records every scheduler event of the machine for 3 s of it
# (`perf sched record`), and prints per thread class, in thread-seconds per
# second: run (cores used), delay (threads runnable and waiting for a core:
# the run queue), sleep. By Little's law the requests in flight (64) split
# into those computing, those in the run queue and those asleep.
# Output stays in $PROFILE_DIR (default /tmp/mmc-profile): sched.data, timehist.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh # bench_key, serve_fresh, first_payment
PHASE=${1:-create}
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
ID=$(first_payment "$BASE" "$KEY" sched)
[ -n "$ID" ] || { echo "no payment could be created; see $DATA/server.log" >&2; exit 1; }
case $PHASE in
  create) ARGS=("${AUTH[@]}" -s bench/create.lua "$BASE") ;;
  get) ARGS=("${AUTH[@]}" "$BASE/api/v1/collect/payments/$ID") ;;
  legacy) ARGS=("${AUTH[@]}" -s bench/legacy.lua "$BASE") ;;
  healthz) ARGS=("$BASE/healthz") ;;
  *) echo "unknown phase $PHASE (create get legacy healthz)" >&2; exit 2 ;;
esac
sleep 1
wrk -t2 -c64 -d10s --latency "${ARGS[@]}" > "$OUT/wrk.txt" &
WRK=$!
sleep 3
perf sched record -o "$OUT/sched.data" -- sleep 3 > /dev/null 2>&1
wait $WRK
grep -E "Requests/sec|^ +(50|99)%" "$OUT/wrk.txt"
perf sched timehist -i "$OUT/sched.data" 2> /dev/null > "$OUT/timehist.txt"
python3 - "$OUT/timehist.txt" "$SERVER" <<'PY'
import re, sys
from collections import defaultdict
path, server = sys.argv[1], sys.argv[2]
# "time cpu task[tid/pid] wait sch-delay run" (milliseconds), one line per switch-out.
line_re = re.compile(r"^\s*([\d.]+)\s+\[(\d+)\]\s+(.+?)\[(\d+)(?:/(\d+))?\]\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")
sums = defaultdict(lambda: [0.0, 0.0, 0.0, set()])
first = last = None
for line in open(path):
    m = line_re.match(line)
    if not m:
        continue
    t, _, comm, tid, pid, wait, delay, run = m.groups()
    t = float(t)
    first = t if first is None else first
    last = t
    if comm.startswith("<idle>"):
        continue
    if pid == server:
        cls = comm if comm.startswith(("sqlite-", "epoch-")) else "mmc " + comm
    elif comm.startswith("wrk"):
        cls = "wrk"
    else:
        cls = "other"
    s = sums[cls]
    s[0] += float(wait); s[1] += float(delay); s[2] += float(run); s[3].add(tid)
span_ms = max((last or 0) - (first or 0), 1e-9) * 1000
print(f"--- {span_ms / 1000:.2f} s of scheduler events; thread-seconds per second")
print(f"{'class':<24}{'threads':>8}{'run':>8}{'delay':>8}{'sleep':>8}")
for cls, (wait, delay, run, tids) in sorted(sums.items(), key=lambda kv: -kv[1][2]):
    print(f"{cls:<24}{len(tids):>8}{run / span_ms:>8.2f}{delay / span_ms:>8.2f}{wait / span_ms:>8.2f}")
PY
