//! `[monitoring]`: what the node samples for `/metrics`, the service-level
//! objectives its burn-rate alerts are generated from (`mmc slo rules`,
//! see the host's `slo` module), and where its traces go.

use serde::{Deserialize, Serialize};

/// Operator requests take the network's time: seconds, not milliseconds: the
/// buckets of their latency histograms. A latency objective's threshold must
/// be one of these.
pub const OPERATOR_BUCKETS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 15.0, 30.0, 60.0,
];

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MonitoringConfig {
    /// How often the store's backlogs (outbox, webhook deliveries, API key
    /// ages) are sampled for `/metrics` (ms).
    pub backlog_sample_ms: u64,
    pub objectives: ObjectivesConfig,
    pub traces: TracesConfig,
}

impl Default for MonitoringConfig {
    fn default() -> Self {
        MonitoringConfig {
            backlog_sample_ms: 15_000,
            objectives: ObjectivesConfig::default(),
            traces: TracesConfig::default(),
        }
    }
}

/// Objectives on the requests that start a payment (`initiate`), per
/// operator and provider (adapter): each pair is judged on its own.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ObjectivesConfig {
    /// The environments whose traffic counts (the sandbox's does not, by default).
    pub environments: Vec<String>,
    /// The period an error budget is spent over (days).
    pub window_days: u32,
    /// What every operator and provider is held to…
    pub default: Objective,
    /// …unless its operator has objectives of its own:
    /// `[[monitoring.objectives.operators]] operator = "mtn-bj", success = 0.999`.
    pub operators: Vec<OperatorObjective>,
}

impl Default for ObjectivesConfig {
    fn default() -> Self {
        ObjectivesConfig {
            environments: vec!["live".into()],
            window_days: 30,
            default: Objective::default(),
            operators: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Objective {
    /// The share of requests the operator answers (whatever it answers:
    /// a refusal is an answer; a timeout, a 5xx or garbage is not).
    pub success: f64,
    /// A request answered within this many seconds is fast enough; one of
    /// the buckets of `mmc_operator_request_duration_seconds`.
    pub latency_seconds: f64,
    /// The share of requests that must be fast enough.
    pub latency_share: f64,
}

impl Default for Objective {
    fn default() -> Self {
        Objective {
            success: 0.995,
            latency_seconds: 5.0,
            latency_share: 0.99,
        }
    }
}

/// An operator's own objectives; what it leaves out is the default's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OperatorObjective {
    pub operator: String,
    pub success: Option<f64>,
    pub latency_seconds: Option<f64>,
    pub latency_share: Option<f64>,
}

impl ObjectivesConfig {
    /// `operator`'s objective: its own fields over the default's.
    pub fn resolve(&self, o: &OperatorObjective) -> Objective {
        Objective {
            success: o.success.unwrap_or(self.default.success),
            latency_seconds: o.latency_seconds.unwrap_or(self.default.latency_seconds),
            latency_share: o.latency_share.unwrap_or(self.default.latency_share),
        }
    }

    pub fn check(&self) -> Result<(), String> {
        if self.window_days == 0 {
            return Err("monitoring.objectives.window_days must be positive".into());
        }
        if self.environments.is_empty()
            || self.environments.iter().any(|e| e != "live" && e != "test")
        {
            return Err(
                "monitoring.objectives.environments lists live and/or test, at least one".into(),
            );
        }
        let mut seen = Vec::new();
        for o in &self.operators {
            let Some(op) = mmc_domain::operators::find(&o.operator) else {
                return Err(format!(
                    "monitoring.objectives.operators: unknown operator {:?}",
                    o.operator
                ));
            };
            if op.slug != o.operator {
                return Err(format!(
                    "monitoring.objectives.operators: write the operator's slug {:?}, not {:?}",
                    op.slug, o.operator
                ));
            }
            if seen.contains(&op.slug) {
                return Err(format!(
                    "monitoring.objectives.operators: {} is listed twice",
                    op.slug
                ));
            }
            seen.push(op.slug);
            check_objective(&self.resolve(o), &format!("operator {}", op.slug))?;
        }
        check_objective(&self.default, "default")
    }
}

fn check_objective(o: &Objective, what: &str) -> Result<(), String> {
    let share = |v: f64| v > 0.0 && v < 1.0;
    if !share(o.success) || !share(o.latency_share) {
        return Err(format!(
            "monitoring.objectives ({what}): success and latency_share are shares strictly between 0 and 1"
        ));
    }
    if !OPERATOR_BUCKETS.contains(&o.latency_seconds) {
        return Err(format!(
            "monitoring.objectives ({what}): latency_seconds {} is not a bucket of mmc_operator_request_duration_seconds ({})",
            o.latency_seconds,
            OPERATOR_BUCKETS.map(|b| b.to_string()).join(", ")
        ));
    }
    Ok(())
}

/// OpenTelemetry traces, off unless an endpoint is given.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TracesConfig {
    /// An OTLP/HTTP collector's base URL (`http://127.0.0.1:4318`); spans
    /// go to `<endpoint>/v1/traces`. Unset: no spans are made.
    pub otlp_endpoint: Option<String>,
    /// `http/protobuf` (the default) or `http/json`, as OTLP names them.
    pub protocol: String,
    /// The share of traces started here that are kept (a trace a caller
    /// started follows the caller's choice, from its `traceparent`).
    pub sample_ratio: f64,
    /// `service.name` of the spans.
    pub service_name: String,
}

impl Default for TracesConfig {
    fn default() -> Self {
        TracesConfig {
            otlp_endpoint: None,
            protocol: "http/protobuf".into(),
            sample_ratio: 1.0,
            service_name: "mmc".into(),
        }
    }
}

impl TracesConfig {
    pub fn check(&self) -> Result<(), String> {
        if !matches!(self.protocol.as_str(), "http/protobuf" | "http/json") {
            return Err(format!(
                "monitoring.traces.protocol is http/protobuf or http/json, not {:?}",
                self.protocol
            ));
        }
        if !(0.0..=1.0).contains(&self.sample_ratio) {
            return Err("monitoring.traces.sample_ratio is a share between 0 and 1".into());
        }
        if let Some(url) = &self.otlp_endpoint {
            let parsed = url::Url::parse(url)
                .map_err(|e| format!("monitoring.traces.otlp_endpoint {url:?}: {e}"))?;
            if !matches!(parsed.scheme(), "http" | "https") {
                return Err(format!(
                    "monitoring.traces.otlp_endpoint {url:?}: an http or https URL"
                ));
            }
        }
        Ok(())
    }
}
