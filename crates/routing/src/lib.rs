//! Routing across providers: which adapter takes a new operation (a
//! collection or a payout) to an operator, and why. A refund goes through
//! the route that collected its payment.
//!
//! A route is an adapter that serves the operator. `[routing]` (or the admin
//! API) lists them per operator, in order, optionally split by weight or
//! chosen by rules ([`mmc_config::RouteSpec`]). Before anything is sent,
//! each candidate is judged on what its provider publishes (`describe`:
//! status, limits) and on what this node observed ([`health`]); the first
//! that can take the operation is chosen, and the choice is explained.
//!
//! For a payout, a route's float counts as part of its health: a route
//! whose provider states that the wallet paying the operator holds less
//! than the payout is skipped, as a closed one is.
//!
//! An open circuit steers operations to another route; it does not stop the
//! only one. When every route that could take a collection is open, the
//! first is used anyway ("last resort": the customer is there now). A payout waits instead (bulk payouts are held until a route can
//! take them).
//!
//! Routing only picks where a *new* operation goes. Once an operation was
//! sent through a route, everything about it (status, cancel, callbacks,
//! its refunds) goes through that route: the payment records it.

pub mod float;
pub mod health;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Value, json};

pub use health::{Health, Observed, RouteKey, State, Summary};
use mmc_config::{Candidate, RouteSpec, RuleSet};

/// environment → (operator slug or `*`) → routes.
pub type Specs = BTreeMap<String, BTreeMap<String, RouteSpec>>;

/// The routes in force, as configured or as the admin API last set them.
pub struct RouteTable {
    specs: Specs,
    /// `specs`, each as rules and the routes for the rest.
    sets: BTreeMap<String, BTreeMap<String, RuleSet>>,
    /// Spreads a split by weight exactly, pick after pick.
    turn: AtomicU64,
}

/// An operation that needs a route.
pub struct Ask<'a> {
    pub environment: &'a str,
    pub operator: &'a str,
    pub merchant: &'a str,
    /// `collection` or `payout`.
    pub operation: &'a str,
    pub amount: u64,
    /// A collection's mode (`direct`, `hosted`), checked against what each
    /// route's provider says it takes; none: not checked.
    pub mode: Option<&'a str>,
    /// Routes already tried for it that answered that nothing was done.
    pub skip: &'a [String],
}

/// What an adapter publishes about the operator (`describe`), and, for a
/// payout, what its wallet paying that operator holds ([`float`]).
pub struct Offer {
    pub status: String,
    pub min_amount: u64,
    pub max_amount: u64,
    pub currency: String,
    /// It takes the ask's mode (or the ask has none).
    pub takes_mode: bool,
    /// None: not a payout, or its provider states no balance.
    pub float: Option<float::Wallet>,
}

/// The route chosen and why: `reason` is the label counted in the metrics,
/// `explanation` what the payment records.
#[derive(Debug, Clone)]
pub struct Choice {
    pub adapter: String,
    pub reason: &'static str,
    pub explanation: Value,
}

/// Why no route takes an operation: what every route refused, judged on
/// what its provider describes, or (`Unroutable`) that those which take it
/// cannot now.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    NotOffered,
    Closed,
    Amount {
        min: u64,
        max: u64,
        currency: String,
    },
    Mode,
    Unroutable,
}

/// A refusal and its explanation (read as the explanation: `refused["reason"]`).
#[derive(Debug, Clone)]
pub struct Refused {
    pub refusal: Refusal,
    pub explanation: Value,
}

impl std::ops::Index<&str> for Refused {
    type Output = Value;
    fn index(&self, field: &str) -> &Value {
        &self.explanation[field]
    }
}

impl RouteTable {
    pub fn new(specs: Specs) -> Self {
        let sets = specs
            .iter()
            .map(|(env, ops)| {
                let ops = ops.iter().map(|(k, s)| (k.clone(), s.normalized()));
                (env.clone(), ops.collect())
            })
            .collect();
        RouteTable {
            specs,
            sets,
            turn: AtomicU64::new(0),
        }
    }

    pub fn specs(&self) -> &Specs {
        &self.specs
    }

