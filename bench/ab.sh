#!/usr/bin/env bash
# `bench/ab.sh A B [PHASES] [ROUNDS]`: compares two bench-release binaries of `mmc`
# on this machine, alternating A and B ROUNDS times (default 3) so a drift of
# the VM's speed falls on both. Each run starts its own server on a fresh data
# directory and runs PHASES (default "h c g": healthz, creates, gets; "l":
# legacy creates), each `wrk -c$AB_CONNECTIONS -d$AB_DURATION` after the
# server has gone idle. Prints, per phase: req/s, p99, and what the server
# spent per request (CPU time of the process, context switches) — the figure
# to compare when the VM's speed moves req/s by more than the change does.
#
# AB_COMPONENTS_A / AB_COMPONENTS_B: a components directory for each side
# (default target/components for both), to compare two builds of a component.
# AB_STORAGE=postgres: each run on a fresh PostgreSQL database (the test
# server of scripts/test-postgres.sh) instead of SQLite.
#
# Build each binary, then copy it aside (one workspace target directory is
# shared, so a second build overwrites the first):
#   git stash; cargo build --profile bench-release -p mmc-host; cp target/bench-release/mmc /tmp/a
#   git stash pop; cargo build --profile bench-release -p mmc-host; cp target/bench-release/mmc /tmp/b
#   bench/ab.sh /tmp/a /tmp/b "c g" 4
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh # wait_quiet, bench_key, serve_fresh, first_payment, cpu_ticks, fresh_database
[ $# -ge 2 ] || { sed -n 2,16p "$0"; exit 2; }
A=$1 B=$2 PHASES=${3:-"h c g"} ROUNDS=${4:-3}
DURATION=${AB_DURATION:-6s} CONNS=${AB_CONNECTIONS:-64} PORT=${AB_PORT:-18199}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
BASE="http://127.0.0.1:$PORT"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
export MMC_CACHE_DIR="$TARGET_DIR/mmc-cache" MMC_LOG=warn MMC_RATE_LIMIT__PER_SECOND=0 \
  MMC_RATE_LIMIT__PER_CLIENT_PER_SECOND=0 MMC_ADMIN__LISTEN=127.0.0.1:$((PORT + 1)) \
  MMC_ADMIN__TOKEN=adm_bench_0123456789abcdef0123456789ab
HZ=$(getconf CLK_TCK)
SERVER=

# A thread may exit between the glob and `cat`: under pipefail that failed the run.
switches() { { cat /proc/"$SERVER"/task/*/status 2>/dev/null || true; } | awk '/ctxt_switches/ {s += $2} END {print s + 0}'; }

if [ "${AB_STORAGE:-sqlite}" = postgres ]; then
  PGURL=$(./scripts/test-postgres.sh)
  export QUIET_PERCENT=${QUIET_PERCENT:-$QUIET_PERCENT_POSTGRES}
  export MMC_WEBHOOKS__SECRETS_KEY=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
fi

one_run() { # label, binary, components directory
  local label=$1 bin=$2 components=$3 data
  data=$(mktemp -d)
  if [ -n "${PGURL:-}" ]; then
    export MMC_STORAGE__URL; MMC_STORAGE__URL=$(fresh_database "$PGURL" mmc_ab)
  fi
  local key
  key=$(bench_key "$bin" "$data")
  serve_fresh "$bin" "$data" "$components" "$PORT" || { echo "$label: no server" >&2; exit 1; }
  echo "$SERVER" >> "$STARTED"
  local auth=(-H "Authorization: Bearer $key") id
  id=$(first_payment "$BASE" "$key" ab-get)
  [ -n "$id" ] || { echo "$label: no payment could be created; see $data/server.log" >&2; exit 1; }
  local p args t0 s0 out t1 s1
  for p in $PHASES; do
    case $p in
      h) args=("$BASE/healthz") ;;
      c) args=("${auth[@]}" -s bench/create.lua "$BASE") ;;
      g) args=("${auth[@]}" "$BASE/api/v1/collect/payments/$id") ;;
      l) args=("${auth[@]}" -s bench/legacy.lua "$BASE") ;;
      *) echo "unknown phase $p (h c g l)" >&2; exit 2 ;;
    esac
    wait_quiet
    t0=$(cpu_ticks "$SERVER") s0=$(switches)
    out=$(wrk -t2 -c"$CONNS" -d"$DURATION" --latency "${args[@]}" 2>&1) ||
      { echo "$label $p: wrk failed: $out" >&2; exit 1; }
    t1=$(cpu_ticks "$SERVER") s1=$(switches)
    python3 - "$label" "$p" "$out" "$((t1 - t0))" "$((s1 - s0))" "$HZ" <<'PY'
import re, sys
label, phase, out, ticks, sw, hz = sys.argv[1:]
n = int(re.search(r"(\d+) requests in", out).group(1))
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
p99 = re.search(r"\n\s+99%\s+(\S+)", out).group(1)
bad = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
print(f"{label} {phase}: {rps:10.0f} req/s  p99 {p99:>8}  CPU/req {1e6 * int(ticks) / int(hz) / n:7.1f} µs"
      f"  switches/req {int(sw) / n:5.2f}  non-2xx {bad.group(1) if bad else 0}")
PY
  done
  kill "$SERVER"; wait "$SERVER" 2>/dev/null || true
  rm -rf "$data"
}

LINES=$(mktemp) STARTED=$(mktemp)
# The runs are a subshell (the pipe), and bash runs no EXIT trap of a subshell
# that `set -e` ends: the main shell stops every server they started.
trap 'xargs -r kill < "$STARTED" 2>/dev/null || true; rm -f "$LINES" "$STARTED"' EXIT
for r in $(seq "$ROUNDS"); do
  CA=${AB_COMPONENTS_A:-$TARGET_DIR/components} CB=${AB_COMPONENTS_B:-$TARGET_DIR/components}
  if [ $((r % 2)) -eq 1 ]; then one_run "A$r" "$A" "$CA"; one_run "B$r" "$B" "$CB"; else one_run "B$r" "$B" "$CB"; one_run "A$r" "$A" "$CA"; fi
done | tee "$LINES"
# Means over the rounds, and B against A.
python3 - "$LINES" <<'PY'
import re, sys, statistics as st
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"([AB])\d+ (\w): +([\d.]+) req/s .*CPU/req +([\d.]+) µs", line)
    if m:
        runs.setdefault((m[2], m[1]), []).append((float(m[3]), float(m[4])))
for phase in dict.fromkeys(p for p, _ in runs):
    a, b = runs.get((phase, "A"), []), runs.get((phase, "B"), [])
    if not a or not b:
        continue
    ra, rb = st.mean(x for x, _ in a), st.mean(x for x, _ in b)
    ca, cb = st.mean(y for _, y in a), st.mean(y for _, y in b)
    print(f"mean {phase}: A {ra:.0f} req/s, {ca:.1f} µs/req; B {rb:.0f} req/s, {cb:.1f} µs/req "
          f"(req/s {100 * (rb / ra - 1):+.1f}%, CPU/req {100 * (cb / ca - 1):+.1f}%)")
PY
