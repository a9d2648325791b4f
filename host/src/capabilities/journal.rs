//! The `journal` capability: appends buffered in memory and made durable in
//! batches by a thread of their own (every [`FLUSH_EVERY`]), into the
//! calling component's `journal` table. An append costs its caller a push,
//! not a transaction: the simulated provider journals every operation it
//! executes without slowing the creates that call it.

use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use crate::db::{Backend, Write};
use crate::runtime::bindings::CapabilityError;
use crate::runtime::bindings::simulated::mmc::platform::journal::{Entry, Host};
use crate::runtime::state::HostState;

const TABLE: &str = "journal";
const FLUSH_EVERY: Duration = Duration::from_millis(100);
const MAX_VALUE: usize = 4096;
/// Beyond this many waiting appends, new ones are dropped (and counted)
/// until the store takes the batch: a stalled store cannot grow the host.
const MAX_PENDING: usize = 200_000;

struct Pending {
    namespace: String,
    key: String,
    value: Vec<u8>,
}

pub struct Journal {
    pending: Mutex<Vec<Pending>>,
    seq: std::sync::atomic::AtomicU64,
    /// Distinguishes this process's keys from other nodes' of the same ms.
    node: String,
    storage: Arc<dyn Backend>,
}

impl Journal {
    /// A journal over `storage`, flushed by its own thread while it lives.
    pub fn start(storage: Arc<dyn Backend>) -> Arc<Journal> {
        let node = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
        let journal = Arc::new(Journal {
            pending: Mutex::new(Vec::new()),
            seq: std::sync::atomic::AtomicU64::new(0),
            node,
            storage,
        });
        let weak: Weak<Journal> = Arc::downgrade(&journal);
        let _ = std::thread::Builder::new()
            .name("journal".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(FLUSH_EVERY);
                    let Some(journal) = weak.upgrade() else {
                        return;
                    };
                    journal.flush();
                }
            });
        journal
    }

    fn append(&self, namespace: &str, now_ms: u64, value: Vec<u8>) -> bool {
        if value.len() > MAX_VALUE {
            return false;
        }
        let seq = self.seq.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut pending = self.pending.lock();
        if pending.len() >= MAX_PENDING {
            return false;
        }
        pending.push(Pending {
            namespace: namespace.to_string(),
            key: format!("{now_ms:013}/{}{seq:012x}", self.node),
            value,
        });
        true
    }

    /// Makes what waits durable, a namespace at a time; what fails to be
    /// written waits for the next round.
    pub fn flush(&self) {
        let batch = std::mem::take(&mut *self.pending.lock());
        if batch.is_empty() {
            return;
        }
        let mut by_namespace: std::collections::BTreeMap<String, Vec<Write>> = Default::default();
        for p in batch {
            by_namespace
                .entry(p.namespace)
                .or_default()
                .push(Write::Put {
                    table: TABLE.into(),
                    key: p.key,
                    value: p.value,
                });
        }
        for (namespace, writes) in by_namespace {
            if let Err(e) = self.storage.apply(&namespace, Vec::new(), writes.clone()) {
                tracing::warn!(namespace, error = %e, "journal: batch not written, kept for the next round");
                let mut pending = self.pending.lock();
                for w in writes {
                    if let Write::Put { key, value, .. } = w {
                        pending.push(Pending {
                            namespace: namespace.clone(),
                            key,
                            value,
                        });
                    }
                }
            }
        }
    }
}

impl Host for HostState {
    fn append(&mut self, value: Vec<u8>) -> wasmtime::Result<()> {
        let now = self.runtime.services.clock.now_ms();
        if !self
            .runtime
            .services
            .journal
            .append(&self.component, now, value)
        {
            let metrics = &self.runtime.services.metrics;
            metrics.component_event(&self.component, "journal_append_dropped");
        }
        Ok(())
    }

    fn read(
        &mut self,
        from_ms: u64,
        to_ms: u64,
        after: Option<String>,
        limit: u32,
    ) -> wasmtime::Result<Result<Vec<Entry>, CapabilityError>> {
        let start = match after {
            Some(key) => format!("{key}\0"),
            None => format!("{from_ms:013}/"),
        };
        let end = format!("{to_ms:013}/");
        let storage = &self.runtime.services.storage;
        let limit = limit.min(mmc_storage::MAX_SCAN);
        Ok(
            match crate::runtime::inline::may_block(|| {
                storage.scan(&self.component, TABLE, &start, &end, limit)
            }) {
                Ok(rows) => Ok(rows
                    .into_iter()
                    .map(|(key, value)| Entry { key, value })
                    .collect()),
                Err(e) => Err(CapabilityError::Unavailable(e.to_string())),
            },
        )
    }
}
