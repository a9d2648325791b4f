//! One adapter instance for a thread's calls in a row (see [`AdapterSession`]).

use super::*;
use crate::warm::Warm;

impl Runtime {
    /// An [`AdapterSession`]: calls of one thread that may share an instance.
    pub fn adapter_session(self: &Arc<Self>) -> AdapterSession<'_> {
        AdapterSession {
            runtime: self,
            live: None,
        }
    }
}

/// Adapter calls made one after another by one thread (a worker of a
/// `status-many` round) on one instance of the adapter version serving them,
/// instead of a Store and an instance per call: for the simulator, setting up
/// and tearing down the instance cost more than its `status` call. Each call
/// keeps its own deadline, metrics and slot accounting; a call that fails
/// (trap, deadline, memory) discards the instance, so the next one starts
/// fresh, and a call routed to another adapter version (another operator, or
/// a hot swap) replaces it. The instance holds one adapter slot while it lives.
/// An adapter that keeps its instances warm (`calls_per_instance` above 1)
/// lends the session an idle one and gets it back after: a Python adapter's
/// status round then finds the interpreter's pages its own, as a create does.
pub struct AdapterSession<'r> {
    runtime: &'r Arc<Runtime>,
    live: Option<LiveAdapter<'r>>,
}

struct LiveAdapter<'r> {
    runtime: &'r Arc<Runtime>,
    loaded: Arc<Loaded>,
    /// None once the instance failed a call.
    warm: Option<Warm>,
    _slot: pool::Permit<'r>,
}

impl Drop for LiveAdapter<'_> {
    fn drop(&mut self) {
        if let Some(warm) = self.warm.take() {
            self.runtime.give_back(warm, &self.loaded);
        }
    }
}

impl AdapterSession<'_> {
    /// As [`Runtime::call_adapter_traced`], on the session's own instance when
    /// the same version serves (environment, operator) through `via` (see
    /// [`Runtime::adapter_via`]).
    pub fn call<R>(
        &mut self,
        (environment, operator): (&str, &str),
        via: Option<&str>,
        f: impl FnOnce(&mut Store<HostState>, &Adapter) -> wasmtime::Result<R>,
    ) -> (Result<R, CallError>, Option<Arc<Loaded>>) {
        let runtime = self.runtime;
        let Some(loaded) = runtime.adapter_via(environment, operator, via) else {
            let e = CallError::NoRoute {
                environment: environment.into(),
                operator: operator.into(),
            };
            return (Err(e), None);
        };
        let live = match &mut self.live {
            Some(live) if Arc::ptr_eq(&live.loaded, &loaded) => live,
            live => {
                *live = None; // its slot is free again before we wait for one
                let slot = match runtime.enter(&loaded, None) {
                    Ok(slot) => slot,
                    Err(e) => return (Err(e), Some(loaded)),
                };
                live.insert(LiveAdapter {
                    runtime,
                    warm: Some(runtime.warm_or_new(&loaded)),
                    loaded: loaded.clone(),
                    _slot: slot,
                })
            }
        };
        let warm = live.warm.as_mut().expect("a live session's instance");
        let result = warm.call(runtime, &loaded, f);
        if result.is_err() {
            live.warm = None; // dropped, not given back
            self.live = None;
        }
        (result, Some(loaded))
    }
}
