//! Adapter instances kept warm between calls, for adapters configured to
//! serve more than one call per instance (`calls_per_instance`).
//!
//! A fresh instance per call is the default: no call sees what another left
//! in memory, and for a Rust adapter it costs tens of microseconds. An
//! interpreted adapter (componentize-py's CPython) pays far more: its heap is
//! copied in on write, page by page, as the interpreter touches it, and
//! handed back at the end. Such an adapter keeps its instances instead: a
//! call takes an idle one of the same version if there is one, and gives it
//! back after, so the next call finds the interpreter's pages its own.
//!
//! The idle instances are one list for the runtime, not one per thread:
//! writes run on tokio's blocking threads, many more than the calls at once,
//! so instances kept per thread were seldom found again. At most
//! `limits.warm_instances` are idle; each holds a place in the pool, which is
//! sized for them, but no call slot (a waiting call never waits on an idle
//! instance). A call that fails (trap, deadline, memory) drops its instance;
//! so does a deploy (the next call of that adapter drops the old version's).
//!
//! An idle instance's Store holds the runtime, so a runtime whose last other
//! holder is gone would be kept alive by its own idle instances: the epoch
//! ticker looks every second ([`Runtime::release_if_orphaned`]) and lets
//! them go, and the runtime with them.

use parking_lot::Mutex;

use super::*;

/// An instance of one adapter version, with the Store it lives in.
pub(super) struct Warm {
    store: Store<HostState>,
    instance: Option<Adapter>,
    /// The version it is an instance of.
    hash: String,
    /// Calls it has served.
    served: u32,
}

impl Warm {
    /// One call of `loaded` on this instance (instantiated the first time).
    pub(super) fn call<R>(
        &mut self,
        runtime: &Arc<Runtime>,
        loaded: &Loaded,
        f: impl FnOnce(&mut Store<HostState>, &Adapter) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let Warm {
            store, instance, ..
        } = self;
        let result = runtime.run(loaded, store, |store| {
            let adapter = match instance {
                Some(adapter) => adapter,
                None => match &loaded.pre {
                    Pre::Adapter(p) => instance.insert(p.instantiate(&mut *store)?),
                    _ => unreachable!("adapter_for checks the kind"),
                },
            };
            f(store, adapter)
        });
        self.served += 1;
        result
    }

    fn is_for(&self, loaded: &Loaded) -> bool {
        let state = self.store.data();
        *state.component == *loaded.name
            && self.hash == loaded.hash
            && Arc::ptr_eq(&state.config, &loaded.config)
    }
}

/// The runtime's idle instances, at most `limits.warm_instances`.
#[derive(Default)]
pub(super) struct WarmPool {
    idle: Mutex<Vec<Warm>>,
}

impl Runtime {
    /// Calls `loaded` (an adapter) on an idle instance of it, or a new one,
    /// and keeps the instance for another call if the call succeeded (see
    /// [`Runtime::give_back`]).
    pub(super) fn call_warm<R>(
        self: &Arc<Self>,
        loaded: &Loaded,
        slot_wait: Option<Duration>,
        f: impl FnOnce(&mut Store<HostState>, &Adapter) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let _slot = self.enter(loaded, slot_wait)?;
        let mut warm = self.warm_or_new(loaded);
        let result = warm.call(self, loaded, f);
        if result.is_ok() {
            self.give_back(warm, loaded);
        }
        result
    }

    /// An idle instance of `loaded` if it keeps its instances and one is
    /// idle, else a new Store (instantiated at its first call).
    pub(super) fn warm_or_new(self: &Arc<Self>, loaded: &Loaded) -> Warm {
        let idle = loaded.warm_calls().and_then(|_| self.take_warm(loaded));
        let mut warm = idle.unwrap_or_else(|| Warm {
            store: self.new_store(loaded),
            instance: None,
            hash: loaded.hash.clone(),
            served: 0,
        });
        // What one caller set for itself is not the next one's.
        let state = warm.store.data_mut();
        state.fence = None;
        state.lease = None;
        warm
    }

    /// Keeps `warm`, an instance of `loaded` whose calls all succeeded, for
    /// another call if `loaded` keeps its instances and it has served fewer
    /// than their `calls_per_instance`.
    pub(super) fn give_back(&self, warm: Warm, loaded: &Loaded) {
        if loaded.warm_calls().is_some_and(|calls| warm.served < calls) {
            self.keep_warm(warm);
        }
    }

    /// An idle instance of `loaded`, if there is one. Idle instances of
    /// another version of the same adapter (swapped out) go.
    fn take_warm(&self, loaded: &Loaded) -> Option<Warm> {
        let (found, stale) = {
            let mut idle = self.warm.idle.lock();
            let found = idle
                .iter()
                .rposition(|w| w.is_for(loaded))
                .map(|at| idle.swap_remove(at));
            let stale: Vec<Warm> = idle
                .extract_if(.., |w| {
                    *w.store.data().component == *loaded.name && !w.is_for(loaded)
                })
                .collect();
            (found, stale)
        };
        drop(stale); // outside the lock: dropping a Store resets its memory
        found
    }

    /// Keeps `warm` for another call, unless as many are idle as may be.
    fn keep_warm(&self, warm: Warm) {
        let mut idle = self.warm.idle.lock();
        if idle.len() < self.limits.warm_instances as usize {
            idle.push(warm);
            return;
        }
        drop(idle);
        drop(warm); // outside the lock
    }

    /// Lets the idle instances go when nothing else holds this runtime (they
    /// hold it through their Stores): called by the epoch ticker.
    pub(super) fn release_if_orphaned(self: Arc<Self>) {
        let idle = self.warm.idle.lock().len();
        // Held only by its idle instances and by `self`: no call can reach it again.
        if idle > 0 && Arc::strong_count(&self) <= idle + 1 {
            let released = std::mem::take(&mut *self.warm.idle.lock());
            drop(released);
        }
    }
}
