#!/usr/bin/env bash
# `bench/idle.sh [NODES] [SECONDS]`: what nodes on PostgreSQL cost with no
# request at all, the price of a fleet before its first payment. NODES
# (default 1) serve a fresh database of the test server (scripts/test-postgres.sh)
# with one payment in it; once its reconciliation is done (20 s), SECONDS
# (default 30) are measured: the nodes' CPU, every postgres process's CPU on
# this machine, the database's commits and rows changed (pg_stat_database)
# and the WAL the server wrote.
# MMC: the binary (default target/bench-release/mmc).
set -euo pipefail
cd "$(dirname "$0")/.."
source bench/lib.sh
NODES=${1:-1}
SECONDS_MEASURED=${2:-30}
TARGET_DIR=${CARGO_TARGET_DIR:-target}
MMC=${MMC:-$TARGET_DIR/bench-release/mmc}
PORT=${IDLE_PORT:-18450}
export MMC_CACHE_DIR="$TARGET_DIR/mmc-cache" MMC_LOG=warn
export MMC_WEBHOOKS__SECRETS_KEY=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
PGURL=$(./scripts/test-postgres.sh)
DB=mmc_idle
export MMC_STORAGE__URL; MMC_STORAGE__URL=$(fresh_database "$PGURL" $DB)
data=$(mktemp -d)
pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null || true
  wait "${pids[@]}" 2>/dev/null || true
  rm -rf "$data"
  drop_database "$PGURL" $DB
}
trap cleanup EXIT

key=$(bench_key "$MMC" "$data/cli")
for i in $(seq 0 $((NODES - 1))); do
  MMC_ADMIN__LISTEN=127.0.0.1:0 "$MMC" serve --listen 127.0.0.1:$((PORT + i)) --data-dir "$data/node$i" \
    --components-dir "$TARGET_DIR/components" > "$data/node$i.log" 2>&1 &
  pids+=($!)
  until curl -sf "http://127.0.0.1:$((PORT + i))/healthz" >/dev/null; do
    kill -0 "${pids[-1]}" 2>/dev/null || { cat "$data/node$i.log" >&2; exit 1; }
    sleep 0.05
  done
done
[ -n "$(first_payment "http://127.0.0.1:$PORT" "$key" idle-1)" ] || { echo "no payment created" >&2; exit 1; }
sleep 20

db_counts() { # commits, rows changed, WAL position in bytes
  psql "$PGURL" -qAt -c "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted, pg_current_wal_lsn() - '0/0'::pg_lsn FROM pg_stat_database WHERE datname = '$DB'" | tr '|' ' '
}
# Every postgres process's CPU ticks, one "pid ticks title" line each.
pg_procs() {
  local p
  for p in $(pgrep -x postgres); do
    echo "$p $(cpu_ticks "$p") $(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null)"
  done
}
read -r c0 r0 w0 <<< "$(db_counts)"
n0=$(cpu_ticks "${pids[@]}"); pg_procs > "$data/pg0"
sleep "$SECONDS_MEASURED"
n1=$(cpu_ticks "${pids[@]}"); pg_procs > "$data/pg1"
read -r c1 r1 w1 <<< "$(db_counts)"
p0=$(awk '{t += $2} END {print t + 0}' "$data/pg0"); p1=$(awk '{t += $2} END {print t + 0}' "$data/pg1")
python3 - "$NODES" "$SECONDS_MEASURED" "$((n1 - n0))" "$((p1 - p0))" "$((c1 - c0))" "$((r1 - r0))" "$(python3 -c "print(int(float('$w1') - float('$w0')))")" <<'PY'
import os, sys
nodes, secs, node_ticks, pg_ticks, commits, rows, wal = map(float, sys.argv[1:])
hz = os.sysconf('SC_CLK_TCK')
print(f"{int(nodes)} idle node(s) on PostgreSQL over {int(secs)} s: "
      f"nodes {100 * node_ticks / hz / secs:.1f}% of a core in all, "
      f"the database {100 * pg_ticks / hz / secs:.1f}%, "
      f"{commits / secs:.1f} commits/s, {rows / secs:.1f} rows changed/s, "
      f"{wal / secs / 1024:.1f} KiB of WAL/s")
PY
# Where the database's CPU went: the processes that used any, by their title.
python3 - "$data/pg0" "$data/pg1" "$SECONDS_MEASURED" "$DB" <<'PY'
import os, sys
def load(f):
    out = {}
    for line in open(f):
        pid, ticks, *title = line.split()
        out[pid] = (int(ticks), ' '.join(title))
    return out
a, b, secs, db = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
hz, groups = os.sysconf('SC_CLK_TCK'), {}
for pid, (t1, title) in b.items():
    used = t1 - a.get(pid, (0, ''))[0]
    name = f'backends of {db}' if f' {db} ' in title else title.split(':')[-1].strip().split(' ')[0] or title
    groups[name] = groups.get(name, 0) + used
print('  the database by process: ' + ', '.join(
    f'{name} {100 * t / hz / secs:.1f}%' for name, t in sorted(groups.items(), key=lambda g: -g[1]) if t))
PY
