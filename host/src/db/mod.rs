//! Durable storage, as the host wires it: the seam and its shared rules are
//! `mmc-storage`, each engine its own crate (`mmc-storage-sqlite`, the
//! embedded default; `mmc-storage-postgres` for a fleet). Components reach
//! storage only through the `storage` capability; the host keeps its own
//! tables (merchants, keys, outbox, deliveries) beside theirs.

pub use mmc_storage::*;
pub use mmc_storage_sqlite::Sqlite;
