//! The operators catalogue: what each loaded adapter says of the operators it
//! serves, per environment, in the order merchants read it.

use super::*;

impl Runtime {
    /// One operator of [`Runtime::catalogue`]: the adapter routed to serve
    /// it, if that adapter describes it (the rule `catalogue` applies).
    pub fn operator_info(&self, environment: &str, slug: &str) -> Option<OperatorInfo> {
        let adapter = self.adapter_for(environment, slug)?;
        adapter.operators.iter().find(|o| o.slug == slug).cloned()
    }

    /// The operators of an environment, as their adapters describe them.
    pub fn catalogue(&self, environment: &str) -> Vec<OperatorInfo> {
        let Some(routes) = self.routing.get(environment) else {
            return Vec::new();
        };
        let mut by_slug: BTreeMap<String, OperatorInfo> = BTreeMap::new();
        if let Some(default) = routes.get("*").and_then(|n| self.get(n)) {
            for op in &default.operators {
                by_slug.insert(op.slug.clone(), op.clone());
            }
        }
        for (slug, name) in routes.iter().filter(|(s, _)| s.as_str() != "*") {
            match self
                .get(name)
                .and_then(|a| a.operators.iter().find(|o| &o.slug == slug).cloned())
            {
                Some(op) => {
                    by_slug.insert(slug.clone(), op);
                }
                None => {
                    by_slug.remove(slug);
                }
            }
        }
        let mut ops: Vec<OperatorInfo> = by_slug.into_values().collect();
        ops.sort_by_key(|o| (country_rank(&o.country), o.slug.clone()));
        ops
    }
}

fn country_rank(code: &str) -> usize {
    ["BJ", "TG", "CI"]
        .iter()
        .position(|c| *c == code)
        .unwrap_or(usize::MAX)
}
