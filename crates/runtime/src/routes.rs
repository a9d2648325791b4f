//! The routes in force and the adapters serving them: which adapter an
//! operation goes to, and the route a new one takes.

use super::*;

impl Runtime {
    /// `/metrics`: the counters, then the routes' health.
    pub fn render_metrics(&self) -> String {
        let mut out = self.services.metrics.render();
        self.health
            .render(&mut out, mmc_common::clock::system_now_ms());
        out
    }

    /// The routes in force.
    pub fn routes(&self) -> Arc<mmc_routing::RouteTable> {
        self.routes.read().clone()
    }

    /// Puts `table` in force: operations from now on are routed by it (those
    /// already sent stay on their routes).
    pub fn set_routes(&self, table: mmc_routing::RouteTable) {
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

    /// The route a new operation takes now, explained (see [`mmc_routing`]).
    pub fn choose_route(
        self: &Arc<Self>,
        ask: &mmc_routing::Ask,
    ) -> Result<mmc_routing::Choice, mmc_routing::Refused> {
        let now = mmc_common::clock::system_now_ms();
        self.routes()
            .choose(&self.health, ask, |a| self.offer(ask, a), now)
    }

    /// Whether some route takes `ask` by what its provider describes, as
    /// [`Runtime::choose_route`] judges it, without choosing one.
    pub fn route_available(
        self: &Arc<Self>,
        ask: &mmc_routing::Ask,
    ) -> Result<(), mmc_routing::Refusal> {
        self.routes().available(ask, |a| self.offer(ask, a))
    }

    /// What `adapter` publishes of `ask`'s operator, with its float for a payout.
    fn offer(
        self: &Arc<Self>,
        ask: &mmc_routing::Ask,
        adapter: &str,
    ) -> Option<mmc_routing::Offer> {
        let loaded = self.serving(adapter, ask.operator)?;
        let info = loaded.operators.iter().find(|o| o.slug == ask.operator)?;
        let float = (ask.operation == "payout")
            .then(|| self.float(&loaded, ask.operator, &info.currency))
            .flatten();
        Some(mmc_routing::Offer {
            status: info.status.clone(),
            min_amount: info.min_amount,
            max_amount: info.max_amount,
            currency: info.currency.clone(),
            takes_mode: ask.mode.is_none_or(|m| info.modes.iter().any(|o| o == m)),
            float,
        })
    }

    /// What the rate card in force says `adapter` charges on `amount` of
    /// `operation` (`collection`, `refund`, `payout`) to `operator`, if a
    /// card applies: the fee the books expect.
    pub fn expected_fee(
        &self,
        adapter: &str,
        operator: Option<&str>,
        operation: &str,
        amount: u64,
    ) -> Option<u64> {
        mmc_books::rate_card::find(&self.rate_cards, adapter, operator, operation)
            .map(|card| card.fee(amount))
    }

    /// The wallet of adapter `loaded` that pays out to `operator` in
    /// `currency`, as its provider last stated it (see [`mmc_routing::float`]).
    pub fn float(
        self: &Arc<Self>,
        loaded: &Loaded,
        operator: &str,
        currency: &str,
    ) -> Option<mmc_routing::float::Wallet> {
        if !loaded.keeps_books() {
            return None;
        }
        let now = mmc_common::clock::system_now_ms();
        let read = || {
            let answer = self.call_books(&loaded.name, |store, b| b.call_balances(store));
            match answer {
                Ok(Some(Ok(balances))) => Some(
                    balances
                        .into_iter()
                        .filter_map(|b| {
                            mmc_routing::float::wallet(
                                b.wallet,
                                b.currency,
                                &b.available,
                                b.pays_out,
                            )
                        })
                        .collect(),
                ),
                Ok(None) => None,
                Ok(Some(Err(e))) => {
                    tracing::warn!(adapter = %loaded.name, error = ?e, "route float: the provider's balances could not be read");
                    None
                }
                Err(e) => {
                    tracing::warn!(adapter = %loaded.name, error = %e, "route float: the provider's balances could not be read");
                    None
                }
            }
        };
        self.floats.wallet_for(
            &loaded.name,
            (operator, currency),
            (now, self.float_max_age_ms),
            read,
        )
    }

    /// The wallets that would pay `needs` in `environment` (each operator's
    /// first route) and hold less than they add up to there. A wallet
    /// paying several of the operators counts their needs together.
    pub fn float_short(
        self: &Arc<Self>,
        environment: &str,
        needs: &[(String, String, u64)],
    ) -> Vec<(String, mmc_routing::float::Wallet, u64)> {
        let mut by_wallet: BTreeMap<(String, String, String), (mmc_routing::float::Wallet, u64)> =
            BTreeMap::new();
        for (operator, currency, amount) in needs {
            let Some(loaded) = self.adapter_for(environment, operator) else {
                continue;
            };
            let Some(w) = self.float(&loaded, operator, currency) else {
                continue;
            };
            let key = (loaded.name.clone(), w.name.clone(), w.currency.clone());
            by_wallet.entry(key).or_insert((w, 0)).1 += amount;
        }
        by_wallet
            .into_iter()
            .filter(|(_, (w, needed))| *needed > w.available)
            .map(|((adapter, _, _), (w, needed))| (adapter, w, needed))
            .collect()
    }
}
