//! In-memory backend for the sandbox (and a second implementation that keeps
//! the [`Backend`] seam honest). Same semantics as the engines: one writer at
//! a time; a transaction's writes are its own until `commit` publishes them
//! at once; reads outside a transaction see committed data and never wait
//! for the writer (a component may read while its transaction is open);
//! rollback on drop.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::lock_api::ArcMutexGuard;
use parking_lot::{Mutex, RawMutex};

use crate::{Backend, MAX_SCAN, Order, OutboxEvent, StorageError, Transaction};

type Key = (String, String, String);
type Map = BTreeMap<Key, Vec<u8>>;

#[derive(Default)]
pub struct Memory {
    /// Committed data; held only for a read or for publishing a commit.
    data: Arc<Mutex<Map>>,
    /// The writer: held by an open transaction.
    writer: Arc<Mutex<()>>,
    outbox: Arc<Mutex<Vec<OutboxEvent>>>,
}

impl Memory {
    /// Events committed so far, in order.
    pub fn events(&self) -> Vec<OutboxEvent> {
        self.outbox.lock().clone()
    }
}

/// `[start, end)` of one table (`end` empty: to its end), in key order, at
/// most `limit` rows (callers cap it at [`MAX_SCAN`]), with
/// `pending` (a transaction's own writes: `None` deletes) laid over `map`.
fn scan(
    map: &Map,
    pending: &BTreeMap<Key, Option<Vec<u8>>>,
    (ns, table): (&str, &str),
    start: &str,
    end: &str,
    limit: u32,
) -> Vec<(String, Vec<u8>)> {
    let from = (ns.to_string(), table.to_string(), start.to_string());
    let within = |(n, t, k): &Key| n == ns && t == table && (end.is_empty() || k.as_str() < end);
    let mut rows: BTreeMap<String, Vec<u8>> = map
        .range(from.clone()..)
        .take_while(|(k, _)| within(k))
        .map(|((_, _, k), v)| (k.clone(), v.clone()))
        .collect();
    for ((_, _, k), v) in pending.range(from..).take_while(|(k, _)| within(k)) {
        match v {
            Some(v) => rows.insert(k.clone(), v.clone()),
            None => rows.remove(k),
        };
    }
    rows.into_iter().take(limit as usize).collect()
}

impl Backend for Memory {
    fn begin(&self, namespace: &str) -> Result<Box<dyn Transaction>, StorageError> {
        Ok(Box::new(MemoryTxn {
            writer: Some(self.writer.lock_arc()),
            data: self.data.clone(),
            ns: namespace.to_string(),
            pending: BTreeMap::new(),
            events: Vec::new(),
            outbox: self.outbox.clone(),
        }))
    }

    fn get(
        &self,
        namespace: &str,
        table: &str,
        key: &str,
    ) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self
            .data
            .lock()
            .get(&(namespace.into(), table.into(), key.into()))
            .cloned())
    }

    fn scan_in(
        &self,
        namespace: &str,
        table: &str,
        (start, end): (&str, &str),
        order: Order,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        let data = self.data.lock();
        let none = BTreeMap::new();
        Ok(match order {
            Order::Asc => scan(
                &data,
                &none,
                (namespace, table),
                start,
                end,
                limit.min(MAX_SCAN),
            ),
            // A test double: the whole range, reversed.
            Order::Desc => {
                let mut rows = scan(&data, &none, (namespace, table), start, end, u32::MAX);
                rows.reverse();
                rows.truncate(limit.min(MAX_SCAN) as usize);
                rows
            }
        })
    }
}

struct MemoryTxn {
    writer: Option<ArcMutexGuard<RawMutex, ()>>,
    data: Arc<Mutex<Map>>,
    ns: String,
    /// This transaction's writes (`None`: deleted), published at commit.
    pending: BTreeMap<Key, Option<Vec<u8>>>,
    events: Vec<OutboxEvent>,
    outbox: Arc<Mutex<Vec<OutboxEvent>>>,
}

impl MemoryTxn {
    fn open(&self) -> Result<(), StorageError> {
        self.writer
            .as_ref()
            .map(|_| ())
            .ok_or(StorageError::Finished)
    }

    fn key(&self, table: &str, key: &str) -> Key {
        (self.ns.clone(), table.to_string(), key.to_string())
    }
}

impl Transaction for MemoryTxn {
    fn get(&mut self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.open()?;
        let k = self.key(table, key);
        Ok(match self.pending.get(&k) {
            Some(v) => v.clone(),
            None => self.data.lock().get(&k).cloned(),
        })
    }

    fn put(&mut self, table: &str, key: &str, value: &[u8]) -> Result<(), StorageError> {
        self.open()?;
        let k = self.key(table, key);
        self.pending.insert(k, Some(value.to_vec()));
        Ok(())
    }

    fn delete(&mut self, table: &str, key: &str) -> Result<(), StorageError> {
        self.open()?;
        let k = self.key(table, key);
        self.pending.insert(k, None);
        Ok(())
    }

    fn scan(
        &mut self,
        table: &str,
        start: &str,
        end: &str,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        self.open()?;
        let data = self.data.lock();
        Ok(scan(
            &data,
            &self.pending,
            (&self.ns, table),
            start,
            end,
            limit.min(MAX_SCAN),
        ))
    }

    fn emit(&mut self, event: &OutboxEvent) -> Result<(), StorageError> {
        self.open()?;
        self.events.push(event.clone());
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StorageError> {
        let writer = self.writer.take().ok_or(StorageError::Finished)?;
        {
            let mut data = self.data.lock();
            for (k, v) in std::mem::take(&mut self.pending) {
                match v {
                    Some(v) => data.insert(k, v),
                    None => data.remove(&k),
                };
            }
            // Events in commit order: published before the writer is released.
            self.outbox.lock().append(&mut self.events);
        }
        drop(writer);
        Ok(())
    }
}
