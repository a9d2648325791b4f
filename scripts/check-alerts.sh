#!/usr/bin/env bash
# The alert rules (deploy/prometheus/alerts.yml, and slo.yml as `mmc slo rules`
# generates it from the default objectives): promtool's syntax check, their
# unit tests (*.test.yml), and every `runbook:` naming a section that
# docs/monitoring.md has (GitHub's heading anchors). The test suite checks
# that slo.yml is what the generator writes (tests/api/monitoring.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
promtool check rules deploy/prometheus/alerts.yml deploy/prometheus/slo.yml
promtool test rules deploy/prometheus/alerts.test.yml deploy/prometheus/slo.test.yml
python3 - deploy/prometheus/alerts.yml deploy/prometheus/slo.yml docs/monitoring.md <<'PY'
import re, sys
rules = open(sys.argv[1]).read() + open(sys.argv[2]).read()
doc = open(sys.argv[3]).read()
def anchor(heading):
    a = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return a.replace(" ", "-")
anchors = {anchor(h) for h in re.findall(r"^#+ (.+)$", doc, re.M)}
wanted = set(re.findall(r"runbook: docs/monitoring\.md#([\w-]+)", rules))
missing = sorted(wanted - anchors)
if missing:
    sys.exit(f"check-alerts: runbook sections missing from docs/monitoring.md: {', '.join(missing)}")
print(f"check-alerts: {len(wanted)} runbook sections found")
PY
