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
. bench/lib.sh # serve_for_profile
PHASE=${1:-create}
serve_for_profile "$PHASE"
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
