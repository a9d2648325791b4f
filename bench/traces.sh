#!/usr/bin/env bash
# What traces cost: creates with `monitoring.traces.otlp_endpoint` set (every
# span kept, or TRACES_SAMPLE_RATIO of the traces, sent over OTLP/HTTP to
# bench/otlp_sink.py on this machine)
# against the same binary with traces off, alternated by bench/ab.sh
# (TRACES_ROUNDS rounds, default 3). Target: on ≥ 0.9× off.
# Prints one line: "off req/s|on req/s|on/off|off CPU µs/req|on CPU µs/req".
set -euo pipefail
cd "$(dirname "$0")/.."
TARGET_DIR=${CARGO_TARGET_DIR:-target}
MMC=${MMC:-"$TARGET_DIR/bench-release/mmc"}
SINK_PORT=${TRACES_SINK_PORT:-18290}
WORK=$(mktemp -d)
python3 bench/otlp_sink.py "$SINK_PORT" & SINK=$!
trap 'kill $SINK 2>/dev/null || true; rm -rf "$WORK"' EXIT
# The traced side: the same binary, started with traces on.
cat > "$WORK/mmc-traced" <<SH
#!/usr/bin/env bash
export MMC_MONITORING__TRACES__OTLP_ENDPOINT=http://127.0.0.1:$SINK_PORT
export MMC_MONITORING__TRACES__SAMPLE_RATIO=${TRACES_SAMPLE_RATIO:-1}
exec "$(realpath "$MMC")" "\$@"
SH
chmod +x "$WORK/mmc-traced"
bench/ab.sh "$MMC" "$WORK/mmc-traced" c "${TRACES_ROUNDS:-3}" > "$WORK/ab.txt"
spans=$(curl -sf "http://127.0.0.1:$SINK_PORT/count" || echo 0)
[ "$spans" -gt 0 ] || { echo "the sink received no span: traces were not on" >&2; exit 1; }
python3 - "$WORK/ab.txt" <<'PY'
import re, sys
m = re.search(r"mean c: A (\d+) req/s, ([\d.]+) µs/req; B (\d+) req/s, ([\d.]+) µs/req", open(sys.argv[1]).read())
off, off_cpu, on, on_cpu = int(m[1]), m[2], int(m[3]), m[4]
print(f"{off}|{on}|{on / off:.3f}|{off_cpu}|{on_cpu}")
PY
