//! The storage seam. Components reach storage only through the host's
//! `storage` capability (ordered key-value tables scoped to the component);
//! [`Backend`] is what an engine implements for it, with the rules every
//! engine shares written once here ([`check_then_write`]). Each engine is its
//! own crate (`mmc-storage-sqlite`, `mmc-storage-postgres`); [`Memory`] is
//! the sandbox's.

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod failures;
pub mod memory;
pub mod sql;

pub use memory::Memory;

#[derive(Debug, Clone, thiserror::Error)]
pub enum StorageError {
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    #[error("invalid storage request: {0}")]
    Invalid(String),
    #[error("transaction already finished")]
    Finished,
    /// The engine rolled this transaction back to end a wait with another
    /// writer (two transactions each waiting for a key the other holds):
    /// nothing of it was written, and the same transaction run again from
    /// the start may well succeed. Only an engine with more than one writer
    /// (PostgreSQL) reports it.
    #[error("storage conflict: {0}")]
    Conflict(String),
}

#[cfg(feature = "rusqlite")]
impl From<rusqlite::Error> for StorageError {
    fn from(e: rusqlite::Error) -> Self {
        StorageError::Unavailable(e.to_string())
    }
}

/// An event written in the same transaction as the change it reports.
#[derive(Debug, Clone)]
pub struct OutboxEvent {
    pub id: String,
    pub event_type: String,
    pub merchant_id: String,
    pub environment: String,
    pub subject_id: String,
    pub extra_url: Option<String>,
    pub payload: Vec<u8>,
}

/// A value read outside the writer, checked again by [`Backend::apply`].
#[derive(Debug, Clone)]
pub struct Check {
    pub table: String,
    pub key: String,
    pub value: Option<Vec<u8>>,
}

#[derive(Debug, Clone)]
pub enum Write {
    Put {
        table: String,
        key: String,
        value: Vec<u8>,
    },
    Delete {
        table: String,
        key: String,
    },
    Emit(OutboxEvent),
}

/// The storage a component sees: its own namespace of ordered tables.
pub trait Backend: Send + Sync + 'static {
    fn begin(&self, namespace: &str) -> Result<Box<dyn Transaction>, StorageError>;

    /// A prepared transaction: if every check holds, applies `writes` and
    /// returns true once durable; otherwise writes nothing and returns false.
    /// The writer is held only for the checks and the writes.
    fn apply(
        &self,
        namespace: &str,
        checks: Vec<Check>,
        writes: Vec<Write>,
    ) -> Result<bool, StorageError> {
        let mut tx = self.begin(namespace)?;
        if !check_then_write(tx.as_mut(), &checks, &writes)? {
            return Ok(false); // dropped: rolled back, nothing written
        }
        tx.commit()?;
        Ok(true)
    }

    fn get(&self, namespace: &str, table: &str, key: &str)
    -> Result<Option<Vec<u8>>, StorageError>;

    /// Whether a value of many kilobytes costs about what as many small
    /// rows do, so that packing many records into one row saves writes.
    /// Not on SQLite: a row of its `WITHOUT ROWID` table that overflows its
    /// page is read whole at every comparison of a B-tree search passing
    /// through it, so large rows slow every write near them. PostgreSQL
    /// moves a large value out of line (TOAST).
    fn packs_cheaply(&self) -> bool {
        true
    }
    /// At most `limit` (capped at [`MAX_SCAN`]) rows of `[start, end)` (`end`
    /// empty: to the table's end) in `order`.
    fn scan_in(
        &self,
        namespace: &str,
        table: &str,
        range: (&str, &str),
        order: Order,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError>;

    fn scan(
        &self,
        namespace: &str,
        table: &str,
        start: &str,
        end: &str,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        self.scan_in(namespace, table, (start, end), Order::Asc, limit)
    }

    /// The keys of `[start, end)` from the last down (newest-first lists
    /// page backwards through an ordered table).
    fn scan_desc(
        &self,
        namespace: &str,
        table: &str,
        start: &str,
        end: &str,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        self.scan_in(namespace, table, (start, end), Order::Desc, limit)
    }
}

/// Key order of a scan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

/// What a prepared transaction needs of a transaction: reads and writes.
pub trait Stage {
    fn read(&mut self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StorageError>;
    fn write(&mut self, write: &Write) -> Result<(), StorageError>;
}

impl<T: Transaction + ?Sized> Stage for T {
    fn read(&mut self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        self.get(table, key)
    }

    fn write(&mut self, write: &Write) -> Result<(), StorageError> {
        match write {
            Write::Put { table, key, value } => self.put(table, key, value),
            Write::Delete { table, key } => self.delete(table, key),
            Write::Emit(e) => self.emit(e),
        }
    }
}

/// The rule of a prepared transaction, written once: if every check still
/// holds, every write; else nothing written and false.
pub fn check_then_write(
    tx: &mut (impl Stage + ?Sized),
    checks: &[Check],
    writes: &[Write],
) -> Result<bool, StorageError> {
    for c in checks {
        if tx.read(&c.table, &c.key)? != c.value {
            return Ok(false);
        }
    }
    for w in writes {
        tx.write(w)?;
    }
    Ok(true)
}

/// A write transaction; dropping it without `commit` rolls it back.
pub trait Transaction: Send {
    fn get(&mut self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StorageError>;
    fn put(&mut self, table: &str, key: &str, value: &[u8]) -> Result<(), StorageError>;
    fn delete(&mut self, table: &str, key: &str) -> Result<(), StorageError>;
    fn scan(
        &mut self,
        table: &str,
        start: &str,
        end: &str,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError>;
    fn emit(&mut self, event: &OutboxEvent) -> Result<(), StorageError>;
    fn commit(&mut self) -> Result<(), StorageError>;
}

/// Largest page a scan returns, whatever the component asks.
pub const MAX_SCAN: u32 = 1000;
