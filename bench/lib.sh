# Shell functions the bench scripts share (each sources this file).

# Background work a load leaves behind (reconciliation polls, webhook fan-out,
# checkpoints) must not be charged to the next measurement: wait until the
# servers (PIDs given, else $SERVER) use under QUIET_PERCENT of a core each
# (default 5%) for a second (at most 60 s). A node on PostgreSQL does not get
# that quiet for a minute after a burst of creates: its reconciliation polls
# of them, round trips to the database each, keep it at 9-16% of a core; so
# its rounds pass QUIET_PERCENT_POSTGRES.
QUIET_PERCENT_POSTGRES=15
wait_quiet() {
  local hz pids=("${@:-$SERVER}") pct=${QUIET_PERCENT:-5}; hz=$(getconf CLK_TCK)
  for _ in $(seq 60); do
    local a b; a=$(cpu_ticks "${pids[@]}"); sleep 1; b=$(cpu_ticks "${pids[@]}")
    [ $(( (b - a) * 100 )) -lt $(( hz * pct * ${#pids[@]} )) ] && return 0
  done
  # Measured anyway, and said: a non-zero status here would end a `set -e` script silently.
  echo "warning: the server was still busy after 60 s; measuring anyway" >&2
}

# The CPU time (user and system, in clock ticks) of every PID given, summed;
# a process already gone counts nothing.
cpu_ticks() {
  local p t=0
  for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done
  echo $t
}

# A fresh, empty database NAME on the PostgreSQL server at URL (its
# `postgres` database); prints the new database's URL. `drop_database`
# removes it again.
fresh_database() { # server URL, name
  PGOPTIONS="-c client_min_messages=warning" psql "$1" -qc "DROP DATABASE IF EXISTS $2 WITH (FORCE)" -c "CREATE DATABASE $2" >/dev/null
  echo "${1%/*}/$2"
}
drop_database() { # server URL, name
  psql "$1" -qc "DROP DATABASE IF EXISTS $2 WITH (FORCE)" >/dev/null 2>&1 || true
}

json_field() { python3 -c "import sys,json;print(json.load(sys.stdin)[sys.argv[1]])" "$1"; }

# Creates one payment through BASE with KEY and prints its id; retries for up
# to 30 s, since a component compiled for the first time (a cold cache) may
# still be loading. Prints nothing if none could be created.
first_payment() { # base, key, reference
  local id=
  for _ in $(seq 300); do
    id=$(curl -s -H "Authorization: Bearer $2" -H "Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)" -H 'Content-Type: application/json' \
      -d '{"reference":"'"$3"'","amount":1500,"currency":"XOF","country":"BJ","operator":"mtn-bj","customer":{"phone":"+2290166000001"}}' \
      "$1/api/v1/collect/payments" | json_field id 2>/dev/null) && break
    sleep 0.1
  done
  echo "$id"
}

# A merchant and a test key in the fresh store DATA; prints the key.
bench_key() { # binary, data dir
  local m
  m=$("$1" merchants create --name Bench --data-dir "$2" | json_field id)
  "$1" keys create --merchant "$m" --env test --data-dir "$2" | json_field key
}

# Starts BIN serving DATA on 127.0.0.1:PORT in the background (SERVER: its
# PID; its log in DATA/server.log) and waits until it answers. Fails on a
# port something already serves (a server left running would be measured
# instead) and on a server that exits before answering. SERVE_WRAP: a
# command the server runs under (bench/callgrind.sh: valgrind).
serve_fresh() { # binary, data dir, components dir, port
  local base="http://127.0.0.1:$4"
  if curl -sf "$base/healthz" >/dev/null; then
    echo "something already serves $base (a server left running?)" >&2; return 1
  fi
  # Split into words on purpose: SERVE_WRAP is a command and its options.
  ${SERVE_WRAP:-} "$1" serve --listen "127.0.0.1:$4" --data-dir "$2" --components-dir "$3" > "$2/server.log" 2>&1 &
  SERVER=$!
  until curl -sf "$base/healthz" >/dev/null; do
    kill -0 "$SERVER" 2>/dev/null || { echo "the server exited; see $2/server.log" >&2; return 1; }
    sleep 0.01
  done
}

# For the profiling scripts (profile.sh, sched.sh): a bench-release server
# (PROFILE_BIN, else the workspace's) on a fresh store, stopped on exit, with
# one payment in it; sets SERVER, DATA, BASE, OUT ($PROFILE_DIR, default
# /tmp/mmc-profile) and ARGS, wrk's arguments for PHASE (create, get, legacy
# or healthz).
serve_for_profile() { # phase
  local phase=$1 target=${CARGO_TARGET_DIR:-target} port=${PROFILE_PORT:-18399} key id
  local mmc=${PROFILE_BIN:-$target/bench-release/mmc}
  OUT=${PROFILE_DIR:-/tmp/mmc-profile}
  BASE="http://127.0.0.1:$port"
  command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
  command -v perf >/dev/null || { echo "perf is needed (apt-get install linux-perf)" >&2; exit 1; }
  mkdir -p "$OUT"
  DATA=$(mktemp -d)
  SERVER=
  trap '[ -n "$SERVER" ] && kill "$SERVER" 2>/dev/null && wait "$SERVER"; rm -rf "$DATA"' EXIT
  export MMC_CACHE_DIR="$target/mmc-cache" MMC_LOG=warn MMC_RATE_LIMIT__PER_SECOND=0 \
    MMC_RATE_LIMIT__PER_CLIENT_PER_SECOND=0 MMC_ADMIN__LISTEN=127.0.0.1:$((port + 1)) \
    MMC_ADMIN__TOKEN=adm_bench_0123456789abcdef0123456789ab
  key=$(bench_key "$mmc" "$DATA")
  serve_fresh "$mmc" "$DATA" "$target/components" "$port"
  local auth=(-H "Authorization: Bearer $key")
  id=$(first_payment "$BASE" "$key" profile)
  [ -n "$id" ] || { echo "no payment could be created; see $DATA/server.log" >&2; exit 1; }
  case $phase in
    create) ARGS=("${auth[@]}" -s bench/create.lua "$BASE") ;;
    get) ARGS=("${auth[@]}" "$BASE/api/v1/collect/payments/$id") ;;
    legacy) ARGS=("${auth[@]}" -s bench/legacy.lua "$BASE") ;;
    healthz) ARGS=("$BASE/healthz") ;;
    *) echo "unknown phase $phase (create get legacy healthz)" >&2; exit 2 ;;
  esac
}
