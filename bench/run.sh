#!/usr/bin/env bash
# `make bench`: one run on the bench-release build (whole-program LTO), with a
# real load generator (wrk), durable storage (every acknowledged commit
# fsynced). Prints a table and writes bench/results/latest.md.
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh # wait_quiet, cpu_ticks, fresh_database, drop_database
TARGET_DIR=${CARGO_TARGET_DIR:-target}
MMC="$TARGET_DIR/bench-release/mmc"
DURATION=${BENCH_DURATION:-10s}
CONNS=${BENCH_CONNECTIONS:-64}
PORT=${BENCH_PORT:-18099}
BASE="http://127.0.0.1:$PORT"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
mkdir -p bench/results
DATA=$(mktemp -d)
trap 'kill $SERVER ${FAKE:-} 2>/dev/null || true; rm -rf "$DATA"' EXIT
export MMC_CACHE_DIR="$TARGET_DIR/mmc-cache" MMC_LOG=warn MMC_RATE_LIMIT__PER_SECOND=0 MMC_RATE_LIMIT__PER_CLIENT_PER_SECOND=0 MMC_ADMIN__LISTEN=127.0.0.1:$((PORT + 1)) MMC_ADMIN__TOKEN=adm_bench_0123456789abcdef0123456789ab

M=$("$MMC" merchants create --name Bench --data-dir "$DATA" | python3 -c 'import sys,json;print(json.load(sys.stdin)["id"])')
KEY=$("$MMC" keys create --merchant "$M" --env test --data-dir "$DATA" | python3 -c 'import sys,json;print(json.load(sys.stdin)["key"])')

start_server() {
  local t0=$(date +%s%N)
  "$MMC" serve --listen 127.0.0.1:$PORT --data-dir "${DATA_DIR:-$DATA}" --components-dir "$TARGET_DIR/components" > "$DATA/server.log" 2>&1 &
  SERVER=$!
  until curl -sf "$BASE/healthz" >/dev/null; do sleep 0.01; done
  STARTUP_MS=$(( ($(date +%s%N) - t0) / 1000000 ))
}
# Warm the compile cache once, then measure start-up with every component cached.
start_server; kill $SERVER; wait $SERVER 2>/dev/null || true
start_server

run_wrk() { # name, extra args...
  local name=$1; shift
  wrk -t2 -c"$CONNS" -d"$DURATION" --latency "$@" > "$DATA/$name.txt"
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' "$DATA/$name.txt")
  p50=$(awk '$1=="50%" {print $2}' "$DATA/$name.txt")
  p99=$(awk '$1=="99%" {print $2}' "$DATA/$name.txt")
  local non2xx=$(awk '/Non-2xx/ {print $5}' "$DATA/$name.txt")
  echo "$name|$rps|$p50|$p99|${non2xx:-0}"
}
metric_sum() { curl -s "$BASE/metrics" | awk -v n="$1" -v l="$2" 'index($0, n"{"l) == 1 {s += $2} END {printf "%.6f", s}'; }
# What a load run costs the server, read just before and just after it (work
# the run leaves for later, such as webhook fan-out, falls outside). One line:
#   CPU time, user+sys, in clock ticks (/proc/PID/stat: every thread, exited ones too);
#   context switches, voluntary+involuntary, summed over /proc/PID/task/*/status
#     (the live threads: those that exit during the run take theirs along);
#   from /metrics: component instantiations, storage rows written (committed
#     puts, deletes and outbox events of components; the host's own tables not
#     counted), components' write transactions (applied or interactive) and
#     those refused (a prepared one whose reads had changed), requests on ROUTE;
#   WAL bytes: SQLite, mmc_sqlite_wal_bytes_total (frames the writer wrote to
#     the WAL; checkpoint copies into the database file not included); with
#     PGWAL set to a PostgreSQL URL instead, the server's WAL position
#     (pg_current_wal_lsn(): everything the cluster logged, whoever wrote it).
cost() { # route, pid=url of each node
  python3 - "$@" <<'PY'
import glob, os, subprocess, sys, urllib.request
route, nodes = sys.argv[1], sys.argv[2:]
ticks = switches = inst = rows = reqs = wal = txns = refused = 0.0
for node in nodes:
    pid, url = node.split("=", 1)
    stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    ticks += int(stat[11]) + int(stat[12])  # utime, stime (fields 14 and 15)
    for status in glob.glob(f"/proc/{pid}/task/*/status"):
        try:
            for line in open(status):
                if line.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    switches += int(line.split()[1])
        except OSError:
            pass  # the thread exited meanwhile
    for line in urllib.request.urlopen(f"{url}/metrics").read().decode().splitlines():
        name, _, value = line.rpartition(" ")
        if name.startswith("mmc_component_instantiations_total{"):
            inst += float(value)
        elif name.startswith("mmc_storage_rows_written_total{"):
            rows += float(value)
        elif name.startswith("mmc_storage_transactions_total{"):
            if 'kind="refused"' in name:
                refused += float(value)
            else:
                txns += float(value)
        elif name.startswith(f'mmc_http_requests_total{{route="{route}",'):
            reqs += float(value)
        elif name == "mmc_sqlite_wal_bytes_total":
            wal += float(value)
if os.environ.get("PGWAL"):
    q = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')"
    wal = float(subprocess.run(["psql", os.environ["PGWAL"], "-Atc", q], capture_output=True, text=True, check=True).stdout)
print(ticks, switches, inst, rows, reqs, wal, txns, refused)
PY
}
# "name|requests|CPU per request|WAL bytes|rows written|instantiations|context switches|write transactions (refused)" (each per request)
per_request() { # name, cost before, cost after
  python3 - "$@" <<'PY'
import os, sys
name, a, b = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
ticks, switches, inst, rows, reqs, wal, txns, refused = (float(y) - float(x) for x, y in zip(a, b))
n = max(reqs, 1)
cpu_ms = 1000 * ticks / os.sysconf("SC_CLK_TCK") / n
print(f"{name}|{reqs:.0f}|{cpu_ms:.3f} ms|{wal / n:.0f}|{rows / n:.2f}|{inst / n:.2f}|{switches / n:.1f}|{txns / n:.2f} ({refused / n:.2f})")
PY
}

