//! Durable storage, as the host wires it: the seam and its shared rules are
//! `mmc-storage`, each engine its own crate (`mmc-storage-sqlite`, the
//! embedded default; `mmc-storage-postgres` for a fleet). Components reach
//! storage only through the `storage` capability; the host keeps its own
//! tables (merchants, keys, deliveries, adapter versions) beside theirs,
//! through [`SqlDb`], on the same engine.

use std::sync::Arc;

pub use mmc_storage::sql::{Row, SqlConn, SqlDb, Value};
pub use mmc_storage::*;
pub use mmc_storage_postgres::Postgres;
pub use mmc_storage_sqlite::Sqlite;

use mmc_config::{Config, StorageUrl};

/// One engine, seen both ways: the components' tables and the host's.
#[derive(Clone)]
pub struct Storage {
    pub backend: Arc<dyn Backend>,
    pub sql: SqlDb,
}

impl Storage {
    /// Opens what `storage.url` names; PostgreSQL's schema is migrated
    /// (under an advisory lock: nodes starting together do not race).
    pub fn open(config: &Config) -> anyhow::Result<Storage> {
        Ok(match config.storage_url()? {
            StorageUrl::Sqlite(path) => {
                let mib = config
                    .storage
                    .wal_restart_mib
                    .unwrap_or(mmc_storage_sqlite::WAL_RESTART_MIB);
                let db = Arc::new(Sqlite::open_with_wal_restart(&path, mib)?);
                Storage {
                    backend: db.clone(),
                    sql: SqlDb::new(db),
                }
            }
            StorageUrl::Postgres(url) => {
                let mut options = mmc_storage_postgres::Options::default();
                if let Some(n) = config.storage.pool_size {
                    options.pool_size = n;
                }
                options.read_connections = config.storage.read_connections;
                if let Some(ms) = config.storage.idle_in_transaction_timeout_ms {
                    options.idle_in_transaction_timeout = std::time::Duration::from_millis(ms);
                }
                if let Some(ms) = config.storage.migration_lock_wait_ms {
                    options.migration_lock_wait = std::time::Duration::from_millis(ms);
                }
                let db = Arc::new(
                    Postgres::connect_with(&url, options)
                        .map_err(|e| anyhow::anyhow!("storage.url {}: {e}", redact(&url)))?,
                );
                Storage {
                    backend: db.clone(),
                    sql: SqlDb::new(db),
                }
            }
        })
    }
}

/// A key of the components' `kv` table as a query parameter on `db`:
/// text on SQLite, bytes on PostgreSQL.
pub fn kv_key(db: &SqlDb, key: String) -> Value {
    if db.engine_name() == "postgres" {
        Value::Blob(key.into_bytes())
    } else {
        Value::Text(key)
    }
}

/// A URL fit for a log line: its password, if any, replaced.
pub fn redact(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://")
        && let Some((auth, host)) = rest.rsplit_once('@')
        && let Some((user, _)) = auth.split_once(':')
    {
        return format!("{scheme}://{user}:***@{host}");
    }
    url.to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn passwords_stay_out_of_logs() {
        assert_eq!(
            super::redact("postgres://mmc:s3cret@db:5432/mmc"),
            "postgres://mmc:***@db:5432/mmc"
        );
        assert_eq!(
            super::redact("postgres://postgres@127.0.0.1/x"),
            "postgres://postgres@127.0.0.1/x"
        );
    }
}
