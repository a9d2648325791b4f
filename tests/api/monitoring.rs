//! The Grafana dashboard and the alert rules shipped name only what a running
//! server's `/metrics` exports: a metric renamed or a label dropped fails
//! here, not on a platform team's empty panel or silent alert.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::support::*;
use mmc_test_kit::service_test;

/// What `/metrics` exports: each family its `# TYPE` declares, with the
/// label names seen on its samples (a family without samples yet: none).
struct Exported {
    kinds: BTreeMap<String, String>,
    labels: BTreeMap<String, BTreeSet<String>>,
}

impl Exported {
    fn parse(text: &str) -> Exported {
        let mut kinds = BTreeMap::new();
        let mut labels: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let mut parts = rest.split_whitespace();
                if let (Some(name), Some(kind)) = (parts.next(), parts.next()) {
                    kinds.insert(name.to_string(), kind.to_string());
                }
                continue;
            }
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let family = family_of(&kinds, &line[..name_end]);
            let names = labels.entry(family).or_default();
            if line[name_end..].starts_with('{') {
                names.extend(label_names(&line[name_end + 1..]));
            }
        }
        Exported { kinds, labels }
    }
}

/// A histogram's series (`_bucket`, `_sum`, `_count`) belong to its family.
fn family_of(kinds: &BTreeMap<String, String>, series: &str) -> String {
    for suffix in ["_bucket", "_sum", "_count"] {
        if let Some(base) = series.strip_suffix(suffix)
            && kinds.get(base).is_some_and(|k| k == "histogram")
        {
            return base.to_string();
        }
    }
    series.to_string()
}

/// The label names of a sample's `a="x",b="y"}` (values may hold anything, quotes escaped).
fn label_names(mut s: &str) -> Vec<String> {
    let mut names = Vec::new();
    while let Some(eq) = s.find("=\"") {
        names.push(s[..eq].trim_start_matches(',').trim().to_string());
        let mut rest = s[eq + 2..].char_indices();
        let mut end = None;
        let mut escaped = false;
        for (i, c) in rest.by_ref() {
            match c {
                '\\' if !escaped => escaped = true,
                '"' if !escaped => {
                    end = Some(eq + 2 + i + 1);
                    break;
                }
                _ => escaped = false,
            }
        }
        let Some(end) = end else { break };
        s = &s[end..];
        if s.starts_with('}') {
            break;
        }
    }
    names
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// The metric names a PromQL expression reads (`mmc_…` and `up`), its
/// recording rules' names (with a `:`) left out.
fn metrics_in(expr: &str) -> BTreeSet<String> {
    expr.split(|c: char| !is_ident(c))
        .filter(|w| (w.starts_with("mmc_") || *w == "up") && !w.contains(':'))
        .map(str::to_string)
        .collect()
}

/// The label names a PromQL expression uses: in `{…}` matchers and in
/// `by (…)`, `without (…)`, `on (…)`, `ignoring (…)`, `group_left (…)`.
fn labels_in(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(open) = rest.find('{') {
        let close = rest[open..].find('}').map_or(rest.len(), |c| open + c);
        for matcher in rest[open + 1..close].split(',') {
            let name: String = matcher
                .trim()
                .chars()
                .take_while(|c| is_ident(*c))
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
        rest = &rest[close.min(rest.len())..];
        rest = rest.get(1..).unwrap_or("");
    }
    for clause in [
        "by",
        "without",
        "on",
        "ignoring",
        "group_left",
        "group_right",
    ] {
        let mut rest = expr;
        while let Some(at) = rest.find(clause) {
            let before_ok = at == 0 || !is_ident(rest[..at].chars().last().unwrap());
            let after = rest[at + clause.len()..].trim_start();
            if before_ok && after.starts_with('(') {
                let close = after.find(')').unwrap_or(after.len());
                for name in after[1..close].split(',') {
                    let name = name.trim();
                    if !name.is_empty() {
                        out.insert(name.to_string());
                    }
                }
            }
            rest = &rest[at + clause.len()..];
        }
    }
    out
}

/// Every `expr` of a Grafana dashboard.
fn dashboard_exprs(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                match (k.as_str(), v) {
                    ("expr", Value::String(e)) => out.push(e.clone()),
                    _ => dashboard_exprs(v, out),
                }
            }
        }
        Value::Array(a) => a.iter().for_each(|v| dashboard_exprs(v, out)),
        _ => {}
    }
}