    /// The routes of `operator` in `environment`: its own entry, else `*`.
    fn set(&self, environment: &str, operator: &str) -> Option<(&str, &RuleSet)> {
        let routes = self.sets.get(environment)?;
        routes
            .get_key_value(operator)
            .or_else(|| routes.get_key_value("*"))
            .map(|(k, v)| (k.as_str(), v))
    }

    /// The routes for operations no rule picks out, in order: what the
    /// catalogue shows and what reads a callback that names no route.
    pub fn default_routes(&self, environment: &str, operator: &str) -> &[Candidate] {
        self.set(environment, operator)
            .map_or(&[], |(_, s)| s.routes.as_slice())
    }

    /// Every adapter a route or a rule of `environment` names.
    pub fn adapters_named(&self, environment: &str) -> std::collections::BTreeSet<String> {
        let Some(routes) = self.sets.get(environment) else {
            return Default::default();
        };
        routes
            .values()
            .flat_map(|set| {
                let ruled = set.rules.iter().flat_map(|r| r.routes.iter());
                set.routes.iter().chain(ruled)
            })
            .map(|c| c.adapter().to_string())
            .collect()
    }

    /// The environments routed.
    pub fn environments(&self) -> Vec<String> {
        self.sets.keys().cloned().collect()
    }

    /// The adapters named for `environment`: under `*` first, then per operator.
    pub fn entries(&self, environment: &str) -> Vec<(&str, &[Candidate])> {
        let Some(routes) = self.sets.get(environment) else {
            return Vec::new();
        };
        let star = routes.get("*").map(|s| ("*", s.routes.as_slice()));
        star.into_iter()
            .chain(
                routes
                    .iter()
                    .filter(|(k, _)| k.as_str() != "*")
                    .map(|(k, s)| (k.as_str(), s.routes.as_slice())),
            )
            .collect()
    }

    /// The candidates for `ask`: the first rule that matches, else the
    /// routes for the rest; with the name of what picked them.
    fn candidates(&self, ask: &Ask) -> Option<(String, &[Candidate])> {
        let (key, set) = self.set(ask.environment, ask.operator)?;
        let at = format!("routing.{}.{key}", ask.environment);
        for (i, rule) in set.rules.iter().enumerate() {
            let matches = rule.merchant.as_deref().is_none_or(|m| m == ask.merchant)
                && rule.operation.as_deref().is_none_or(|o| o == ask.operation)
                && rule.min_amount.is_none_or(|m| ask.amount >= m)
                && rule.max_amount.is_none_or(|m| ask.amount <= m);
            if matches {
                return Some((format!("{at}.rules[{i}]"), &rule.routes));
            }
        }
        Some((at, &set.routes))
    }

    /// Chooses the route for `ask`. `offer` says what an adapter publishes
    /// about the operator (None: not loaded, or it does not serve it). An
    /// error explains why none can take it.
    pub fn choose(
        &self,
        health: &Health,
        ask: &Ask,
        offer: impl Fn(&str) -> Option<Offer>,
        now_ms: u64,
    ) -> Result<Choice, Refused> {
        let Some((rule, list)) = self.candidates(ask) else {
            return Err(Refused {
                refusal: Refusal::NotOffered,
                explanation: json!({
                    "rule": null,
                    "reason": format!("no route is configured for {} in {}", ask.operator, ask.environment),
                }),
            });
        };
        let mut judged = Vec::with_capacity(list.len());
        for c in list {
            judged.push(judge(
                health,
                ask,
                c,
                offer(c.adapter()),
                &route_key(ask, c.adapter()),
                now_ms,
            ));
        }
        let pick = self.pick(health, ask, list, &judged, now_ms);
        let candidates: Vec<Value> = judged
            .iter()
            .enumerate()
            .map(|(i, j)| j.to_json(pick.is_some_and(|(p, _)| p == i)))
            .collect();
        match pick {
            Some((i, reason)) => Ok(Choice {
                adapter: judged[i].adapter.clone(),
                reason,
                explanation: json!({
                    "rule": rule,
                    "chosen": judged[i].adapter,
                    "reason": reason,
                    "candidates": candidates,
                }),
            }),
            None => Err(Refused {
                refusal: refusal(&judged),
                explanation: json!({
                    "rule": rule,
                    "reason": "no route can take it now",
                    "candidates": candidates,
                }),
            }),
        }
    }

