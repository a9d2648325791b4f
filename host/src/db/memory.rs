//! In-memory backend for the sandbox (and a second implementation that keeps
//! the [`Backend`] seam honest). Same semantics: one writer at a time,
//! rollback on drop.

use std::collections::BTreeMap;
use std::sync::Arc;

use parking_lot::lock_api::ArcMutexGuard;
use parking_lot::{Mutex, RawMutex};

use super::{Backend, MAX_SCAN, OutboxEvent, StorageError, Transaction};

type Key = (String, String, String);

#[derive(Default)]
pub struct Memory {
    data: Arc<Mutex<BTreeMap<Key, Vec<u8>>>>,
    outbox: Arc<Mutex<Vec<OutboxEvent>>>,
}

impl Memory {
    /// Events committed so far, in order.
    pub fn events(&self) -> Vec<OutboxEvent> {
        self.outbox.lock().clone()
    }
}

fn scan(
    map: &BTreeMap<Key, Vec<u8>>,
    ns: &str,
    table: &str,
    start: &str,
    end: &str,
    limit: u32,
) -> Vec<(String, Vec<u8>)> {
    map.range((ns.to_string(), table.to_string(), start.to_string())..)
        .take_while(|((n, t, k), _)| n == ns && t == table && (end.is_empty() || k.as_str() < end))
        .take(limit.min(MAX_SCAN) as usize)
        .map(|((_, _, k), v)| (k.clone(), v.clone()))
        .collect()
}

impl Backend for Memory {
    fn begin(&self, namespace: &str) -> Result<Box<dyn Transaction>, StorageError> {
        Ok(Box::new(MemoryTxn {
            data: Some(self.data.lock_arc()),
            ns: namespace.to_string(),
            undo: Vec::new(),
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

    fn scan(
        &self,
        namespace: &str,
        table: &str,
        start: &str,
        end: &str,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        Ok(scan(&self.data.lock(), namespace, table, start, end, limit))
    }
}

struct MemoryTxn {
    data: Option<ArcMutexGuard<RawMutex, BTreeMap<Key, Vec<u8>>>>,
    ns: String,
    /// Previous values, to restore on rollback.
    undo: Vec<(Key, Option<Vec<u8>>)>,
    events: Vec<OutboxEvent>,
    outbox: Arc<Mutex<Vec<OutboxEvent>>>,
}

impl MemoryTxn {
    fn map(&mut self) -> Result<&mut BTreeMap<Key, Vec<u8>>, StorageError> {
        self.data.as_deref_mut().ok_or(StorageError::Finished)
    }

    fn key(&self, table: &str, key: &str) -> Key {
        (self.ns.clone(), table.to_string(), key.to_string())
    }
}

impl Transaction for MemoryTxn {
    fn get(&mut self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let k = self.key(table, key);
        Ok(self.map()?.get(&k).cloned())
    }

    fn put(&mut self, table: &str, key: &str, value: &[u8]) -> Result<(), StorageError> {
        let k = self.key(table, key);
        let old = self.map()?.insert(k.clone(), value.to_vec());
        self.undo.push((k, old));
        Ok(())
    }

    fn delete(&mut self, table: &str, key: &str) -> Result<(), StorageError> {
        let k = self.key(table, key);
        let old = self.map()?.remove(&k);
        self.undo.push((k, old));
        Ok(())
    }

    fn scan(
        &mut self,
        table: &str,
        start: &str,
        end: &str,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        let ns = self.ns.clone();
        Ok(scan(self.map()?, &ns, table, start, end, limit))
    }

    fn emit(&mut self, event: &OutboxEvent) -> Result<(), StorageError> {
        self.map()?;
        self.events.push(event.clone());
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StorageError> {
        let guard = self.data.take().ok_or(StorageError::Finished)?;
        self.undo.clear();
        // Publish events before releasing the writer, so their order is the commit order.
        self.outbox.lock().append(&mut self.events);
        drop(guard);
        Ok(())
    }
}

impl Drop for MemoryTxn {
    fn drop(&mut self) {
        if let Some(mut map) = self.data.take() {
            for (k, old) in self.undo.drain(..).rev() {
                match old {
                    Some(v) => map.insert(k, v),
                    None => map.remove(&k),
                };
            }
        }
    }
}
