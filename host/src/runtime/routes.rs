//! The routes in force and the adapters serving them: which adapter an
//! operation goes to, and the route a new one takes.

use super::*;

impl Runtime {
    /// `/metrics`: the counters, then the routes' health.
    pub fn render_metrics(&self) -> String {
        let mut out = self.services.metrics.render();
        self.health.render(&mut out, crate::clock::system_now_ms());
        out
    }

    /// The routes in force.
    pub fn routes(&self) -> Arc<crate::routing::RouteTable> {
        self.routes.read().clone()
    }

    /// Puts `table` in force: operations from now on are routed by it (those
    /// already sent stay on their routes).
    pub fn set_routes(&self, table: crate::routing::RouteTable) {
        *self.routes.write() = Arc::new(table);
    }

    /// The operator's first route in `environment`: the first adapter its
    /// entry (else the environment's `*`) lists that is loaded and
    /// describes the slug.
    pub fn adapter_for(&self, environment: &str, operator: &str) -> Option<Arc<Loaded>> {
        let routes = self.routes();
        routes
            .default_routes(environment, operator)
            .iter()
            .find_map(|c| self.serving(c.adapter(), operator))
    }

    /// Adapter `name`, if it is loaded and describes `operator`.
    pub fn serving(&self, name: &str, operator: &str) -> Option<Arc<Loaded>> {
        let loaded = self.get(name)?;
        (loaded.kind == Kind::Adapter && loaded.operators.iter().any(|o| o.slug == operator))
            .then_some(loaded)
    }

    /// The adapter a call about an operation goes to: the route it was sent
    /// through (`via`), else the operator's first route.
    pub fn adapter_via(
        &self,
        environment: &str,
        operator: &str,
        via: Option<&str>,
    ) -> Option<Arc<Loaded>> {
        match via {
            Some(name) => self.serving(name, operator),
            None => self.adapter_for(environment, operator),
        }
    }

    /// The route a new operation takes now, explained (see [`crate::routing`]).
    pub fn choose_route(
        &self,
        ask: &crate::routing::Ask,
    ) -> Result<crate::routing::Choice, serde_json::Value> {
        let offer = |adapter: &str| {
            let loaded = self.serving(adapter, ask.operator)?;
            let info = loaded.operators.iter().find(|o| o.slug == ask.operator)?;
            Some(crate::routing::Offer {
                status: info.status.clone(),
                min_amount: info.min_amount,
                max_amount: info.max_amount,
            })
        };
        let now = crate::clock::system_now_ms();
        self.routes().choose(&self.health, ask, offer, now)
    }
}
