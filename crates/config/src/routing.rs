//! Routing settings: `[routing.<environment>]` names, per operator slug (or
//! `*` for every operator an adapter describes), the adapters that may serve
//! it; `[route_health]` tunes when a route counts as failing.
//!
//! ```toml
//! [routing.live]
//! "*" = "simulator"                    # one route
//! mtn-bj = ["momo", "pawapay"]         # in order: the next one when the first cannot
//! moov-bj = [{ adapter = "pawapay", weight = 3 }, { adapter = "fedapay", weight = 1 }]
//!
//! [routing.live.celtiis-bj]            # rules, the first that matches wins
//! routes = ["fedapay"]
//! rules = [{ operation = "payout", routes = ["pawapay", "fedapay"] },
//!          { merchant = "m_…", min_amount = 100000, routes = ["fedapay"] }]
//! ```

use serde::{Deserialize, Serialize};

/// What `routing.<environment>.<operator>` holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RouteSpec {
    /// One adapter.
    One(String),
    /// Adapters in order of preference (or a split, when weights are given).
    List(Vec<Candidate>),
    /// Rules by merchant, amount and operation, then the routes for the rest.
    Rules(RuleSet),
}

impl From<&str> for RouteSpec {
    fn from(adapter: &str) -> Self {
        RouteSpec::One(adapter.to_string())
    }
}

impl From<String> for RouteSpec {
    fn from(adapter: String) -> Self {
        RouteSpec::One(adapter)
    }
}

/// One adapter of a list: its name, or its name and its share of a split.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Candidate {
    Name(String),
    Weighted {
        adapter: String,
        #[serde(default)]
        weight: Option<u32>,
    },
}

impl Candidate {
    pub fn adapter(&self) -> &str {
        match self {
            Candidate::Name(a) | Candidate::Weighted { adapter: a, .. } => a,
        }
    }

    pub fn weight(&self) -> Option<u32> {
        match self {
            Candidate::Name(_) => None,
            Candidate::Weighted { weight, .. } => *weight,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuleSet {
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// For what no rule matches.
    pub routes: Vec<Candidate>,
}

/// Routes for the operations that match every condition given.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    #[serde(default)]
    pub merchant: Option<String>,
    /// `collection` or `payout`.
    #[serde(default)]
    pub operation: Option<String>,
    #[serde(default)]
    pub min_amount: Option<u64>,
    #[serde(default)]
    pub max_amount: Option<u64>,
    pub routes: Vec<Candidate>,
}

/// The operations a route is chosen for (a refund goes through the route
/// that collected its payment: no other provider holds that payment).
pub const OPERATIONS: [&str; 2] = ["collection", "payout"];

impl RouteSpec {
    /// As rules, then the routes for the rest (a bare list has no rules).
    pub fn normalized(&self) -> RuleSet {
        match self {
            RouteSpec::One(a) => RuleSet {
                rules: Vec::new(),
                routes: vec![Candidate::Name(a.clone())],
            },
            RouteSpec::List(list) => RuleSet {
                rules: Vec::new(),
                routes: list.clone(),
            },
            RouteSpec::Rules(set) => set.clone(),
        }
    }

    /// A configuration error, said for `routing.<environment>.<operator>`.
    pub fn check(&self, at: &str) -> Result<(), String> {
        let RuleSet { rules, routes } = self.normalized();
        check_list(&routes, at)?;
        for (i, rule) in rules.iter().enumerate() {
            let at = format!("{at}.rules[{i}]");
            check_list(&rule.routes, &at)?;
            if let Some(op) = &rule.operation
                && !OPERATIONS.contains(&op.as_str())
            {
                return Err(format!(
                    "{at}.operation is {op:?}; it must be one of {OPERATIONS:?}"
                ));
            }
            if let (Some(min), Some(max)) = (rule.min_amount, rule.max_amount)
                && min > max
            {
                return Err(format!("{at}: min_amount {min} is above max_amount {max}"));
            }
        }
        Ok(())
    }
}

fn check_list(routes: &[Candidate], at: &str) -> Result<(), String> {
    if routes.is_empty() {
        return Err(format!("{at}: a route list needs at least one adapter"));
    }
    for (i, c) in routes.iter().enumerate() {
        if routes[..i].iter().any(|o| o.adapter() == c.adapter()) {
            return Err(format!("{at}: {} is listed twice", c.adapter()));
        }
        if c.weight() == Some(0) {
            return Err(format!(
                "{at}: {} has weight 0; remove it from the list instead",
                c.adapter()
            ));
        }
    }
    let weighted = routes.iter().filter(|c| c.weight().is_some()).count();
    if weighted != 0 && weighted != routes.len() {
        return Err(format!(
            "{at}: give every adapter of a split a weight, or none"
        ));
    }
    Ok(())
}

/// When a route counts as failing, and how it comes back (a circuit breaker
/// per environment, adapter and operator, from the outcomes this node sees).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RouteHealthConfig {
    /// The outcomes looked at: the last `window` calls of the last `window_ms`.
    pub window: usize,
    pub window_ms: u64,
    /// The route opens (is skipped) when at least this many of those failed…
    pub min_failures: usize,
    /// …and they are at least this share of them, in percent.
    pub failure_percent: u32,
    /// How long an open route is skipped before a trial payment may go.
    pub open_ms: u64,
    /// While it recovers, one trial payment at most this often.
    pub trial_every_ms: u64,
    /// A route whose answers take longer than this on average is used after
    /// the healthy ones.
    pub slow_ms: u64,
    /// A route's float (what its provider's wallet holds for payouts) is
    /// read again once the last reading is older than this.
    pub float_max_age_ms: u64,
}

impl Default for RouteHealthConfig {
    fn default() -> Self {
        RouteHealthConfig {
            window: 20,
            window_ms: 60_000,
            min_failures: 5,
            failure_percent: 50,
            open_ms: 30_000,
            trial_every_ms: 5_000,
            slow_ms: 10_000,
            float_max_age_ms: 60_000,
        }
    }
}