# Request latency as the server times it (its handler's start to the response
# head: without the time a request waits to be read, or its answer to be read
# by wrk): "count sum n(<=10ms) n(<=25ms) n(<=50ms)" for ROUTE, from /metrics.
served() {
  curl -s "$BASE/metrics" | awk -v r="route=\"$1\"" '
    function is(n) { return index($0, "mmc_http_request_duration_seconds_" n) == 1 }
    is("count{" r "}") {c = $2} is("sum{" r "}") {s = $2}
    is("bucket{" r ",le=\"0.01\"}") {a = $2} is("bucket{" r ",le=\"0.025\"}") {b = $2}
    is("bucket{" r ",le=\"0.05\"}") {d = $2}
    END {print c+0, s+0, a+0, b+0, d+0}'
}
served_line() { # before, after: "mean; share over 10 / 25 / 50 ms"
  python3 - "$@" <<'PY'
import sys
c, s, a, b, d = (float(y) - float(x) for x, y in zip(sys.argv[1].split(), sys.argv[2].split()))
n = max(c, 1)
print(f"mean {1000 * s / n:.1f} ms; over 10 ms {100 * (1 - a / n):.1f}%, over 25 ms {100 * (1 - b / n):.2f}%, over 50 ms {100 * (1 - d / n):.2f}%")
PY
}

AUTH=(-H "Authorization: Bearer $KEY")
HEALTH=$(run_wrk healthz "$BASE/healthz")
W0=$(metric_sum mmc_component_call_duration_seconds_sum "component=\"collect\"")
R0=$(metric_sum mmc_http_request_duration_seconds_sum "route=\"collect\"")
C0=$(cost collect "$SERVER=$BASE"); S0=$(served collect)
CREATE=$(run_wrk create "${AUTH[@]}" -s bench/create.lua "$BASE")
C1=$(cost collect "$SERVER=$BASE"); S1=$(served collect)
W1=$(metric_sum mmc_component_call_duration_seconds_sum "component=\"collect\"")
R1=$(metric_sum mmc_http_request_duration_seconds_sum "route=\"collect\"")
WASM_SHARE=$(python3 -c "print(f'{100*($W1-$W0)/max($R1-$R0,1e-9):.0f}%')")
ID=$(curl -s "${AUTH[@]}" -H "Idempotency-Key: $(python3 -c 'import uuid;print(uuid.uuid4())')" -H 'Content-Type: application/json' \
  -d '{"reference":"bench-get","amount":1500,"currency":"XOF","country":"BJ","operator":"mtn-bj","customer":{"phone":"+2290166000001"}}' \
  "$BASE/api/v1/collect/payments" | python3 -c 'import sys,json;print(json.load(sys.stdin)["id"])')
wait_quiet
GET=$(run_wrk get "${AUTH[@]}" "$BASE/api/v1/collect/payments/$ID")
wait_quiet
L0=$(cost legacy "$SERVER=$BASE")
LEGACY=$(run_wrk legacy "${AUTH[@]}" -s bench/legacy.lua "$BASE")
L1=$(cost legacy "$SERVER=$BASE")
# Routing on (three candidate routes for the creates' operator: the first
# healthy, the others judged every time) against the fixed route, alternated
# F R F R F R F, each run ROUTED_DURATION after the server went quiet: each
# routed run is compared with the mean of the fixed runs on either side of it,
# so a drift of the VM's speed falls on both; the figure is the median of the
# three ratios. One 10-second pair moved by ±5% from run to run on this VM.
ADMIN_API="http://127.0.0.1:$((PORT + 1))/admin/v1/routes"
ROUTED_DURATION=${BENCH_ROUTED_DURATION:-5s}
routes_on() {
  curl -sf -X PUT -H "Authorization: Bearer $MMC_ADMIN__TOKEN" "$ADMIN_API/test/mtn-bj" \
    -d '{"routes": ["simulator", "momo", "pawapay"], "note": "bench: three candidates"}' >/dev/null
}
routes_off() { curl -sf -X POST -H "Authorization: Bearer $MMC_ADMIN__TOKEN" "$ADMIN_API/rollback" >/dev/null; }
alternate() { # name: one create run of ROUTED_DURATION after the server went quiet
  wait_quiet
  DURATION=$ROUTED_DURATION run_wrk "$1" "${AUTH[@]}" -s bench/create.lua "$BASE"
}
FIXED_RUNS=("$(alternate create-fixed-0)")
ROUTED_RUNS=()
for i in 1 2 3; do
  routes_on; ROUTED_RUNS+=("$(alternate create-routed-$i)")
  routes_off; FIXED_RUNS+=("$(alternate create-fixed-$i)")
