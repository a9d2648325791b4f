//! The `journal` capability: appends buffered in memory and made durable in
//! batches by a thread of their own (every [`FLUSH_EVERY`]), each batch one
//! row of the calling component's `journal` table (not one row an entry: a
//! batch costs the store one insert, whatever it holds). An append costs
//! its caller a push, not a transaction: the simulated provider journals
//! every operation it executes without slowing the creates that call it.
//!
//! A row's key is `{first entry's ms:013}/{node}{seq}`; its value the
//! entries, each `ms (u64 LE) · length (u32 LE) · bytes`. An entry's key,
//! as `read` gives it, is its row's key then `#` and its place in the row:
//! keys order the whole journal, which is what pages need.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use parking_lot::Mutex;

use crate::bindings::CapabilityError;
use crate::bindings::simulated::mmc::platform::journal::{Entry, Host};
use mmc_common::clock::Clock;
use mmc_db::{Backend, Write};
use mmc_metrics::Metrics;

const TABLE: &str = "journal";
const FLUSH_EVERY: Duration = Duration::from_millis(100);
/// How much later than its first entry a row may be written (a flush that
/// failed is retried): reads look back this far for rows that hold entries
/// of their range.
const ROW_SPAN_MS: u64 = 10 * 60 * 1000;
const MAX_VALUE: usize = 4096;
/// Beyond this many waiting appends, new ones are dropped (and counted)
/// until the store takes the batch: a stalled store cannot grow the host.
const MAX_PENDING: usize = 200_000;

pub struct Journal {
    /// Waiting entries by namespace: (ms, bytes).
    pending: Mutex<Vec<(String, u64, Vec<u8>)>>,
    rows: AtomicU64,
    /// Distinguishes this process's rows from other nodes' of the same ms.
    node: String,
    storage: Arc<dyn Backend>,
}

