//! Where the service keeps its state: SQLite for one process, PostgreSQL
//! for a fleet.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `url`: `sqlite://PATH` (the default, `<data_dir>/mmc.db`: one process)
/// or `postgres://USER[:PASSWORD]@HOST[:PORT]/DB` (any number of nodes).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StorageConfig {
    pub url: Option<String>,
    /// Connections each node keeps to PostgreSQL.
    pub pool_size: Option<usize>,
    /// PostgreSQL: connections each node opens beside its pool for reads
    /// outside a transaction, each driven by the thread that reads (half
    /// the pool by default; 0: reads share the pool).
    pub read_connections: Option<usize>,
    /// PostgreSQL: how long a session may sit idle inside a transaction
    /// before the server ends it (a frozen node's locks released).
    pub idle_in_transaction_timeout_ms: Option<u64>,
    /// PostgreSQL: how long a starting node waits for another node's
    /// migration before it fails, naming the session that holds the lock.
    pub migration_lock_wait_ms: Option<u64>,
    /// SQLite: the WAL size (MiB) past which it is restarted; the WAL file
    /// keeps up to twice this on disk under sustained load.
    pub wal_restart_mib: Option<u64>,
}

/// The engine a storage URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StorageUrl {
    Sqlite(PathBuf),
    Postgres(String),
}
