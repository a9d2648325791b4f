//! What this node sees of each route (environment, adapter, operator): the
//! outcomes of its recent calls that move money (initiate, refund, payout),
//! and a circuit breaker over them. Status queries do not count: a provider
//! that answers them while it refuses every payment is not healthy.
//!
//! Closed (healthy or slow) → open when enough recent calls failed; open
//! routes are skipped, except one trial at a time once `open_ms` has passed
//! (the trickle that notices recovery): its success closes the route, its
//! failure opens it again.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;
use serde::Serialize;

use mmc_config::RouteHealthConfig;

/// One route: (environment, adapter, operator).
pub type RouteKey = (String, String, String);

/// What a call's outcome says about its route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observed {
    /// An explicit answer (whatever it said about the payment).
    Answered,
    /// Refused, not sent, or no answer (timeout, 5xx, unreadable, trap).
    Failed,
}

/// A route's state, as routing reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Healthy,
    /// Answers, but slower than `slow_ms` on average: used after the healthy ones.
    Slow,
    /// Skipped after too many failures; a trial may go when `trial_due`.
    Open {
        trial_due: bool,
    },
}

impl State {
    /// The label used in metrics and explanations.
    pub fn label(self) -> &'static str {
        match self {
            State::Healthy => "healthy",
            State::Slow => "slow",
            State::Open { trial_due: false } => "open",
            State::Open { trial_due: true } => "recovering",
        }
    }
}

/// A route's recent record, for explanations and the admin API.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub state: State,
    /// Calls looked at, and how many of them failed.
    pub calls: usize,
    pub failures: usize,
    /// Average time to an answer, in ms (0 before the first).
    pub latency_ms: u64,
    /// When the route last opened (ms since the epoch), while it is open.
    pub opened_at_ms: Option<u64>,
}

#[derive(Default)]
struct Record {
    /// (when, failed), newest last.
    recent: VecDeque<(u64, bool)>,
    latency_ms: Option<f64>,
    opened_at_ms: Option<u64>,
    last_trial_ms: Option<u64>,
}

pub struct Health {
    config: RouteHealthConfig,
    routes: Mutex<HashMap<RouteKey, Record>>,
}

impl Health {
    pub fn new(config: RouteHealthConfig) -> Self {
        Health {
            config,
            routes: Mutex::new(HashMap::new()),
        }
    }

    /// Records the outcome of one money-moving call through a route.
    pub fn record(&self, key: RouteKey, observed: Observed, elapsed_ms: f64, now_ms: u64) {
        let c = &self.config;
        let mut routes = self.routes.lock();
        let r = routes.entry(key).or_default();
        let failed = observed == Observed::Failed;
        if !failed {
            // Weighs the last ten answers or so.
            r.latency_ms = Some(match r.latency_ms {
                None => elapsed_ms,
                Some(avg) => avg * 0.9 + elapsed_ms * 0.1,
            });
        }
        if r.opened_at_ms.is_some() {
            if failed {
                r.opened_at_ms = Some(now_ms); // the trial failed: wait again
            } else {
                *r = Record {
                    latency_ms: r.latency_ms,
                    ..Record::default()
                };
            }
            return;
        }
        r.recent.push_back((now_ms, failed));
        trim(&mut r.recent, c, now_ms);
        let failures = r.recent.iter().filter(|(_, f)| *f).count();
        if failures >= c.min_failures.max(1)
            && failures * 100 >= c.failure_percent as usize * r.recent.len()
        {
            r.opened_at_ms = Some(now_ms);
        }
    }

    /// The state of a route (healthy when nothing is known of it).
    pub fn summary(&self, key: &RouteKey, now_ms: u64) -> Summary {
        let mut routes = self.routes.lock();
        match routes.get_mut(key) {
            Some(r) => {
                trim(&mut r.recent, &self.config, now_ms);
                self.summarise(r, now_ms)
            }
            None => Summary {
                state: State::Healthy,
                calls: 0,
                failures: 0,
                latency_ms: 0,
                opened_at_ms: None,
            },
        }
    }

    /// Takes the trial of an open route whose trial is due: true once per
    /// `trial_every_ms`, for the caller that will send it.
    pub fn take_trial(&self, key: &RouteKey, now_ms: u64) -> bool {
        let mut routes = self.routes.lock();
        let Some(r) = routes.get_mut(key) else {
            return false;
        };
        if self.summarise(r, now_ms).state != (State::Open { trial_due: true }) {
            return false;
        }
        r.last_trial_ms = Some(now_ms);
        true
    }

