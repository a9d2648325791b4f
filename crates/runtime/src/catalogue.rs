//! The operators catalogue: what the adapters routed to serve each operator
//! say of it, per environment, in the order merchants read it. With several
//! routes to an operator, it shows what they offer together: the widest
//! limits, and the best status among them as this node can use them now (a
//! route whose circuit is open, or that answers slowly, counts as
//! `delayed`). Only a provider says `closed`; a lone route's own status
//! stands whatever its circuit says, as it is used whatever its circuit says.

use super::*;
use mmc_routing::State;

impl Runtime {
    /// One operator of [`Runtime::catalogue`].
    pub fn operator_info(&self, environment: &str, slug: &str) -> Option<OperatorInfo> {
        let routes = self.routes();
        self.merged(environment, slug, routes.default_routes(environment, slug))
    }

    /// The operators of an environment, as their routes describe them.
    pub fn catalogue(&self, environment: &str) -> Vec<OperatorInfo> {
        let routes = self.routes();
        let mut slugs: Vec<String> = Vec::new();
        for (key, candidates) in routes.entries(environment) {
            if key != "*" {
                slugs.push(key.to_string());
                continue;
            }
            for c in candidates {
                for op in self.get(c.adapter()).iter().flat_map(|a| &a.operators) {
                    slugs.push(op.slug.clone());
                }
            }
        }
        slugs.sort();
        slugs.dedup();
        let mut ops: Vec<OperatorInfo> = slugs
            .iter()
            .filter_map(|slug| self.operator_info(environment, slug))
            .collect();
        ops.sort_by_key(|o| (country_rank(&o.country), o.slug.clone()));
        ops
    }

    /// What the loaded routes of `slug` describe, together (None when none does).
    fn merged(
        &self,
        environment: &str,
        slug: &str,
        candidates: &[mmc_config::Candidate],
    ) -> Option<OperatorInfo> {
        let mut merged: Option<OperatorInfo> = None;
        let several = candidates.len() > 1;
        for c in candidates {
            let Some(adapter) = self.serving(c.adapter(), slug) else {
                continue;
            };
            let Some(info) = adapter.operators.iter().find(|o| o.slug == slug) else {
                continue;
            };
            let status = if several {
                self.status_now(environment, c.adapter(), info)
            } else {
                &info.status
            };
            match &mut merged {
                None => {
                    merged = Some(OperatorInfo {
                        status: status.to_string(),
                        ..info.clone()
                    });
                }
                Some(m) => {
                    if rank(status) < rank(&m.status) {
                        m.status = status.to_string();
                    }
                    m.min_amount = m.min_amount.min(info.min_amount);
                    m.max_amount = m.max_amount.max(info.max_amount);
                    for mode in &info.modes {
                        if !m.modes.contains(mode) {
                            m.modes.push(mode.clone());
                        }
                    }
                }
            }
        }
        merged
    }

    /// A route's status as this node can use it: its provider's word,
    /// lowered by what was observed.
    fn status_now<'a>(&self, environment: &str, adapter: &str, info: &'a OperatorInfo) -> &'a str {
        if info.status == "closed" {
            return &info.status;
        }
        let key = (
            environment.to_string(),
            adapter.to_string(),
            info.slug.clone(),
        );
        match self
            .health
            .summary(&key, mmc_common::clock::system_now_ms())
            .state
        {
            State::Open { .. } | State::Slow => "delayed",
            State::Healthy => &info.status,
        }
    }
}

/// Best first.
fn rank(status: &str) -> u8 {
    match status {
        "operational" => 0,
        "delayed" => 1,
        _ => 2,
    }
}

fn country_rank(code: &str) -> usize {
    ["BJ", "TG", "CI"]
        .iter()
        .position(|c| *c == code)
        .unwrap_or(usize::MAX)
}