done
# "median ratio|each ratio|routed req/s (median)|fixed req/s (mean)"
ROUTED_RATIO=$(python3 - "${FIXED_RUNS[@]}" "${ROUTED_RUNS[@]}" <<'PY2'
import statistics, sys
rate = lambda row: float(row.split('|')[1])
fixed, routed = [rate(r) for r in sys.argv[1:5]], [rate(r) for r in sys.argv[5:8]]
ratios = [r / ((fixed[i] + fixed[i + 1]) / 2) for i, r in enumerate(routed)]
print(f"{statistics.median(ratios):.3f}|{', '.join(f'{x:.3f}' for x in ratios)}|{statistics.median(routed):.0f}|{statistics.mean(fixed):.0f}")
PY2
)
ROUTED=${ROUTED_RUNS[1]}
CREATE2=${FIXED_RUNS[3]}
STORED=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute(\"SELECT COUNT(*) FROM kv WHERE ns='collect' AND tbl='payments'\").fetchone()[0])" "$DATA/mmc.db")

# Hot swap: a new simulator version (same code, one custom section more), compiled and swapped in.
python3 - "$TARGET_DIR/components/simulator.wasm" "$DATA/sim-v2.wasm" <<'PY'
import sys, os
b = open(sys.argv[1], "rb").read()
tag = os.urandom(8).hex().encode()
name = b"mmc-version"
payload = bytes([len(name)]) + name + tag
open(sys.argv[2], "wb").write(b + bytes([0, len(payload)]) + payload)
PY
t0=$(date +%s%N)
"$MMC" adapters deploy simulator "$DATA/sim-v2.wasm" --server "http://127.0.0.1:$((PORT + 1))" --token "$MMC_ADMIN__TOKEN" >/dev/null
SWAP_MS=$(( ($(date +%s%N) - t0) / 1000000 ))

RSS_KB=$(awk '/VmRSS/ {print $2}' /proc/$SERVER/status)
kill $SERVER; wait $SERVER 2>/dev/null || true

