//! Prometheus metrics, rendered in the text exposition format at `/metrics`.
//! Label sets are small (route names, component names, outcomes), so a map
//! behind one short lock is enough. [`slo`] turns the service-level
//! objectives into the burn-rate alerts Prometheus evaluates on these series.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

pub mod slo;

const BUCKETS: [f64; 12] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
];

pub use mmc_config::OPERATOR_BUCKETS;

#[derive(Clone)]
struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::with(&BUCKETS)
    }
}

impl Histogram {
    fn with(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    fn observe(&mut self, d: Duration) {
        let s = d.as_secs_f64();
        for (i, b) in self.bounds.iter().enumerate() {
            if s <= *b {
                self.counts[i] += 1;
            }
        }
        self.sum += s;
        self.count += 1;
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        for (i, b) in self.bounds.iter().enumerate() {
            let _ = writeln!(
                out,
                "{name}_bucket{{{labels},le=\"{b}\"}} {}",
                self.counts[i]
            );
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

// The maps a request touches are keyed by name first, so a hit borrows the
// caller's `&str` instead of allocating a key (they were ~1% of a GET).
#[derive(Default)]
struct Inner {
    /// By route, then status.
    requests: BTreeMap<String, BTreeMap<u16, u64>>,
    request_seconds: BTreeMap<String, Histogram>,
    /// By component, then outcome.
    component_calls: BTreeMap<String, BTreeMap<&'static str, u64>>,
    component_seconds: BTreeMap<String, Histogram>,
    component_events: BTreeMap<(String, String), u64>,
    adapter_calls: BTreeMap<(String, String, &'static str), u64>,
    /// By environment, operator, adapter, then reason.
    route_choices: Nested<Nested<Nested<BTreeMap<&'static str, u64>>>>,
    connections_cut: BTreeMap<&'static str, u64>,
    instantiations: BTreeMap<String, u64>,
    /// By component, then kind (put, delete, emit).
    rows_written: BTreeMap<String, BTreeMap<&'static str, u64>>,
    /// By component, then how it ended (applied, refused, interactive).
    transactions: BTreeMap<String, BTreeMap<&'static str, u64>>,
    /// Console sign-ins refused before their password was checked, by reason.
    sign_ins_refused: BTreeMap<&'static str, u64>,
    /// Reconciliation cases by account, category, then what happened
    /// (opened, closed by a later run, resolved by a person).
    reconciliation_cases: BTreeMap<(String, &'static str, &'static str), u64>,
    /// Requests that move money, by (environment, operator, adapter, operation), then outcome.
    operator_requests: BTreeMap<OperatorCall, BTreeMap<&'static str, u64>>,
    operator_seconds: BTreeMap<OperatorCall, Histogram>,
    /// Webhook delivery attempts by how they ended.
    webhook_attempts: BTreeMap<&'static str, u64>,
    /// The store's backlogs, as last sampled (sampled by the host's `backlog` job).
    backlog: Option<Backlog>,
}

/// (environment, operator, adapter, operation)
type OperatorCall = (String, String, String, &'static str);

/// What the store holds that a platform watches, sampled every few seconds
/// by one task per node (each node sees the whole store: alert on `max`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Backlog {
    /// Outbox events not yet fanned out into deliveries.
    pub outbox_lag_events: i64,
    /// Age of the oldest of them (0 when none).
    pub outbox_oldest_seconds: f64,
    /// Deliveries not yet delivered nor given up, due or waiting for a retry.
    pub webhook_pending: i64,
    /// Deliveries due now (their time has come and no node holds them).
    pub webhook_due: i64,
    /// How long the oldest due delivery has waited past its time.
    pub webhook_oldest_due_seconds: f64,
    /// Destinations with a delivery pending after failing attempts in a row.
    pub webhook_endpoints_failing: i64,
    /// The oldest API key still in use, by environment (seconds since created).
    pub api_key_oldest_seconds: Vec<(String, f64)>,
}

/// A counter with two labels, from a map by the first label's value, then the second's.
fn counter_by_two<K: std::fmt::Display>(
    out: &mut String,
    name: &str,
    help: &str,
    (first, second): (&str, &str),
    map: &BTreeMap<String, BTreeMap<K, u64>>,
) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (a, by) in map {
        for (b, n) in by {
            let _ = writeln!(out, "{name}{{{first}=\"{a}\",{second}=\"{b}\"}} {n}");
        }
    }
}

type Nested<V> = BTreeMap<String, V>;

/// The entry of `key`, allocating the key only the first time it is seen.
fn entry<'a, V: Default>(map: &'a mut BTreeMap<String, V>, key: &str) -> &'a mut V {
    if !map.contains_key(key) {
        map.insert(key.to_string(), V::default());
    }
    map.get_mut(key).expect("inserted above")
}

#[derive(Default)]
pub struct Metrics {
    inner: Mutex<Inner>,
    connections_open: AtomicI64,
    password_checks: AtomicU64,
}

impl Metrics {
    pub fn request(&self, route: &str, status: u16, elapsed: Duration) {
        let mut m = self.inner.lock();
        *entry(&mut m.requests, route).entry(status).or_default() += 1;
        entry(&mut m.request_seconds, route).observe(elapsed);
    }

    /// `outcome`: ok, trap, deadline, memory, refused.
    pub fn component_call(&self, component: &str, outcome: &'static str, elapsed: Duration) {
        let mut m = self.inner.lock();
        *entry(&mut m.component_calls, component)
            .entry(outcome)
            .or_default() += 1;
        entry(&mut m.component_seconds, component).observe(elapsed);
    }

    /// One operator call through an adapter, by how it ended (`ok`,
    /// `rejected`, `not_sent`, `timeout`, `unavailable`, `trap`…).
    pub fn adapter_call(&self, adapter: &str, operation: &str, outcome: &'static str) {
        let mut m = self.inner.lock();
        *m.adapter_calls
            .entry((adapter.to_string(), operation.to_string(), outcome))
            .or_default() += 1;
    }

    /// A route chosen for a new operation (`adapter` "none" and reason
    /// `unroutable` when none could take it); see `mmc_routing`.
    pub fn route_chosen(
        &self,
        environment: &str,
        operator: &str,
        adapter: &str,
        reason: &'static str,
    ) {
        let mut m = self.inner.lock();
        let by_op = entry(&mut m.route_choices, environment);
        let by_adapter = entry(entry(by_op, operator), adapter);
        *by_adapter.entry(reason).or_default() += 1;
    }

    /// A request that moves money (`initiate`, `refund`, `payout`) sent to an
    /// operator through an adapter, by how it ended: what service-level
    /// objectives are measured on (see [`slo`]).
    pub fn operator_request(
        &self,
        (environment, operator, adapter, operation): (&str, &str, &str, &'static str),
        outcome: &'static str,
        elapsed: Duration,
    ) {
        let key = (
            environment.to_string(),
            operator.to_string(),
            adapter.to_string(),
            operation,
        );
        let mut m = self.inner.lock();
        *m.operator_requests
            .entry(key.clone())
            .or_default()
            .entry(outcome)
            .or_default() += 1;
        m.operator_seconds
            .entry(key)
            .or_insert_with(|| Histogram::with(&OPERATOR_BUCKETS))
            .observe(elapsed);
    }

    /// A webhook delivery attempt: `delivered`, `failed` (retried later) or
    /// `given_up` (no retry left, or its endpoint is gone).
    pub fn webhook_attempt(&self, outcome: &'static str) {
        *self
            .inner
            .lock()
            .webhook_attempts
            .entry(outcome)
            .or_default() += 1;
    }

    /// The store's backlogs as just sampled.
    pub fn set_backlog(&self, backlog: Backlog) {
        self.inner.lock().backlog = Some(backlog);
    }

    /// A reconciliation case `event` (`opened`, `closed`, `resolved`) of `category` on `account`.
    pub fn reconciliation_case(&self, account: &str, category: &'static str, event: &'static str) {
        let mut m = self.inner.lock();
        *m.reconciliation_cases
            .entry((account.to_string(), category, event))
            .or_default() += 1;
    }

    /// A notable event a component counted (`log.count`).
    pub fn component_event(&self, component: &str, event: &str) {
        let mut m = self.inner.lock();
        *m.component_events
            .entry((component.to_string(), event.to_string()))
            .or_default() += 1;
    }

    /// A component instantiated in a fresh Store (one per call, except the
    /// status calls of a reconciliation worker, which share one).
    pub fn component_instantiated(&self, component: &str) {
        *entry(&mut self.inner.lock().instantiations, component) += 1;
    }

    /// Rows a component's committed storage transaction wrote: puts,
    /// deletes and outbox events, in that order.
    pub fn storage_rows_written(&self, component: &str, [puts, deletes, emits]: [u64; 3]) {
        let mut m = self.inner.lock();
        let rows = entry(&mut m.rows_written, component);
        for (kind, n) in [("put", puts), ("delete", deletes), ("emit", emits)] {
            if n > 0 {
                *rows.entry(kind).or_default() += n;
            }
        }
    }

    /// A component's write transaction: a prepared one `applied`, or
    /// `refused` because something it read had changed (the component then
    /// decides again in an `interactive` one, which holds the writer).
    pub fn storage_transaction(&self, component: &str, kind: &'static str) {
        let mut m = self.inner.lock();
        *entry(&mut m.transactions, component)
            .entry(kind)
            .or_default() += 1;
    }

    pub fn connection_opened(&self) {
        self.connections_open.fetch_add(1, Ordering::Relaxed);
    }

    pub fn connection_closed(&self) {
        self.connections_open.fetch_sub(1, Ordering::Relaxed);
    }

    /// A connection refused at accept or closed for overstaying a clock.
    pub fn connection_cut(&self, reason: &'static str) {
        *self.inner.lock().connections_cut.entry(reason).or_default() += 1;
    }

    /// A console password about to be checked (an Argon2id run).
    pub fn console_password_check(&self) {
        self.password_checks.fetch_add(1, Ordering::Relaxed);
    }

    /// A console sign-in refused before its password was checked:
    /// `throttled` (too many attempts) or `busy` (no password check free).
    pub fn console_sign_in_refused(&self, reason: &'static str) {
        *self
            .inner
            .lock()
            .sign_ins_refused
            .entry(reason)
            .or_default() += 1;
    }

    pub fn render(&self) -> String {
        let m = self.inner.lock();
        let mut out = String::new();
        let open = self.connections_open.load(Ordering::Relaxed);
        render_http(&m, open, &mut out);
        render_components(&m, &mut out);
        render_routes_and_adapters(&m, &mut out);
        render_component_costs(&m, &mut out);
        render_storage(&m, &mut out);
        let checks = self.password_checks.load(Ordering::Relaxed);
        render_console(&m, checks, &mut out);
        render_operator_requests(&m, &mut out);
        render_webhooks(&m, &mut out);
        out
    }
}

/// Requests that move money, by operator and adapter: the objectives' series.
fn render_operator_requests(m: &Inner, out: &mut String) {
    let labels = |(env, op, adapter, operation): &OperatorCall| {
        format!(
            "environment=\"{env}\",operator=\"{op}\",adapter=\"{adapter}\",operation=\"{operation}\""
        )
    };
    out.push_str("# HELP mmc_operator_requests_total Requests that move money (initiate, refund, payout) sent to an operator through an adapter, by environment, operator, adapter, operation and outcome (ok: the operator answered, whatever it said; the other outcomes as in mmc_adapter_calls_total).\n# TYPE mmc_operator_requests_total counter\n");
    for (key, by) in &m.operator_requests {
        let labels = labels(key);
        for (outcome, n) in by {
            let _ = writeln!(
                out,
                "mmc_operator_requests_total{{{labels},outcome=\"{outcome}\"}} {n}"
            );
        }
    }
    out.push_str("# HELP mmc_operator_request_duration_seconds How long requests that move money took, from the host's call into the adapter to its answer.\n# TYPE mmc_operator_request_duration_seconds histogram\n");
    for (key, h) in &m.operator_seconds {
        h.render(out, "mmc_operator_request_duration_seconds", &labels(key));
    }
}

/// Webhook attempts, and the store's backlogs as last sampled.
fn render_webhooks(m: &Inner, out: &mut String) {
    out.push_str("# HELP mmc_webhook_attempts_total Webhook delivery attempts by outcome (delivered; failed, to be retried; given_up: no retry left or the endpoint is gone).\n# TYPE mmc_webhook_attempts_total counter\n");
    for (outcome, n) in &m.webhook_attempts {
        let _ = writeln!(
            out,
            "mmc_webhook_attempts_total{{outcome=\"{outcome}\"}} {n}"
        );
    }
    out.push_str("# HELP mmc_storage_errors_total Storage requests that failed because the store could not serve them (unavailable, busy, disk or connection trouble), by who asked: the host's own tables or a component.\n# TYPE mmc_storage_errors_total counter\n");
    for (by, n) in mmc_storage::failures::counts() {
        let _ = writeln!(out, "mmc_storage_errors_total{{by=\"{by}\"}} {n}");
    }
    let Some(b) = &m.backlog else {
        return;
    };
    let gauges: [(&str, &str, f64); 6] = [
        (
            "mmc_outbox_lag_events",
            "Outbox events not yet fanned out into webhook deliveries (sampled).",
            b.outbox_lag_events as f64,
        ),
        (
            "mmc_outbox_oldest_event_age_seconds",
            "Age of the oldest outbox event not yet fanned out; 0 when none (sampled).",
            b.outbox_oldest_seconds,
        ),
        (
            "mmc_webhook_deliveries_pending",
            "Webhook deliveries neither delivered nor given up: due, in flight or waiting for a retry (sampled).",
            b.webhook_pending as f64,
        ),
        (
            "mmc_webhook_deliveries_due",
            "Webhook deliveries whose time has come and that no node holds (sampled).",
            b.webhook_due as f64,
        ),
        (
            "mmc_webhook_oldest_due_seconds",
            "How long the oldest due webhook delivery has waited past its time; 0 when none (sampled).",
            b.webhook_oldest_due_seconds,
        ),
        (
            "mmc_webhook_endpoints_failing",
            "Webhook destinations with a delivery pending after failed attempts in a row (sampled).",
            b.webhook_endpoints_failing as f64,
        ),
    ];
    for (name, help, v) in gauges {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
    }
    out.push_str("# HELP mmc_api_key_oldest_age_seconds Age of the oldest API key not revoked, by environment (sampled): keys do not expire, so rotate them on a schedule.\n# TYPE mmc_api_key_oldest_age_seconds gauge\n");
    for (env, age) in &b.api_key_oldest_seconds {
        let _ = writeln!(
            out,
            "mmc_api_key_oldest_age_seconds{{environment=\"{env}\"}} {age}"
        );
    }
}

/// The console's password checks, and the sign-ins refused without one.
fn render_console(m: &Inner, checks: u64, out: &mut String) {
    out.push_str("# HELP mmc_console_password_checks_total Console passwords checked (Argon2id runs: sign-in, password change, invitation).\n# TYPE mmc_console_password_checks_total counter\n");
    let _ = writeln!(out, "mmc_console_password_checks_total {checks}");
    out.push_str("# HELP mmc_console_sign_ins_refused_total Console sign-ins refused before their password was checked, by reason (throttled: too many attempts for the account or the client; busy: no password check free).\n# TYPE mmc_console_sign_ins_refused_total counter\n");
    for (reason, n) in &m.sign_ins_refused {
        let _ = writeln!(
            out,
            "mmc_console_sign_ins_refused_total{{reason=\"{reason}\"}} {n}"
        );
    }
}

/// Connections and HTTP requests.
fn render_http(m: &Inner, open: i64, out: &mut String) {
    out.push_str("# HELP mmc_connections_open Open client connections (both listeners).\n# TYPE mmc_connections_open gauge\n");
    let _ = writeln!(out, "mmc_connections_open {}", open);
    out.push_str("# HELP mmc_connections_cut_total Connections refused at accept (caps) or closed (header, body or idle timeout).\n# TYPE mmc_connections_cut_total counter\n");
    for (reason, n) in &m.connections_cut {
        let _ = writeln!(out, "mmc_connections_cut_total{{reason=\"{reason}\"}} {n}");
    }
    counter_by_two(
        out,
        "mmc_http_requests_total",
        "HTTP requests by route and status.",
        ("route", "status"),
        &m.requests,
    );
    out.push_str("# HELP mmc_http_request_duration_seconds HTTP request latency by route.\n# TYPE mmc_http_request_duration_seconds histogram\n");
    for (route, h) in &m.request_seconds {
        h.render(
            out,
            "mmc_http_request_duration_seconds",
            &format!("route=\"{route}\""),
        );
    }
}

/// Calls into components by outcome, and those that trapped.
fn render_components(m: &Inner, out: &mut String) {
    out.push_str("# HELP mmc_component_calls_total Calls into Wasm components by outcome (ok, trap, deadline, memory).\n# TYPE mmc_component_calls_total counter\n");
    let calls = || {
        m.component_calls
            .iter()
            .flat_map(|(c, o)| o.iter().map(move |(o, n)| (c, *o, n)))
    };
    for (c, outcome, n) in calls() {
        let _ = writeln!(
            out,
            "mmc_component_calls_total{{component=\"{c}\",outcome=\"{outcome}\"}} {n}"
        );
    }
    out.push_str("# HELP mmc_component_traps_total Component calls that trapped, hit their deadline or their memory cap.\n# TYPE mmc_component_traps_total counter\n");
    for (c, outcome, n) in calls().filter(|(_, o, _)| matches!(*o, "trap" | "deadline" | "memory"))
    {
        let _ = writeln!(
            out,
            "mmc_component_traps_total{{component=\"{c}\",kind=\"{outcome}\"}} {n}"
        );
    }
}

/// Routes chosen, and the operator calls made through adapters.
fn render_routes_and_adapters(m: &Inner, out: &mut String) {
    out.push_str("# HELP mmc_route_choices_total Routes chosen for new operations, by environment, operator, adapter and reason (preferred, next, failover, weighted, trial, slow, last_resort; adapter none and reason unroutable when no route could take it).\n# TYPE mmc_route_choices_total counter\n");
    for (env, by_op) in &m.route_choices {
        for (op, by_adapter) in by_op {
            for (adapter, by_reason) in by_adapter {
                for (reason, n) in by_reason {
                    let _ = writeln!(
                        out,
                        "mmc_route_choices_total{{environment=\"{env}\",operator=\"{op}\",adapter=\"{adapter}\",reason=\"{reason}\"}} {n}"
                    );
                }
            }
        }
    }
    out.push_str("# HELP mmc_adapter_calls_total Operator calls by adapter, operation and outcome (rejected and not_sent: refused because of us or never sent; paced: a status query not sent, over the provider cap).\n# TYPE mmc_adapter_calls_total counter\n");
    for ((a, op, outcome), n) in &m.adapter_calls {
        let _ = writeln!(
            out,
            "mmc_adapter_calls_total{{adapter=\"{a}\",operation=\"{op}\",outcome=\"{outcome}\"}} {n}"
        );
    }
}

/// What components counted, how long their calls took, their instances.
fn render_component_costs(m: &Inner, out: &mut String) {
    out.push_str("# HELP mmc_reconciliation_cases_total Reconciliation cases by provider account and category: opened, closed by a later run that matched, resolved by a person.\n# TYPE mmc_reconciliation_cases_total counter\n");
    for ((account, category, event), n) in &m.reconciliation_cases {
        let _ = writeln!(
            out,
            "mmc_reconciliation_cases_total{{account=\"{account}\",category=\"{category}\",event=\"{event}\"}} {n}"
        );
    }
    out.push_str("# HELP mmc_component_events_total Notable events counted by components (refused state moves, late successes).\n# TYPE mmc_component_events_total counter\n");
    for ((c, event), n) in &m.component_events {
        let _ = writeln!(
            out,
            "mmc_component_events_total{{component=\"{c}\",event=\"{event}\"}} {n}"
        );
    }
    out.push_str("# HELP mmc_component_call_duration_seconds Duration of component calls (instantiate + call).\n# TYPE mmc_component_call_duration_seconds histogram\n");
    for (c, h) in &m.component_seconds {
        h.render(
            out,
            "mmc_component_call_duration_seconds",
            &format!("component=\"{c}\""),
        );
    }
    out.push_str("# HELP mmc_component_instantiations_total Component instances created (every call instantiates its component in a fresh Store, except a reconciliation worker's status calls, which share one).\n# TYPE mmc_component_instantiations_total counter\n");
    for (c, n) in &m.instantiations {
        let _ = writeln!(
            out,
            "mmc_component_instantiations_total{{component=\"{c}\"}} {n}"
        );
    }
}

/// What components wrote through the storage capability, and the WAL.
fn render_storage(m: &Inner, out: &mut String) {
    counter_by_two(
        out,
        "mmc_storage_rows_written_total",
        "Rows components wrote through the storage capability in committed transactions (put, delete, emit: an outbox row); the host's own tables are not counted.",
        ("component", "kind"),
        &m.rows_written,
    );
    counter_by_two(
        out,
        "mmc_storage_transactions_total",
        "Write transactions components made through the storage capability: prepared ones applied, or refused because what they read had changed; interactive ones begun (each holds the writer while the component runs).",
        ("component", "kind"),
        &m.transactions,
    );
    out.push_str("# HELP mmc_sqlite_wal_bytes_total Bytes the SQLite writer connections of this process wrote to the WAL (pages written × (page size + 24-byte frame header), from SQLITE_DBSTATUS_CACHE_WRITE); checkpoint copies into the database file are not included. Stays 0 on PostgreSQL.\n# TYPE mmc_sqlite_wal_bytes_total counter\n");
    let _ = writeln!(
        out,
        "mmc_sqlite_wal_bytes_total {}",
        mmc_storage_sqlite::wal_bytes_written()
    );
}

#[cfg(test)]
mod tests;
