#!/usr/bin/env bash
# The alert rules (deploy/prometheus/alerts.yml): promtool's syntax check, its
# unit tests (alerts.test.yml), and every `runbook:` naming a section that
# docs/monitoring.md has (GitHub's heading anchors).
set -euo pipefail
cd "$(dirname "$0")/.."
rules=deploy/prometheus/alerts.yml
promtool check rules "$rules"
promtool test rules deploy/prometheus/alerts.test.yml
python3 - "$rules" docs/monitoring.md <<'PY'
import re, sys
rules, doc = open(sys.argv[1]).read(), open(sys.argv[2]).read()
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
