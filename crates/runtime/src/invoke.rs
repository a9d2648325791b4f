//! One call into a component: an instance slot, a fresh Store under the
//! component's memory cap, a deadline, and any failure turned into a
//! [`CallError`] (counted in the metrics).

use super::*;

impl Runtime {
    pub(super) fn deadline_for(&self, loaded: &Loaded) -> Duration {
        let default = match loaded.kind {
            Kind::Adapter => self.limits.adapter_deadline_ms,
            _ => self.limits.api_deadline_ms,
        };
        Duration::from_millis(loaded.config.deadline_ms.unwrap_or(default))
    }

    /// Runs `f` in a fresh Store of `loaded`, under its deadline and memory
    /// cap, and turns any failure into a [`CallError`].
    pub(super) fn invoke<R>(
        self: &Arc<Self>,
        loaded: &Loaded,
        f: impl FnOnce(&mut Store<HostState>, &Pre) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        self.invoke_waiting(loaded, None, f)
    }

    pub(super) fn invoke_waiting<R>(
        self: &Arc<Self>,
        loaded: &Loaded,
        slot_wait: Option<Duration>,
        f: impl FnOnce(&mut Store<HostState>, &Pre) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let _slot = self.enter(loaded, slot_wait)?;
        let mut store = self.new_store(loaded);
        let result = self.run(loaded, &mut store, |store| f(store, &loaded.pre));
        if store.data().open_txn {
            // A call stopped inside a transaction: dropping the Store rolls it
            // back, which waits until what it read is durable.
            inline::may_block(|| drop(store));
        }
        result
    }

    /// An instance slot for a call of `loaded`, waiting for one at most its
    /// deadline (or `slot_wait`, when shorter).
    pub(super) fn enter(
        &self,
        loaded: &Loaded,
        slot_wait: Option<Duration>,
    ) -> Result<pool::Permit<'_>, CallError> {
        // Adapters have their own slots: an API call holding one may call an adapter.
        let gate = match loaded.kind {
            Kind::Adapter => &self.adapter_slots,
            _ => &self.api_slots,
        };
        let wait = self
            .deadline_for(loaded)
            .min(
                self.limits
                    .slot_wait_ms
                    .map_or(Duration::MAX, Duration::from_millis),
            )
            .min(slot_wait.unwrap_or(Duration::MAX));
        if inline::hit() {
            // The request is moving to a blocking thread: nothing more runs here.
            return Err(CallError::InlineBudget(loaded.name.clone()));
        }
        let slot = gate
            .enter(Duration::ZERO)
            .or_else(|| inline::may_block(|| gate.enter(wait)));
        slot.ok_or_else(|| {
            let e = CallError::Busy(loaded.name.clone());
            self.services
                .metrics
                .component_call(&loaded.name, e.outcome(), Duration::ZERO);
            e
        })
    }

    /// A fresh Store for `loaded`, under its memory cap, in which the
    /// caller instantiates the component once.
    pub(super) fn new_store(self: &Arc<Self>, loaded: &Loaded) -> Store<HostState> {
        let memory =
            loaded.config.memory_mib.unwrap_or(self.limits.memory_mib) as usize * 1024 * 1024;
        let state = HostState::new(
            self.clone(),
            loaded.name.as_str().into(),
            loaded.config.clone(),
            memory,
            self.deadline_for(loaded),
        );
        let mut store = Store::new(&self.engine, state);
        self.services.metrics.component_instantiated(&loaded.name);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_callback(|mut ctx| {
            if inline::stop_for_budget() {
                return Err(wasmtime::Error::new(DeadlineExceeded));
            }
            let state = ctx.data_mut();
            if Instant::now() >= state.deadline.until {
                state.deadline.hit = true;
                return Err(wasmtime::Error::new(DeadlineExceeded));
            }
            Ok(UpdateDeadline::Continue(1))
        });
        store
    }

    /// Runs one call in `store` under a deadline of its own and turns any
    /// failure into a [`CallError`]. After a failure the Store's instance may
    /// be broken (a trap leaves it unusable): the caller drops the Store.
    pub(super) fn run<R>(
        &self,
        loaded: &Loaded,
        store: &mut Store<HostState>,
        f: impl FnOnce(&mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        store.data_mut().deadline = Deadline::after(self.deadline_for(loaded));
        store.set_epoch_deadline(1);
        let span = tracing::debug_span!(
            "component",
            component = %loaded.name,
            outcome = tracing::field::Empty
        );
        let entered = span.enter();
        let started = Instant::now();
        let result = f(store);
        let elapsed = started.elapsed();
        let result = result.map_err(|e| {
            let state = store.data();
            if inline::hit() {
                CallError::InlineBudget(loaded.name.clone())
            } else if state.deadline.hit {
                CallError::Deadline(loaded.name.clone())
            } else if state.limiter.exceeded {
                CallError::Memory(loaded.name.clone())
            } else {
                CallError::Trap {
                    component: loaded.name.clone(),
                    message: format!("{e:#}")
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                }
            }
        });
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e @ CallError::InlineBudget(_)) => e.outcome(),
            Err(e) => {
                tracing::error!(component = %loaded.name, error = %e, "component call failed");
                e.outcome()
            }
        };
        span.record("outcome", outcome);
        drop(entered);
        self.services
            .metrics
            .component_call(&loaded.name, outcome, elapsed);
        result
    }
}