/// Every `expr:` of a Prometheus rule file: on its line, or the indented
/// block after `expr: |`.
fn rule_exprs(yaml: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = yaml.lines().peekable();
    while let Some(line) = lines.next() {
        let Some(at) = line.find("expr:") else {
            continue;
        };
        let value = line[at + 5..].trim();
        if value != "|" {
            out.push(value.to_string());
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let mut block = String::new();
        while let Some(next) = lines.peek() {
            if next.trim().is_empty() || next.len() - next.trim_start().len() > indent {
                block.push_str(next.trim());
                block.push(' ');
                lines.next();
            } else {
                break;
            }
        }
        out.push(block);
    }
    out
}

/// Why `expr` does not hold against `exported`, if it does not; and whether
/// its labels could be checked (some metric it reads has samples).
fn check(expr: &str, exported: &Exported) -> (Vec<String>, bool) {
    let mut wrong = Vec::new();
    let metrics = metrics_in(expr);
    let mut seen = BTreeSet::new();
    let mut sampled = false;
    for m in &metrics {
        if m == "up" {
            // Prometheus's own, per scrape target.
            seen.extend(["job".to_string(), "instance".to_string()]);
            sampled = true;
            continue;
        }
        let family = family_of(&exported.kinds, m);
        match exported.kinds.get(&family) {
            None => wrong.push(format!("{m} is not exported")),
            Some(kind) => {
                if kind == "histogram" {
                    seen.insert("le".to_string());
                }
                if let Some(labels) = exported.labels.get(&family).filter(|l| !l.is_empty()) {
                    seen.extend(labels.iter().cloned());
                    sampled = true;
                }
            }
        }
    }
    // An alert on recording rules only: the rules' own expressions are checked.
    if metrics.is_empty() && !expr.contains("mmc:") {
        wrong.push("reads no metric of the service".to_string());
    }
    if sampled {
        // Added by Prometheus to every series it scrapes.
        seen.extend(["job".to_string(), "instance".to_string()]);
        for label in labels_in(expr) {
            if !seen.contains(&label) {
                wrong.push(format!("label {label} is on none of {metrics:?}"));
            }
        }
    }
    (wrong, sampled)
}

#[test]
fn the_query_reader_finds_metrics_and_labels() {
    let e = r#"sum by (adapter) (rate(mmc_adapter_calls_total{outcome=~"a|b", x!="1"}[5m])) / on (adapter) group_left up"#;
    assert_eq!(
        metrics_in(e),
        ["mmc_adapter_calls_total", "up"].map(String::from).into()
    );
    assert_eq!(
        labels_in(e),
        ["adapter", "outcome", "x"].map(String::from).into()
    );
    assert_eq!(
        label_names(r#"a="x\"}",b="y"} 1"#),
        ["a", "b"].map(String::from)
    );
    let text =
        "# TYPE mmc_h histogram\nmmc_h_bucket{le=\"1\",route=\"r\"} 1\n# TYPE mmc_c counter\n";
    let exported = Exported::parse(text);
    assert_eq!(
        exported.labels["mmc_h"],
        ["le", "route"].map(String::from).into()
    );
    let (wrong, sampled) = check("rate(mmc_c{nope=\"1\"}[1m])", &exported);
    assert!(wrong.is_empty() && !sampled, "no samples: labels unchecked");
    let (wrong, sampled) = check("sum by (routes) (rate(mmc_h_bucket[1m]))", &exported);
    assert_eq!((wrong.len(), sampled), (1, true), "{wrong:?}");
    assert!(
        check("sum by (route) (rate(mmc_h_bucket[1m]))", &exported)
            .0
            .is_empty()
    );
    assert_eq!(check("rate(mmc_gone_total[1m])", &exported).0.len(), 1);
}

#[service_test]
async fn the_dashboard_and_the_alert_rules_name_only_what_metrics_exports(app: TestApp) {
    // Traffic, so that the families a fresh server has sampled carry their
    // labels: a payment through the simulator (HTTP, component, adapter and
    // storage series), a read and a 404.
    let key = app.test_key("Monitoring");
    let (id, _) = app.create_ok(&key, &direct_payment("+2290166000001")).await;
    app.get(&key, &format!("/api/v1/collect/payments/{id}"))
        .await;
    app.get(&key, "/api/v1/collect/payments/nope").await;
    let exported = Exported::parse(&app.metrics().await);

    let dashboard: Value = serde_json::from_str(
        &std::fs::read_to_string(root().join("docs/monitoring/grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let mut panels = Vec::new();
    dashboard_exprs(&dashboard, &mut panels);
    let read = |f: &str| std::fs::read_to_string(root().join("deploy/prometheus").join(f)).unwrap();
    let rules = [
        rule_exprs(&read("alerts.yml")),
        rule_exprs(&read("slo.yml")),
    ]
    .concat();
    assert!(panels.len() >= 10, "{} dashboard queries", panels.len());
    assert!(rules.len() >= 30, "{} rule expressions", rules.len());

    let mut wrong = Vec::new();
    let mut labels_checked = 0;
    for (source, expr) in panels
        .iter()
        .map(|e| ("dashboard", e))
        .chain(rules.iter().map(|e| ("rules", e)))
    {
        let (errors, sampled) = check(expr, &exported);
        labels_checked += usize::from(sampled);
        wrong.extend(errors.into_iter().map(|e| format!("{source}: {e}: {expr}")));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Most queries read a family the traffic sampled: their labels were checked.
    assert!(
        labels_checked * 2 >= panels.len() + rules.len(),
        "labels checked in only {labels_checked} of {} queries",
        panels.len() + rules.len()
    );
}

#[test]
fn the_shipped_slo_rules_are_what_the_default_objectives_generate() {
    let shipped = std::fs::read_to_string(root().join("deploy/prometheus/slo.yml")).unwrap();
    let generated = mmc_metrics::slo::rules(&mmc_config::ObjectivesConfig::default());
    assert!(
        shipped == generated,
        "deploy/prometheus/slo.yml is stale: run `mmc slo rules > deploy/prometheus/slo.yml`"
    );
}

/// The value of the one sample `series` (name and labels as written), if exported.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

#[service_test]
async fn the_backlog_gauges_follow_an_endpoint_that_fails_then_recovers() {
    let app = spawn_app_with(|c| {
        c.monitoring.backlog_sample_ms = 100;
        c.webhooks.retry_schedule_ms = vec![50];
        c.webhooks.poll_interval_ms = 20;
    })
    .await;
    let key = app.test_key("Backlog");
    let receiver = crate::receiver::Receiver::start().await;
    receiver
        .fail_first
        .store(usize::MAX, std::sync::atomic::Ordering::SeqCst);
    let (status, endpoint) = app
        .post(
            &key,
            "/api/v1/webhook-endpoints",
            serde_json::json!({"url": receiver.url(), "enabled_events": ["collect.payment.created"]}),
        )
        .await;
    assert_eq!(status, 201, "{endpoint}");
    app.create_ok(&key, &direct_payment("+2290166000002")).await;

    let wait_for = |what: &'static str, ok: fn(&str) -> bool| {
        let app = &app;
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
            loop {
                let text = app.metrics().await;
                if ok(&text) {
                    return text;
                }
                assert!(std::time::Instant::now() < deadline, "{what}:\n{text}");
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
        }
    };
    let text = wait_for("a failing endpoint", |t| {
        sample(t, "mmc_webhook_endpoints_failing") == Some(1.0)
    })
    .await;
    assert_eq!(sample(&text, "mmc_webhook_deliveries_pending"), Some(1.0));
    assert_eq!(sample(&text, "mmc_outbox_lag_events"), Some(0.0));
    assert!(sample(&text, r#"mmc_webhook_attempts_total{outcome="failed"}"#) >= Some(3.0));
    assert!(
        sample(
            &text,
            r#"mmc_api_key_oldest_age_seconds{environment="test"}"#
        ) >= Some(0.0)
    );
    // Process-wide (other tests' servers share it): only its presence.
    assert!(sample(&text, r#"mmc_storage_errors_total{by="host"}"#).is_some());

    receiver
        .fail_first
        .store(0, std::sync::atomic::Ordering::SeqCst);
    let text = wait_for("the endpoint recovered", |t| {
        sample(t, "mmc_webhook_endpoints_failing") == Some(0.0)
            && sample(t, "mmc_webhook_deliveries_pending") == Some(0.0)
    })
    .await;
    assert_eq!(
        sample(&text, r#"mmc_webhook_attempts_total{outcome="delivered"}"#),
        Some(1.0)
    );
    assert_eq!(sample(&text, "mmc_webhook_oldest_due_seconds"), Some(0.0));
}
