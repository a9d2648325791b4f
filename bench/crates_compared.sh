#!/usr/bin/env bash
# The host's own rate limiter and metrics beside the well-kept crates that
# could replace them (governor, prometheus-client), on what decides between
# them (docs/architecture.md, "Rate limits" and "Metrics"). Each line: a name
# and the JSON its example prints, built with the release profile.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}
echo "limits|$($CARGO run -q --release -p mmc-common --example limits_compared)"
echo "metrics|$($CARGO run -q --release -p mmc-metrics --example metrics_compared)"