    /// Every route this node has seen, with its state.
    pub fn all(&self, now_ms: u64) -> Vec<(RouteKey, Summary)> {
        let mut routes = self.routes.lock();
        let mut out: Vec<_> = routes
            .iter_mut()
            .map(|(k, r)| {
                trim(&mut r.recent, &self.config, now_ms);
                (k.clone(), self.summarise(r, now_ms))
            })
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    fn summarise(&self, r: &Record, now_ms: u64) -> Summary {
        let c = &self.config;
        let state = match r.opened_at_ms {
            Some(at) if now_ms.saturating_sub(at) < c.open_ms => State::Open { trial_due: false },
            Some(_) => State::Open {
                trial_due: r
                    .last_trial_ms
                    .is_none_or(|t| now_ms.saturating_sub(t) >= c.trial_every_ms),
            },
            None if r.latency_ms.is_some_and(|l| l > c.slow_ms as f64) => State::Slow,
            None => State::Healthy,
        };
        Summary {
            state,
            calls: r.recent.len(),
            failures: r.recent.iter().filter(|(_, f)| *f).count(),
            latency_ms: r.latency_ms.unwrap_or(0.0).round() as u64,
            opened_at_ms: r.opened_at_ms,
        }
    }
}

impl Health {
    /// The routes' states as Prometheus gauges, appended to `out`.
    pub fn render(&self, out: &mut String, now_ms: u64) {
        use std::fmt::Write;
        let routes = self.all(now_ms);
        let labels = |(env, adapter, operator): &RouteKey| {
            format!("environment=\"{env}\",adapter=\"{adapter}\",operator=\"{operator}\"")
        };
        out.push_str("# HELP mmc_route_state A route's state on this node: 0 healthy, 1 slow, 2 recovering (a trial may go), 3 open (skipped).\n# TYPE mmc_route_state gauge\n");
        for (key, h) in &routes {
            let state = match h.state {
                State::Healthy => 0,
                State::Slow => 1,
                State::Open { trial_due: true } => 2,
                State::Open { trial_due: false } => 3,
            };
            let _ = writeln!(out, "mmc_route_state{{{}}} {state}", labels(key));
        }
        out.push_str("# HELP mmc_route_failures Failed calls among those looked at (the last window).\n# TYPE mmc_route_failures gauge\n");
        for (key, h) in &routes {
            let _ = writeln!(out, "mmc_route_failures{{{}}} {}", labels(key), h.failures);
        }
    }
}

fn trim(recent: &mut VecDeque<(u64, bool)>, c: &RouteHealthConfig, now_ms: u64) {
    while recent.len() > c.window.max(1)
        || recent
            .front()
            .is_some_and(|(at, _)| now_ms.saturating_sub(*at) > c.window_ms)
    {
        recent.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> RouteKey {
        ("live".into(), "momo".into(), "mtn-bj".into())
    }

    fn health() -> Health {
        Health::new(RouteHealthConfig {
            window: 10,
            window_ms: 60_000,
            min_failures: 3,
            failure_percent: 50,
            open_ms: 1_000,
            trial_every_ms: 500,
            slow_ms: 2_000,
            ..RouteHealthConfig::default()
        })
    }

    #[test]
    fn a_route_opens_after_enough_failures_and_only_then() {
        let h = health();
        h.record(key(), Observed::Answered, 10.0, 0);
        h.record(key(), Observed::Failed, 10.0, 1);
        h.record(key(), Observed::Failed, 10.0, 2);
        assert_eq!(
            h.summary(&key(), 3).state,
            State::Healthy,
            "2 failures of 3"
        );
        h.record(key(), Observed::Failed, 10.0, 3);
        assert_eq!(h.summary(&key(), 4).state, State::Open { trial_due: false });
    }

    #[test]
    fn failures_spread_among_many_answers_do_not_open_it() {
        let h = health();
        for i in 0..30 {
            let o = if i % 3 == 0 {
                Observed::Failed
            } else {
                Observed::Answered
            };
            h.record(key(), o, 10.0, i);
        }
        assert_eq!(h.summary(&key(), 31).state, State::Healthy);
    }

    #[test]
    fn old_failures_leave_the_window() {
        let h = health();
        for i in 0..2 {
            h.record(key(), Observed::Failed, 10.0, i);
        }
        h.record(key(), Observed::Failed, 10.0, 70_000);
        assert_eq!(h.summary(&key(), 70_001).state, State::Healthy);
        assert_eq!(h.summary(&key(), 70_001).failures, 1);
    }

    #[test]
    fn an_open_route_lets_one_trial_through_and_closes_on_its_success() {
        let h = health();
        for i in 0..3 {
            h.record(key(), Observed::Failed, 10.0, i);
        }
        assert!(!h.take_trial(&key(), 500), "not before open_ms");
        assert!(h.take_trial(&key(), 1_100));
        assert!(!h.take_trial(&key(), 1_200), "one trial at a time");
        assert_eq!(
            h.summary(&key(), 1_200).state,
            State::Open { trial_due: false }
        );
        assert!(
            h.take_trial(&key(), 1_700),
            "the next one after trial_every_ms"
        );
        h.record(key(), Observed::Answered, 10.0, 1_800);
        assert_eq!(h.summary(&key(), 1_801).state, State::Healthy);
        assert_eq!(
            h.summary(&key(), 1_801).calls,
            0,
            "a closed route starts afresh"
        );
    }

    #[test]
    fn a_failed_trial_opens_the_route_again() {
        let h = health();
        for i in 0..3 {
            h.record(key(), Observed::Failed, 10.0, i);
        }
        assert!(h.take_trial(&key(), 1_100));
        h.record(key(), Observed::Failed, 10.0, 1_150);
        assert_eq!(
            h.summary(&key(), 1_500).state,
            State::Open { trial_due: false }
        );
        assert!(h.take_trial(&key(), 2_200));
    }

    #[test]
    fn slow_answers_make_a_slow_route() {
        let h = health();
        h.record(key(), Observed::Answered, 5_000.0, 0);
        assert_eq!(h.summary(&key(), 1).state, State::Slow);
        assert_eq!(h.summary(&key(), 1).latency_ms, 5_000);
    }
}
