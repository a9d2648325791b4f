//! Adapter instances kept warm between calls, for adapters configured to
//! serve more than one call per instance (`calls_per_instance`).
//!
//! A fresh instance per call is the default: no call sees what another left
//! in memory, and for a Rust adapter it costs tens of microseconds. An
//! interpreted adapter (componentize-py's CPython) pays far more: its heap is
//! copied in on write, page by page, as the interpreter touches it, and
//! handed back at the end. Such an adapter keeps its instance instead: each
//! thread holds its last idle instances ([`PER_THREAD`]), a call of the same
//! version on the same thread takes one back, and the next call finds the
//! interpreter's pages already its own.
//!
//! An idle instance holds no call slot (a waiting call never waits on an idle
//! instance), only a place in the pool, which is sized for `limits.warm_instances`
//! more; the runtime counts them so that no more are kept. A call that fails
//! (trap, deadline, memory) drops its instance; so does a hot swap, the next
//! time the thread calls that adapter.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;

/// Idle instances one thread keeps (an API call calls one adapter at a time).
const PER_THREAD: usize = 2;

thread_local! {
    static IDLE: RefCell<Vec<Warm>> = const { RefCell::new(Vec::new()) };
}

/// An instance of one adapter version, with the Store it lives in.
pub(super) struct Warm {
    store: Store<HostState>,
    instance: Option<Adapter>,
    /// The version it is an instance of.
    hash: String,
    /// Calls it has served.
    served: u32,
    /// Counted among the runtime's idle instances while kept.
    kept: bool,
}

impl Warm {
    fn is_for(&self, runtime: &Arc<Runtime>, loaded: &Loaded) -> bool {
        let state = self.store.data();
        Arc::ptr_eq(&state.runtime, runtime)
            && *state.component == *loaded.name
            && self.hash == loaded.hash
            && Arc::ptr_eq(&state.config, &loaded.config)
    }
}

impl Warm {
    /// An instance of another version of `loaded`'s adapter, in this runtime.
    fn is_stale(&self, runtime: &Arc<Runtime>, loaded: &Loaded) -> bool {
        let state = self.store.data();
        Arc::ptr_eq(&state.runtime, runtime)
            && *state.component == *loaded.name
            && !self.is_for(runtime, loaded)
    }
}

impl Drop for Warm {
    fn drop(&mut self) {
        if self.kept {
            self.store
                .data()
                .runtime
                .warm
                .idle
                .fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The runtime's count of idle instances, against `limits.warm_instances`.
#[derive(Default)]
pub(super) struct WarmCount {
    idle: AtomicU32,
}

impl Runtime {
    /// Calls `loaded` (an adapter) on this thread's idle instance of it, or a
    /// new one, and keeps the instance for the next call while it has served
    /// fewer than `calls` and the call succeeded.
    pub(super) fn call_warm<R>(
        self: &Arc<Self>,
        loaded: &Loaded,
        slot_wait: Option<Duration>,
        calls: u32,
        f: impl FnOnce(&mut Store<HostState>, &Adapter) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let _slot = self.enter(loaded, slot_wait)?;
        let mut warm = self.take_warm(loaded).unwrap_or_else(|| Warm {
            store: self.new_store(loaded),
            instance: None,
            hash: loaded.hash.clone(),
            served: 0,
            kept: false,
        });
        let Warm {
            store, instance, ..
        } = &mut warm;
        // What one call set for itself is not the next one's.
        let state = store.data_mut();
        state.fence = None;
        state.lease = None;
        let result = self.run(loaded, store, |store| {
            let adapter = match instance {
                Some(adapter) => adapter,
                None => match &loaded.pre {
                    Pre::Adapter(p) => instance.insert(p.instantiate(&mut *store)?),
                    _ => unreachable!("adapter_for checks the kind"),
                },
            };
            f(store, adapter)
        });
        warm.served += 1;
        if result.is_ok() && warm.served < calls {
            self.keep_warm(warm);
        }
        result
    }

    /// This thread's idle instance of `loaded`, if it has one. Idle
    /// instances of another version of the same adapter (swapped out) go.
    fn take_warm(self: &Arc<Self>, loaded: &Loaded) -> Option<Warm> {
        let (found, stale) = IDLE.with_borrow_mut(|idle| {
            let at = idle.iter().rposition(|w| w.is_for(self, loaded));
            let found = at.map(|at| idle.remove(at));
            let stale: Vec<Warm> = idle.extract_if(.., |w| w.is_stale(self, loaded)).collect();
            (found, stale)
        });
        drop(stale); // outside the borrow: dropping a Store resets its memory
        found.map(|mut warm| {
            warm.kept = false;
            self.warm.idle.fetch_sub(1, Ordering::Relaxed);
            warm
        })
    }

    /// Keeps `warm` on this thread for its next call, unless the runtime
    /// keeps as many as it may; the thread's oldest goes when it has enough.
    fn keep_warm(&self, mut warm: Warm) {
        let kept = self.warm.idle.fetch_add(1, Ordering::Relaxed);
        if kept >= self.limits.warm_instances {
            self.warm.idle.fetch_sub(1, Ordering::Relaxed);
            return;
        }
        warm.kept = true;
        let evicted = IDLE.with_borrow_mut(|idle| {
            idle.push(warm);
            (idle.len() > PER_THREAD).then(|| idle.remove(0))
        });
        // Dropped outside the borrow: dropping a Store resets its memory.
        drop(evicted);
    }
}