    /// Whether some route takes `ask` by what its provider describes (open,
    /// its amount, its mode), whatever its health: for an operation whose
    /// route is chosen later.
    pub fn available(
        &self,
        ask: &Ask,
        offer: impl Fn(&str) -> Option<Offer>,
    ) -> Result<(), Refusal> {
        let Some((_, list)) = self.candidates(ask) else {
            return Err(Refusal::NotOffered);
        };
        let described: Vec<Judged> = list
            .iter()
            .map(|c| match described(ask, c, offer(c.adapter())) {
                Ok(_) => Judged {
                    adapter: c.adapter().to_string(),
                    verdict: Verdict::Usable,
                    skip: None,
                    note: String::new(),
                },
                Err(j) => j,
            })
            .collect();
        if described.iter().any(|j| j.skip.is_none()) {
            return Ok(());
        }
        Err(refusal(&described))
    }

    /// Which judged candidate takes it, and why: the first usable one (or
    /// an open one whose trial is due: that is how its recovery is
    /// noticed), else a weighted split, else a slow one, else, for a
    /// collection only, an open one as the last resort.
    fn pick(
        &self,
        health: &Health,
        ask: &Ask,
        list: &[Candidate],
        judged: &[Judged],
        now_ms: u64,
    ) -> Option<(usize, &'static str)> {
        let weighted = list.iter().any(|c| c.weight().is_some());
        let first = judged.iter().position(|j| match j.verdict {
            Verdict::Usable => !weighted,
            Verdict::Trial => health.take_trial(&route_key(ask, &j.adapter), now_ms),
            _ => false,
        });
        first
            .map(|i| {
                let why = match (judged[i].verdict, i) {
                    (Verdict::Trial, _) => "trial",
                    _ if !ask.skip.is_empty() => "failover",
                    (_, 0) => "preferred",
                    _ => "next",
                };
                (i, why)
            })
            .or_else(|| self.split(list, judged).map(|i| (i, "weighted")))
            .or_else(|| {
                let slow = judged.iter().position(|j| j.verdict == Verdict::Slow)?;
                Some((slow, "slow"))
            })
            .or_else(|| {
                let open = judged.iter().position(|j| j.verdict == Verdict::Open)?;
                (ask.operation != "payout").then_some((open, "last_resort"))
            })
    }