# Creates through a live adapter: Rust (`wave`, for wave-ci) against Python
# (`cinetpay`, for orange-ci), the same shape of protocol (a hosted page the
# customer pays on), each operator call answered by bench/fake_operator.py on
# this machine. A server of its own, whose components are the built ones and
# the Python adapter (compiled at its first start, then read from the cache);
# ADAPTER_CONNS connections, each run after the server went quiet.
ADAPTER_CONNS=${BENCH_ADAPTER_CONNECTIONS:-16}
FAKE_PORT=$((PORT + 30))
python3 bench/fake_operator.py "$FAKE_PORT" & FAKE=$!
LIVE_DIR="$DATA/adapters"; mkdir -p "$LIVE_DIR/components"
cp "$TARGET_DIR"/components/*.wasm "$TARGET_DIR/python-components/cinetpay.wasm" "$LIVE_DIR/components/"
cat > "$LIVE_DIR/mmc.toml" <<TOML
# Room for an idle Python instance per call at once and per status round:
# past it, an instance is dropped and the next begins CPython again.
[limits]
warm_instances = 32

[components.wave]
allowed_hosts = ["127.0.0.1:$FAKE_PORT"]
settings = { base_url = "http://127.0.0.1:$FAKE_PORT" }
secrets = { api_key = "wave_sn_bench", webhook_secret = "wave_sn_whsec" }

[components.cinetpay]
allowed_hosts = ["127.0.0.1:$FAKE_PORT"]
settings = { base_url = "http://127.0.0.1:$FAKE_PORT", site_id = "105890" }
secrets = { api_key = "cp_bench", secret_key = "cp_secret" }
calls_per_instance = 1000

[routing.live]
"wave-ci" = "wave"
"orange-ci" = "cinetpay"
TOML
M4=$("$MMC" merchants create --name Adapters --data-dir "$LIVE_DIR" | json_field id)
LIVE_KEY=$("$MMC" keys create --merchant "$M4" --env live --data-dir "$LIVE_DIR" | json_field key)
export MMC_CONFIG="$LIVE_DIR/mmc.toml"
serve_fresh "$MMC" "$LIVE_DIR" "$LIVE_DIR/components" "$PORT"
unset MMC_CONFIG
adapter_creates() { # name, operator, phone: "name|req/s|p50|p99|non-2xx"
  wait_quiet
  CONNS=$ADAPTER_CONNS run_wrk "$1" -H "Authorization: Bearer $LIVE_KEY" -s bench/create.lua "$BASE" -- 0 "$2" CI "$3"
}
VIA_RUST=$(adapter_creates create-wave wave-ci +2250700000001)
VIA_PYTHON=$(adapter_creates create-cinetpay orange-ci +2250700000001)
kill $SERVER $FAKE; wait $SERVER $FAKE 2>/dev/null || true

# The console under abuse, on a server of its own: creates at
# ABUSE_CONNS connections alone (idle), then the same while
# bench/console_abuse.py sends 500 bad sign-ins and 500 slow anonymous
# 1 MiB uploads at once from 200 loopback addresses (each sign-in for an
# email of its own, so every one would reach the password check but for
# its bound). Resident memory: before the abuse, and its peak during it,
# sampled every 50 ms. Targets: growth ≤ 64 MiB; create p99 ≤ 3× idle.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
ABUSE="$DATA/abuse"; mkdir -p "$ABUSE"
ABUSE_CONNS=${BENCH_ABUSE_CONNECTIONS:-16}
ABUSE_KEY=$(bench_key "$MMC" "$ABUSE")
DATA_DIR="$ABUSE" start_server
first_payment "$BASE" "$ABUSE_KEY" abuse-warm >/dev/null
wait_quiet
ABUSE_IDLE=$(CONNS=$ABUSE_CONNS run_wrk create-idle -H "Authorization: Bearer $ABUSE_KEY" -s bench/create.lua "$BASE")
wait_quiet
ABUSE_RSS0=$(awk '/VmRSS/ {print $2}' /proc/$SERVER/status)
password_checks() { curl -s "$BASE/metrics" | awk '$1 == "mmc_console_password_checks_total" {print $2}'; }
ABUSE_CHECKS0=$(password_checks)
ABUSE_SECONDS=$(( ${DURATION%s} + 4 ))
python3 bench/console_abuse.py "$BASE" "$SERVER" 500 500 "$ABUSE_SECONDS" > "$DATA/abuse.txt" & ABUSER=$!
sleep 2 # the abuse at full strength before the creates start
ABUSE_LOADED=$(CONNS=$ABUSE_CONNS run_wrk create-abused -H "Authorization: Bearer $ABUSE_KEY" -s bench/create.lua "$BASE")
wait $ABUSER
ABUSE_CHECKS=$(( $(password_checks) - ABUSE_CHECKS0 ))
IFS='|' read -r ABUSE_PEAK ABUSE_SIGN_INS ABUSE_UPLOADS < "$DATA/abuse.txt"
kill $SERVER; wait $SERVER 2>/dev/null || true
ABUSE_GROWTH=$(( (ABUSE_PEAK - ABUSE_RSS0) / 1024 ))
ABUSE_P99_RATIO=$(python3 -c "
import re, sys
ms = lambda v: (lambda n, u: float(n) * {'us': 1e-3, 'ms': 1, 's': 1e3}[u])(*re.match(r'([\d.]+)(\w+)', v).groups())
print(f\"{ms('$ABUSE_LOADED'.split('|')[3]) / ms('$ABUSE_IDLE'.split('|')[3]):.2f}\")")

# GET and list latency against store size, in a store of its own: 10,000
# payments, then 1,000,000 (seeded as collect writes them: binary records,
# UUIDv7 ids in creation order, 10 ms apart from T0).
READS="$DATA/reads"; mkdir -p "$READS"
M2=$("$MMC" merchants create --name Reads --data-dir "$READS" | python3 -c 'import sys,json;print(json.load(sys.stdin)["id"])')
KEY2=$("$MMC" keys create --merchant "$M2" --env test --data-dir "$READS" | python3 -c 'import sys,json;print(json.load(sys.stdin)["key"])')
ID2=$(python3 bench/seed.py "$READS/mmc.db" "$M2" 10000)
"$MMC" console rebuild-overview --data-dir "$READS" >/dev/null # the overview's tallies of the seeded payments
# A support person of that merchant, signed in to the console once.
LINK=$("$MMC" users create --merchant "$M2" --email support@reads.bj --role support --data-dir "$READS" | python3 -c 'import sys,json;print(json.load(sys.stdin)["sign_in_link"])')
DATA_DIR="$READS" start_server
CONSOLE_COOKIE=$(python3 bench/console_session.py "$BASE" "$LINK")
kill $SERVER; wait $SERVER 2>/dev/null || true
# A page of 10 from the middle of the first 10,000 (created 50 s after T0):
# the same page in both stores, found through a larger index in the second.
LIST_QUERY="limit=10&created%5Bgte%5D=$((1780272000 + 50))"
console_p50() { # path: p50 of a console page, as the signed-in support person
  # The median of three 3-second runs: a page answered in about a
  # millisecond moves by a few hundred microseconds from run to run.
  for _ in 1 2 3; do
    wrk -t2 -c16 -d3s --latency -H "Cookie: $CONSOLE_COOKIE" "$BASE$1" | awk '$1=="50%" {print $2}'
  done | python3 -c "
import re, sys
ms = sorted(float(v) * {'us': 1e-3, 'ms': 1, 's': 1e3}[u]
            for v, u in (re.match(r'([\d.]+)(\w+)', l).groups() for l in sys.stdin if l.strip()))
print(f'{ms[len(ms) // 2]:.2f}ms')"
}
reads_p50() { # prints "get p50|list p50|filtered list p50|console: list|reference|failed|payment|overview"
  DATA_DIR="$READS" start_server
  local get list failed c_list c_ref c_search c_failed c_payment c_overview
  get=$(wrk -t2 -c16 -d5s --latency -H "Authorization: Bearer $KEY2" "$BASE/api/v1/collect/payments/$ID2" | awk '$1=="50%" {print $2}')
  list=$(wrk -t2 -c16 -d5s --latency -H "Authorization: Bearer $KEY2" "$BASE/api/v1/collect/payments?$LIST_QUERY" | awk '$1=="50%" {print $2}')
  # The newest failed payments (one in ten), through the listing index.
  failed=$(wrk -t2 -c16 -d5s --latency -H "Authorization: Bearer $KEY2" "$BASE/api/v1/collect/payments?limit=10&status=failed&country=BJ" | awk '$1=="50%" {print $2}')
  # The console's pages a support desk lives in: the newest payments, one
  # found by its reference, the failed ones, a payment's page; and the overview.
  c_list=$(console_p50 /console/payments)
  c_ref=$(console_p50 "/console/payments?reference=seed-5000")
  # The search box: the start of a reference in another case, matching the
  # same payment in both stores (made through the API before the first run).
  c_search=$(console_p50 "/console/payments?q=FACTURE-AWA")
  c_failed=$(console_p50 "/console/payments?status=failed")
  c_payment=$(console_p50 "/console/payments/$ID2")
  c_overview=$(console_p50 /console/overview)
  kill $SERVER; wait $SERVER 2>/dev/null || true
  echo "$get|$list|$failed|$c_list|$c_ref|$c_search|$c_failed|$c_payment|$c_overview"
}
# A seeded record collect cannot read would make every GET below a quick 500.
DATA_DIR="$READS" start_server
SEEDED=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KEY2" "$BASE/api/v1/collect/payments/$ID2")
# The payment the search box finds, the same one in both stores.
curl -s -o /dev/null -H "Authorization: Bearer $KEY2" -H "Idempotency-Key: bench-facture-awa" -H 'Content-Type: application/json' \
  -d '{"reference":"Facture-Awa-2026-001","amount":1500,"currency":"XOF","country":"BJ","mode":"direct","operator":"mtn-bj","customer":{"phone":"+2290166009999"}}' \
  "$BASE/api/v1/collect/payments"
kill $SERVER; wait $SERVER 2>/dev/null || true
[ "$SEEDED" = 200 ] || { echo "a seeded payment answered $SEEDED: bench/seed.py and collect's record form disagree" >&2; exit 1; }
IFS='|' read -r small small_list small_failed sc_list sc_ref sc_search sc_failed sc_payment sc_overview <<<"$(reads_p50)"
python3 bench/seed.py "$READS/mmc.db" "$M2" 990000 10000 >/dev/null
"$MMC" console rebuild-overview --data-dir "$READS" >/dev/null
IFS='|' read -r large large_list large_failed lc_list lc_ref lc_search lc_failed lc_payment lc_overview <<<"$(reads_p50)"
# wrk prints latencies with their unit (850.00us, 1.09ms).
ms() { python3 -c "import re,sys; v,u=re.match(r'([\d.]+)(\w+)',sys.argv[1]).groups(); print(float(v)*{'us':1e-3,'ms':1,'s':1e3}[u])" "$1"; }
LIST_RATIO=$(python3 -c "print(f'{$(ms "$large_list")/$(ms "$small_list"):.2f}')")
FAILED_RATIO=$(python3 -c "print(f'{$(ms "$large_failed")/$(ms "$small_failed"):.2f}')")
times() { python3 -c "print(f'{$(ms "$2")/$(ms "$1"):.2f}')"; } # small, large: the ratio
console_line() { # label, small, large
  echo "| $1 | $2 | $3 | ×$(times "$2" "$3") |"
}

# PostgreSQL, in the same run: one node, then two nodes on one database (two
# wrk processes, one per node, half the connections each; req/s summed).
# The stores seeded above leave gigabytes of dirty pages: written back first,
# so that the kernel's writeback does not share the disk with the commits
# measured (SQLite's creates, at the start, found the disk as quiet).
sync
PGURL=$(./scripts/test-postgres.sh)
PGSERVERS=()
pg_node() { # port, data dir: a node on $MMC_STORAGE__URL
  MMC_ADMIN__LISTEN=127.0.0.1:0 "$MMC" serve --listen 127.0.0.1:$1 --data-dir "$2" --components-dir "$TARGET_DIR/components" > "$2.log" 2>&1 &
  PGSERVERS+=($!)
  until curl -sf "http://127.0.0.1:$1/healthz" >/dev/null; do sleep 0.01; done
}
pg_stop() { kill "${PGSERVERS[@]}" 2>/dev/null || true; wait "${PGSERVERS[@]}" 2>/dev/null || true; PGSERVERS=(); }
pg_wrk() { # name, connections, urls... (one wrk per URL, in parallel): "name|req/s|p50|p99|non-2xx"
  local name=$1 conns=$2; shift 2
  local i=0 pids=()
  for url in "$@"; do
    wrk -t1 -c"$conns" -d"$DURATION" --latency "${PGWRK[@]}" "$url" -- "$i" > "$DATA/$name.$i.txt" & pids+=($!)
    i=$((i + 1))
  done
  wait "${pids[@]}"
  python3 - "$name" "$DATA/$name".*.txt <<'PY'
import re, sys
name, files = sys.argv[1], sys.argv[2:]
def ms(v):
    n, u = re.match(r'([\d.]+)(\w+)', v).groups()
    return float(n) * {'us': 1e-3, 'ms': 1, 's': 1e3}[u]
rps = p50 = p99 = 0.0; bad = 0
for f in files:
    t = open(f).read()
    rps += float(re.search(r'Requests/sec:\s+([\d.]+)', t).group(1))
    p50 = max(p50, ms(re.search(r'\n\s+50%\s+(\S+)', t).group(1)))
    p99 = max(p99, ms(re.search(r'\n\s+99%\s+(\S+)', t).group(1)))
    m = re.search(r'Non-2xx or 3xx responses: (\d+)', t); bad += int(m.group(1)) if m else 0
print(f"{name}|{rps:.2f}|{p50:.2f}ms|{p99:.2f}ms|{bad}")
PY
}
pg_lock_waits() { # database, seconds: "backends waiting on any lock|on an advisory lock", averaged
  # over samples of pg_stat_activity every 10 ms (one backend, one transaction:
  # its statistics snapshot cleared before each sample).
  psql "$PGURL" -qAt -v ON_ERROR_STOP=1 2>&1 >/dev/null -c "DO \$\$
    DECLARE n int := 0; locks bigint := 0; advisory bigint := 0; w bigint; a bigint;
    BEGIN
      WHILE n < $2 * 100 LOOP
        PERFORM pg_stat_clear_snapshot();
        SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'),
               count(*) FILTER (WHERE wait_event_type = 'Lock' AND wait_event = 'advisory')
          INTO w, a FROM pg_stat_activity WHERE datname = '$1';
        locks := locks + w; advisory := advisory + a; n := n + 1;
        PERFORM pg_sleep(0.01);
      END LOOP;
      RAISE NOTICE 'waits|%|%', round(locks::numeric / n, 2), round(advisory::numeric / n, 2);
    END \$\$" | sed -n 's/.*waits|//p'
}
pg_db_side() { # database: "cpu ticks of every postgres process|commits|rows changed" so far
  # Unquoted: one PID a word.
  echo "$(cpu_ticks $(pgrep -x postgres))|$(psql "$PGURL" -qAt -c "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted FROM pg_stat_database WHERE datname = '$1'" | tr '|' ' ' | awk '{print $1 "|" $2}')"
}
pg_db_per_create() { # before, after, creates: "db CPU ms|commits|rows" per create
  python3 - "$@" <<'PY'
import os, sys
a, b, n = sys.argv[1].split('|'), sys.argv[2].split('|'), max(float(sys.argv[3]), 1)
d = [float(y) - float(x) for x, y in zip(a, b)]
print(f"{1000 * d[0] / os.sysconf('SC_CLK_TCK') / n:.3f} ms|{d[1] / n:.2f}|{d[2] / n:.2f}")
PY
}
pg_round() { # nodes: "creates|gets" rows for 1 or 2 nodes on a fresh database
  local n=$1 ports=() urls=()
  export MMC_STORAGE__URL; MMC_STORAGE__URL=$(fresh_database "$PGURL" "mmc_bench_$n")
  export MMC_WEBHOOKS__SECRETS_KEY=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
  local m k
  m=$("$MMC" merchants create --name Bench --data-dir "$DATA/pg" | python3 -c 'import sys,json;print(json.load(sys.stdin)["id"])')
  k=$("$MMC" keys create --merchant "$m" --env test --data-dir "$DATA/pg" | python3 -c 'import sys,json;print(json.load(sys.stdin)["key"])')
  for i in $(seq "$n"); do ports+=($((PORT + 10 + i))); pg_node "${ports[-1]}" "$DATA/pg-$n-$i"; urls+=("http://127.0.0.1:${ports[-1]}"); done
  PGWRK=(-H "Authorization: Bearer $k" -s bench/create.lua)
  local nodes=() i; for i in "${!urls[@]}"; do nodes+=("${PGSERVERS[$i]}=${urls[$i]}"); done
  local c0 c1 d0 d1; c0=$(PGWAL=$PGURL cost collect "${nodes[@]}"); d0=$(pg_db_side "mmc_bench_$n")
  pg_lock_waits "mmc_bench_$n" "${DURATION%s}" > "$DATA/pg-locks-$n.txt" & local sampler=$!
  local create; create=$(pg_wrk "pg-create-$n" $((CONNS / n)) "${urls[@]}")
  c1=$(PGWAL=$PGURL cost collect "${nodes[@]}"); d1=$(pg_db_side "mmc_bench_$n")
  wait "$sampler"
  local id; id=$(curl -s -H "Authorization: Bearer $k" -H "Idempotency-Key: $(python3 -c 'import uuid;print(uuid.uuid4())')" -H 'Content-Type: application/json' \
    -d '{"reference":"bench-get","amount":1500,"currency":"XOF","country":"BJ","operator":"mtn-bj","customer":{"phone":"+2290166000001"}}' \
    "${urls[0]}/api/v1/collect/payments" | python3 -c 'import sys,json;print(json.load(sys.stdin)["id"])')
  # As for SQLite: the reconciliation backlog of the creates is not charged to
  # the reads (right after a burst, reads on PostgreSQL stall: docs/benchmarks.md).
  QUIET_PERCENT=$QUIET_PERCENT_POSTGRES wait_quiet "${PGSERVERS[@]}"
  PGWRK=(-H "Authorization: Bearer $k")
  local gets=() u; for u in "${urls[@]}"; do gets+=("$u/api/v1/collect/payments/$id"); done
  local get; get=$(pg_wrk "pg-get-$n" $((CONNS / n)) "${gets[@]}")
  pg_stop
  unset MMC_STORAGE__URL MMC_WEBHOOKS__SECRETS_KEY
  local cost; cost=$(per_request "pg-create-$n" "$c0" "$c1")
  echo "$create;$get;$cost;$(cat "$DATA/pg-locks-$n.txt");$(pg_db_per_create "$d0" "$d1" "$(echo "$cost" | cut -d'|' -f2)")"
}
IFS=';' read -r PG_CREATE_1 PG_GET_1 PG_COST_1 PG_LOCKS_1 PG_DB_1 <<<"$(pg_round 1)"
IFS=';' read -r PG_CREATE_2 PG_GET_2 PG_COST_2 PG_LOCKS_2 PG_DB_2 <<<"$(pg_round 2)"
lock_line() { # nodes, "create row", "waiting|advisory": the waits and what they come to per create
  python3 - "$@" <<'PY'
import sys
nodes, row, waits = sys.argv[1], sys.argv[2], sys.argv[3]
rps = float(row.split('|')[1])
w, a = (float(x) for x in waits.split('|'))
# Backends waiting on average × 1,000 ms per second / creates per second.
print(f"{nodes}: {w:.2f} backends waiting on a lock on average ({a:.2f} on an advisory lock), "
      f"{w * 1000 / rps:.2f} ms of lock wait per create ({a * 1000 / rps:.2f} ms advisory)")
PY
}
drop_database "$PGURL" mmc_bench_1; drop_database "$PGURL" mmc_bench_2

# The books at scale: one account-day of 1,000,000 records, on each engine.
kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true
BOOKS=$(./bench/books.sh)
COMPARED=$(./bench/crates_compared.sh)
# What traces cost: creates with traces on against off (bench/traces.sh).
TRACES=$(./bench/traces.sh)

ratio() { python3 -c "a=float('$1'.split('|')[1]); b=float('$2'.split('|')[1]); print(f'{a/b:.3f}')"; }
{
  echo "Machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB; wrk -t2 -c$CONNS -d$DURATION; bench-release build (whole-program LTO); SQLite WAL, every acknowledged commit fsynced (group commit)"
  echo
  echo "| Endpoint | req/s | p50 | p99 | non-2xx |"
  echo "|---|---|---|---|---|"
  for row in "$HEALTH" "$CREATE" "$GET" "$LEGACY" "$ROUTED" "$CREATE2"; do IFS='|' read -r n r a b e <<<"$row"; echo "| $n | $r | $a | $b | $e |"; done
  echo
  echo "PostgreSQL ($(psql "$PGURL" -Atc 'SHOW server_version'), same machine, synchronous_commit on), one node and two nodes on one database (one wrk per node, $((CONNS / 2)) connections each for two):"
  echo
  echo "| Endpoint | req/s | p50 | p99 | non-2xx |"
  echo "|---|---|---|---|---|"
  for row in "$PG_CREATE_1" "$PG_GET_1" "$PG_CREATE_2" "$PG_GET_2"; do IFS='|' read -r n r a b e <<<"$row"; echo "| $n | $r | $a | $b | $e |"; done
  echo
  echo "- lock waits during the PostgreSQL creates (pg_stat_activity sampled every 10 ms): $(lock_line "one node" "$PG_CREATE_1" "$PG_LOCKS_1"); $(lock_line "two nodes" "$PG_CREATE_2" "$PG_LOCKS_2")"
  IFS='|' read -r db1_cpu db1_tx db1_rows <<<"$PG_DB_1"; IFS='|' read -r db2_cpu db2_tx db2_rows <<<"$PG_DB_2"
  echo "- the database's side of a PostgreSQL create (every postgres process's CPU on this machine; pg_stat_database's commits and rows changed in the bench's database): one node $db1_cpu of CPU, $db1_tx commits, $db1_rows rows; two nodes $db2_cpu, $db2_tx, $db2_rows"
  echo "- PostgreSQL / SQLite creates: $(ratio "$PG_CREATE_1" "$CREATE") (target ≥ 0.5); two nodes / one: $(ratio "$PG_CREATE_2" "$PG_CREATE_1") (target ≥ 1.7); gets: $(ratio "$PG_GET_1" "$GET") (target ≥ 0.5)"
  echo
  echo "Per create, over each create run (requests counted by the server; CPU and context switches of the mmc process, both nodes summed for two; WAL: SQLite, bytes its writer wrote to the WAL, checkpoints not included; PostgreSQL, the cluster's WAL position difference; rows: puts, deletes and outbox events components committed, the host's own tables not counted; write transactions: components' applied and interactive ones, in brackets those refused and decided again):"
  echo
  echo "| Run | creates | server CPU | WAL bytes | rows written | component instantiations | context switches | write transactions (refused) |"
  echo "|---|---|---|---|---|---|---|---|"
  for row in "$(per_request create "$C0" "$C1")" "$(per_request legacy "$L0" "$L1")" "$PG_COST_1" "$PG_COST_2"; do
    IFS='|' read -r n c u w r i s t <<<"$row"; echo "| $n | $c | $u | $w | $r | $i | $s | $t |"
  done
  echo
  echo "- create/healthz: $(ratio "$CREATE" "$HEALTH"); get/healthz: $(ratio "$GET" "$HEALTH"); legacy create/create: $(ratio "$LEGACY" "$CREATE")"
  IFS='|' read -r rr_median rr_each rr_routed rr_fixed <<<"$ROUTED_RATIO"
  echo "- routing on (three candidate routes) / fixed route, creates, alternated runs of $ROUTED_DURATION (F R F R F R F, each routed run against the fixed runs on either side): median $rr_median (each: $rr_each; routed ${rr_routed}/s, fixed ${rr_fixed}/s; target ≥ 0.95)"
  echo "- creates as the server timed them (handler start to response head; wrk's p50/p99 above add the waits to be read and answered): $(served_line "$S0" "$S1")"
  echo "- share of create request time inside component calls (instantiate + Wasm + the storage commits and adapter call they make): $WASM_SHARE"
  echo "- start-up with all components cached: ${STARTUP_MS} ms; hot swap of an adapter (upload, compile, smoke test, swap): ${SWAP_MS} ms"
  echo "- GET p50 (16 connections) with 10,000 payments stored: $small; with 1,000,000: $large; server RSS after the load phases ($STORED payments created): $((RSS_KB / 1024)) MiB"
  echo "- list p50 (a page of 10 from created[gte], 16 connections) with 10,000 payments stored: $small_list; with 1,000,000: $large_list (×$LIST_RATIO; target ≤ 1.5)"
  echo "- filtered list p50 (\`status=failed&country=BJ\`, newest 10 of one in ten, from the listing index) with 10,000 payments stored: $small_failed; with 1,000,000: $large_failed (×$FAILED_RATIO; target ≤ 1.5)"
  echo
  echo "Console pages, p50 at 16 connections as a signed-in support person (target ≤ ×1.5):"
  echo
  echo "| Console page | 10,000 payments stored | 1,000,000 | ratio |"
  echo "|---|---|---|---|"
  console_line "payments, newest first" "$sc_list" "$lc_list"
  console_line "payments found by reference" "$sc_ref" "$lc_ref"
  console_line "payments found by the search box (start of a reference)" "$sc_search" "$lc_search"
  console_line "failed payments" "$sc_failed" "$lc_failed"
  console_line "a payment's page" "$sc_payment" "$lc_payment"
  console_line "overview" "$sc_overview" "$lc_overview"
  echo
  echo "Creates through a live adapter, $ADAPTER_CONNS connections, each operator call answered by bench/fake_operator.py on this machine (Rust: \`wave\` for wave-ci; Python: \`cinetpay\` for orange-ci, \`calls_per_instance = 1000\`, \`limits.warm_instances = 32\`; a hosted page each):"
  echo
  echo "| Endpoint | req/s | p50 | p99 | non-2xx |"
  echo "|---|---|---|---|---|"
  for row in "$VIA_RUST" "$VIA_PYTHON"; do IFS='|' read -r n r a b e <<<"$row"; echo "| $n | $r | $a | $b | $e |"; done
  echo
  echo "- creates through the Python adapter / through the Rust one: $(ratio "$VIA_PYTHON" "$VIA_RUST")"
  echo
  echo "The console under abuse (500 bad sign-ins and 500 slow anonymous 1 MiB uploads at once, from 200 loopback addresses; creates at $ABUSE_CONNS connections; targets: memory growth ≤ 64 MiB, create p99 ≤ 3× idle):"
  echo
  echo "| Endpoint | req/s | p50 | p99 | non-2xx |"
  echo "|---|---|---|---|---|"
  for row in "$ABUSE_IDLE" "$ABUSE_LOADED"; do IFS='|' read -r n r a b e <<<"$row"; echo "| $n | $r | $a | $b | $e |"; done
  echo
  echo "- resident memory: $((ABUSE_RSS0 / 1024)) MiB before, peak $((ABUSE_PEAK / 1024)) MiB during the abuse (growth $ABUSE_GROWTH MiB); create p99 under abuse / idle: ×$ABUSE_P99_RATIO"
  echo "- answers: sign-ins $ABUSE_SIGN_INS; uploads $ABUSE_UPLOADS; passwords checked: $ABUSE_CHECKS"
  echo
  IFS='|' read -r tr_off tr_on tr_ratio tr_off_cpu tr_on_cpu <<<"$TRACES"
  echo "Traces (bench/traces.sh, bench/ab.sh alternating, creates): off $tr_off/s ($tr_off_cpu µs CPU each), on with every span sent over OTLP/HTTP to a local sink $tr_on/s ($tr_on_cpu µs); on/off $tr_ratio (target ≥ 0.9)"
  echo
  echo "The books at scale (bench/books.sh): one account-day of test payments through the simulator and as many movements in its statement, seeded, reconciled by one run (targets: ≤ 60 s, resident memory growth ≤ 128 MiB):"
  echo
  echo "| Engine | records | run | RSS before | peak | growth | matched |"
  echo "|---|---|---|---|---|---|---|"
  while IFS='|' read -r e n t r p g m; do echo "| $e | $n | $t s | $r MiB | $p MiB | $g MiB | $m |"; done <<<"$BOOKS"
  echo
  echo "The host's rate limiter and metrics beside governor and prometheus-client (bench/crates_compared.sh, release build, one thread):"
  echo
  while IFS='|' read -r what json; do echo "- $what: \`$json\`"; done <<<"$COMPARED"
} | tee bench/results/latest.md