impl Journal {
    /// A journal over `storage`, flushed by its own thread while it lives.
    pub fn start(storage: Arc<dyn Backend>) -> Arc<Journal> {
        let node = uuid::Uuid::new_v4().simple().to_string()[..8].to_string();
        let journal = Arc::new(Journal {
            pending: Mutex::new(Vec::new()),
            rows: AtomicU64::new(0),
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
        let mut pending = self.pending.lock();
        if pending.len() >= MAX_PENDING {
            return false;
        }
        pending.push((namespace.to_string(), now_ms, value));
        true
    }

    /// Makes what waits durable: one row per namespace. What fails to be
    /// written waits for the next round.
    pub fn flush(&self) {
        let batch = std::mem::take(&mut *self.pending.lock());
        if batch.is_empty() {
            return;
        }
        let mut by_namespace: std::collections::BTreeMap<String, Vec<(u64, Vec<u8>)>> =
            Default::default();
        for (namespace, ms, value) in batch {
            by_namespace.entry(namespace).or_default().push((ms, value));
        }
        for (namespace, entries) in by_namespace {
            let first = entries.iter().map(|(ms, _)| *ms).min().unwrap_or_default();
            let seq = self.rows.fetch_add(1, Ordering::Relaxed);
            let key = format!("{first:013}/{}{seq:012x}", self.node);
            let mut value = Vec::with_capacity(entries.iter().map(|(_, v)| v.len() + 12).sum());
            for (ms, bytes) in &entries {
                value.extend_from_slice(&ms.to_le_bytes());
                value.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
                value.extend_from_slice(bytes);
            }
            let write = Write::Put {
                table: TABLE.into(),
                key,
                value,
            };
            if let Err(e) = self.storage.apply(&namespace, Vec::new(), vec![write]) {
                tracing::warn!(namespace, error = %e, "journal: batch not written, kept for the next round");
                let mut pending = self.pending.lock();
                pending.extend(
                    entries
                        .into_iter()
                        .map(|(ms, v)| (namespace.clone(), ms, v)),
                );
            }
        }
    }
}

/// A row's entries: (ms, bytes); none past the first that does not read.
fn entries(row: &[u8]) -> Vec<(u64, &[u8])> {
    let mut out = Vec::new();
    let mut at = 0;
    while let (Some(ms), Some(len)) = (row.get(at..at + 8), row.get(at + 8..at + 12)) {
        let ms = u64::from_le_bytes(ms.try_into().expect("8 bytes"));
        let len = u32::from_le_bytes(len.try_into().expect("4 bytes")) as usize;
        let Some(bytes) = row.get(at + 12..at + 12 + len) else {
            break;
        };
        out.push((ms, bytes));
        at += 12 + len;
    }
    out
}

/// The entries appended in [from, to) after `after`, at most `limit`, from
/// the rows of `storage`'s `namespace`.
fn read(
    storage: &dyn Backend,
    namespace: &str,
    (from_ms, to_ms): (u64, u64),
    after: Option<&str>,
    limit: usize,
) -> Result<Vec<Entry>, mmc_db::StorageError> {
    let (after_row, after_at) = match after.and_then(|a| a.rsplit_once('#')) {
        Some((row, at)) => (Some(row.to_string()), at.parse::<usize>().ok()),
        None => (None, None),
    };
    let mut start = match &after_row {
        Some(row) => row.clone(),
        None => format!("{:013}/", from_ms.saturating_sub(ROW_SPAN_MS)),
    };
    let end = format!("{to_ms:013}/");
    let mut out = Vec::new();
    loop {
        let rows = storage.scan(namespace, TABLE, &start, &end, 100)?;
        let full = rows.len() == 100;
        for (key, value) in &rows {
            for (i, (ms, bytes)) in entries(value).into_iter().enumerate() {
                let seen =
                    after_row.as_deref() == Some(key.as_str()) && after_at.is_some_and(|a| i <= a);
                if seen || !(from_ms..to_ms).contains(&ms) {
                    continue;
                }
                out.push(Entry {
                    key: format!("{key}#{i:06}"),
                    value: bytes.to_vec(),
                });
                if out.len() == limit {
                    return Ok(out);
                }
            }
        }
        match rows.last() {
            Some((key, _)) if full => start = format!("{key}\0"),
            _ => return Ok(out),
        }
    }
}

pub struct View<'a> {
    pub component: &'a str,
    pub journal: &'a Journal,
    pub clock: &'a dyn Clock,
    /// Where a dropped append is counted.
    pub metrics: &'a Metrics,
}

/// The marker the runtime links this interface with.
pub type Cap = View<'static>;

impl wasmtime::component::HasData for Cap {
    type Data<'a> = View<'a>;
}

impl Host for View<'_> {
    fn append(&mut self, value: Vec<u8>) -> wasmtime::Result<()> {
        let now = self.clock.now_ms();
        if !self.journal.append(self.component, now, value) {
            (self.metrics).component_event(self.component, "journal_append_dropped");
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
        let storage = self.journal.storage.as_ref();
        let limit = limit.clamp(1, mmc_storage::MAX_SCAN) as usize;
        let found = mmc_common::inline::may_block(|| {
            read(
                storage,
                self.component,
                (from_ms, to_ms),
                after.as_deref(),
                limit,
            )
        });
        Ok(found.map_err(|e| CapabilityError::Unavailable(e.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_read_back_entry_by_entry_in_pages() {
        let storage: Arc<dyn Backend> = Arc::new(mmc_storage::memory::Memory::default());
        let journal = Journal::start(storage.clone());
        for i in 0..25u64 {
            assert!(journal.append("sim", 1_000 + i, format!("e{i}").into_bytes()));
            if i % 10 == 9 {
                journal.flush();
            }
        }
        journal.flush();
        let page =
            |after: Option<&str>| read(storage.as_ref(), "sim", (1_005, 1_020), after, 6).unwrap();
        let first = page(None);
        let texts = |p: &[Entry]| {
            p.iter()
                .map(|e| String::from_utf8(e.value.clone()).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(texts(&first), ["e5", "e6", "e7", "e8", "e9", "e10"]);
        let second = page(Some(&first.last().unwrap().key));
        assert_eq!(texts(&second), ["e11", "e12", "e13", "e14", "e15", "e16"]);
        let third = page(Some(&second.last().unwrap().key));
        assert_eq!(texts(&third), ["e17", "e18", "e19"]);
        assert!(journal.append("sim", 1, vec![0; MAX_VALUE]));
        assert!(
            !journal.append("sim", 1, vec![0; MAX_VALUE + 1]),
            "too long: dropped"
        );
    }
}
