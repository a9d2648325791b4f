#!/usr/bin/env bash
# The systemd unit (deploy/systemd/mmc.service): `systemd-analyze verify`
# has nothing to say of it (a misspelt key is only a warning there, so any
# output fails), and its offline security exposure is "OK" (at most 4.0).
# ExecStart points at an executable that exists here: verify checks that.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed 's|/opt/mmc/current/mmc |/bin/true |' deploy/systemd/mmc.service > "$dir/mmc.service"
out=$(systemd-analyze verify "$dir/mmc.service" 2>&1) || { echo "$out"; exit 1; }
[ -z "$out" ] || { echo "check-deploy: systemd-analyze verify: $out"; exit 1; }
exposure=$(systemd-analyze security --offline=true "$dir/mmc.service" 2>&1 |
  sed -n 's/.*Overall exposure level for mmc.service: \([0-9.]*\).*/\1/p')
[ -n "$exposure" ] || { echo "check-deploy: no exposure level from systemd-analyze security"; exit 1; }
awk -v e="$exposure" 'BEGIN { exit !(e <= 4.0) }' || { echo "check-deploy: exposure $exposure, over 4.0"; exit 1; }
echo "check-deploy: the unit verifies; security exposure $exposure"