    /// A pick among the usable routes of a split, in proportion to their weights.
    fn split(&self, list: &[Candidate], judged: &[Judged]) -> Option<usize> {
        let usable: Vec<(usize, u64)> = judged
            .iter()
            .enumerate()
            .filter(|(_, j)| j.verdict == Verdict::Usable)
            .map(|(i, _)| (i, u64::from(list[i].weight().unwrap_or(1))))
            .collect();
        let total: u64 = usable.iter().map(|(_, w)| w).sum();
        if total == 0 {
            return None;
        }
        let mut n = self.turn.fetch_add(1, Ordering::Relaxed) % total;
        for (i, w) in usable {
            if n < w {
                return Some(i);
            }
            n -= w;
        }
        None
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Usable,
    /// Delayed at its provider, or slow here: used when nothing better is.
    Slow,
    /// Open, with a trial due.
    Trial,
    /// Open: used only when nothing else can be (see the module's docs).
    Open,
    Skipped,
}

/// Why a route was skipped.
#[derive(Debug, Clone, PartialEq)]
enum Skip {
    /// Tried for this operation: it answered that nothing was done.
    Tried,
    /// Not loaded, or it does not serve the operator.
    NotServing,
    /// What its provider describes refuses it: closed, the amount, the mode.
    Described(Refusal),
    /// Its wallet cannot cover a payout.
    Float,
}

/// What every route refused, when they all refused the same thing by what
/// their providers describe (amounts: the range they take together); else
/// that none can take it now.
fn refusal(judged: &[Judged]) -> Refusal {
    let mut refused: Option<Refusal> = None;
    for j in judged {
        let this = match &j.skip {
            Some(Skip::NotServing) => continue,
            Some(Skip::Described(r)) => r,
            // Tried, short of float, or it takes it but was not picked.
            _ => return Refusal::Unroutable,
        };
        refused = Some(match (refused, this) {
            (None, r) => r.clone(),
            (
                Some(Refusal::Amount { min, max, .. }),
                Refusal::Amount {
                    min: low,
                    max: high,
                    currency,
                },
            ) => Refusal::Amount {
                min: min.min(*low),
                max: max.max(*high),
                currency: currency.clone(),
            },
            (Some(r), same) if r == *same => r,
            _ => return Refusal::Unroutable,
        });
    }
    refused.unwrap_or(Refusal::NotOffered)
}

struct Judged {
    adapter: String,
    verdict: Verdict,
    skip: Option<Skip>,
    /// Why it was skipped, or its health.
    note: String,
}

impl Judged {
    fn to_json(&self, chosen: bool) -> Value {
        let verdict = match (chosen, self.verdict) {
            (true, _) => "chosen",
            (false, Verdict::Skipped | Verdict::Open) => "skipped",
            (false, _) => "passed over",
        };
        json!({"adapter": self.adapter, "verdict": verdict, "note": self.note})
    }
}

/// The health table's key of `adapter` for `ask`'s environment and operator.
fn route_key(ask: &Ask, adapter: &str) -> RouteKey {
    (
        ask.environment.to_string(),
        adapter.to_string(),
        ask.operator.to_string(),
    )
}

fn judge(
    health: &Health,
    ask: &Ask,
    c: &Candidate,
    offer: Option<Offer>,
    key: &RouteKey,
    now_ms: u64,
) -> Judged {
    let offer = match described(ask, c, offer) {
        Ok(offer) => offer,
        Err(skipped) => return skipped,
    };
    if let Some(w) = offer.float.as_ref().filter(|w| w.available < ask.amount) {
        return skipped(
            c,
            Skip::Float,
            format!(
                "insufficient float: its wallet {} holds {} {}, not {}",
                w.name, w.available, w.currency, ask.amount
            ),
        );
    }
    let h = health.summary(key, now_ms);
    let (verdict, note) = match h.state {
        State::Open { trial_due: false } => (
            Verdict::Open,
            format!(
                "circuit open: {} of its last {} calls failed",
                h.failures, h.calls
            ),
        ),
        State::Open { trial_due: true } => (Verdict::Trial, "recovering: a trial may go".into()),
        State::Slow => (
            Verdict::Slow,
            format!("slow: answers in {} ms on average", h.latency_ms),
        ),
        State::Healthy if offer.status == "delayed" => {
            (Verdict::Slow, "delayed, says its provider".into())
        }
        State::Healthy => (
            Verdict::Usable,
            format!(
                "healthy: {} of its last {} calls failed",
                h.failures, h.calls
            ),
        ),
    };
    Judged {
        adapter: c.adapter().to_string(),
        verdict,
        skip: None,
        note,
    }
}

fn skipped(c: &Candidate, skip: Skip, note: String) -> Judged {
    Judged {
        adapter: c.adapter().to_string(),
        verdict: Verdict::Skipped,
        skip: Some(skip),
        note,
    }
}

/// `c`'s offer when what its provider describes takes `ask` (not tried
/// yet, serving, open, its amount, its mode); else `c` skipped, and why.
fn described(ask: &Ask, c: &Candidate, offer: Option<Offer>) -> Result<Offer, Judged> {
    if ask.skip.iter().any(|s| s == c.adapter()) {
        return Err(skipped(
            c,
            Skip::Tried,
            "already tried: it answered that nothing was done".into(),
        ));
    }
    let Some(offer) = offer else {
        return Err(skipped(
            c,
            Skip::NotServing,
            format!("not loaded, or does not serve {}", ask.operator),
        ));
    };
    if offer.status == "closed" {
        let closed = Skip::Described(Refusal::Closed);
        return Err(skipped(c, closed, "closed, says its provider".into()));
    }
    if ask.amount < offer.min_amount || ask.amount > offer.max_amount {
        let note = format!(
            "takes {} to {}, not {}",
            offer.min_amount, offer.max_amount, ask.amount
        );
        let skip = Skip::Described(Refusal::Amount {
            min: offer.min_amount,
            max: offer.max_amount,
            currency: offer.currency,
        });
        return Err(skipped(c, skip, note));
    }
    if let Some(mode) = ask.mode.filter(|_| !offer.takes_mode) {
        let note = format!("does not take mode {mode}");
        return Err(skipped(c, Skip::Described(Refusal::Mode), note));
    }
    Ok(offer)
}

#[cfg(test)]
mod tests;
