//! Background duties shared by a fleet: a job (expiry, reconciliation, bulk
//! payouts) runs on one node at a time, the holder of its lease. The lease
//! is a row with an expiry, renewed by its holder while it works; a node
//! that dies stops renewing, and another takes the lease over once it has
//! expired ([`LEASE_MS`] at most). On SQLite one process owns the file, so
//! every lease is its own without a write (and a process restarted after a
//! crash does not wait for its predecessor's leases to expire).
//!
//! A lease makes doubled work rare, not impossible (a holder cut off from
//! the database keeps working until it notices): what keeps money safe is
//! still that every state change is checked against what is stored
//! (`apply`), so a second runner finds the work done.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use mmc_storage::sql_params;
use uuid::Uuid;

use mmc_capabilities::node::Nodes;
use mmc_db::{SqlDb, StorageError};

/// How long a lease lasts without renewal: the bound on a dead holder's
/// duties standing still.
pub const LEASE_MS: u64 = 5_000;

/// Renewed this often while its holder works (a third of its life).
pub const RENEW_EVERY: Duration = Duration::from_millis(LEASE_MS / 3);

pub struct Leases {
    db: SqlDb,
    /// Only this process serves the storage (SQLite): nothing to share.
    alone: bool,
    /// This process, in every lease it holds.
    pub holder: String,
    /// The nodes whose heartbeat lease was live at this node's last
    /// heartbeat: what [`Nodes::alive`] answers from, without a query.
    live: parking_lot::RwLock<HashSet<String>>,
}

impl Leases {
    /// Leases on `db`: shared through it on PostgreSQL, this process's own on SQLite.
    pub fn new(db: SqlDb) -> Arc<Leases> {
        let alone = db.engine_name() == "sqlite";
        Self::with(db, alone)
    }

    /// Leases always taken through the table (tests of the table itself).
    pub fn shared(db: SqlDb) -> Arc<Leases> {
        Self::with(db, false)
    }

    fn with(db: SqlDb, alone: bool) -> Arc<Leases> {
        Arc::new(Leases {
            db,
            alone,
            // Says which process holds what (`host:pid:…`), for an operator
            // reading the table; unique whatever the hosts are called.
            holder: format!(
                "{}:{}:{}",
                std::env::var("HOSTNAME").unwrap_or_else(|_| "node".into()),
                std::process::id(),
                &Uuid::new_v4().simple().to_string()[..8]
            ),
            live: Default::default(),
        })
    }

    /// Whether other nodes may hold these leases (PostgreSQL): on SQLite one
    /// process serves the file and every lease is its own.
    pub fn shared_with_others(&self) -> bool {
        !self.alone
    }

    /// Takes `name`, or renews it when this node holds it: true when this
    /// node holds it for the next [`LEASE_MS`].
    pub fn acquire(&self, name: &str) -> Result<bool, StorageError> {
        if self.alone {
            return Ok(true);
        }
        // On the database's clock: nodes whose clocks disagree still agree
        // on when a lease ends.
        let now = self.db.now_ms_sql();
        let changed = self.db.write(|tx| {
            tx.execute(
                &format!(
                    "INSERT INTO leases (name, holder, expires_ms) VALUES (?1, ?2, {now} + ?3)
                     ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms
                     WHERE leases.holder = excluded.holder OR leases.expires_ms < {now}"
                ),
                sql_params![name, &self.holder, LEASE_MS as i64],
            )
        })?;
        Ok(changed == 1)
    }

    /// Gives up every lease this node holds (graceful shutdown: the others
    /// take its duties over at once instead of after expiry).
    pub fn release_all(&self) -> Result<u64, StorageError> {
        if self.alone {
            return Ok(0);
        }
        self.db.write(|tx| {
            tx.execute(
                "DELETE FROM leases WHERE holder = ?1",
                sql_params![&self.holder],
            )
        })
    }

    /// Says this node is alive (a lease of its own), and learns which nodes
    /// are: their count, itself included, is what a fleet-wide limit is
    /// shared by; the set is what [`Nodes::alive`] answers from.
    pub fn heartbeat(&self) -> Result<u32, StorageError> {
        if self.alone {
            return Ok(1);
        }
        self.acquire(&format!("node:{}", self.holder))?;
        let now = self.db.now_ms_sql();
        let live = self.db.read(|c| {
            c.query(
                &format!(
                    "SELECT holder FROM leases WHERE name LIKE 'node:%' AND expires_ms >= {now}"
                ),
                &[],
            )?
            .iter()
            .map(|r| r.text(0))
            .collect::<Result<HashSet<String>, _>>()
        })?;
        let n = live.len().max(1) as u32;
        *self.live.write() = live;
        Ok(n)
    }

    /// Who holds `name` now, if anyone (for tests and diagnostics).
    pub fn holder_of(&self, name: &str) -> Result<Option<String>, StorageError> {
        let now = self.db.now_ms_sql();
        self.db.read(|c| {
            c.query_opt(
                &format!("SELECT holder FROM leases WHERE name = ?1 AND expires_ms >= {now}"),
                sql_params![name],
            )?
            .map(|r| r.text(0))
            .transpose()
        })
    }
}

/// A node counts as alive while its heartbeat lease (`node:<holder>`) was
/// live at this node's last heartbeat (at most [`RENEW_EVERY`] ago): no query
/// per question, so it may be asked inside a transaction. On SQLite one
/// process serves the file, so any other holder has stopped (a crash, a kill,
/// a restart).
impl Nodes for Leases {
    fn id(&self) -> &str {
        &self.holder
    }

    fn alive(&self, id: &str) -> bool {
        id == self.holder || (!self.alone && self.live.read().contains(id))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A SQLite database in a directory of its own (kept while the guard lives).
    fn sqlite() -> (tempfile::TempDir, SqlDb) {
        let dir = tempfile::tempdir().unwrap();
        let db = SqlDb::new(Arc::new(
            mmc_db::Sqlite::open(&dir.path().join("l.db")).unwrap(),
        ));
        (dir, db)
    }

    #[test]
    fn one_holder_at_a_time_until_released() {
        let (_dir, db) = sqlite();
        // The table's rules (on SQLite a process's leases never touch it).
        let (a, b) = (Leases::shared(db.clone()), Leases::shared(db.clone()));
        assert!(Leases::new(db).acquire("job").unwrap());
        assert!(a.acquire("job").unwrap());
        assert!(a.acquire("job").unwrap(), "the holder renews");
        assert!(!b.acquire("job").unwrap(), "held by a");
        assert_eq!(a.holder_of("job").unwrap(), Some(a.holder.clone()));
        assert!(b.acquire("other").unwrap());
        assert_eq!(a.release_all().unwrap(), 1);
        assert!(b.acquire("job").unwrap(), "released: b takes it at once");
        assert!(!a.acquire("job").unwrap());
        assert_eq!(a.heartbeat().unwrap(), 1);
        assert_eq!(b.heartbeat().unwrap(), 2);
    }

    #[test]
    fn a_node_is_alive_while_its_heartbeat_lease_lasts() {
        let (_dir, db) = sqlite();
        let (a, b) = (Leases::shared(db.clone()), Leases::shared(db.clone()));
        assert!(a.alive(&a.holder), "itself, before any heartbeat");
        assert!(!a.alive(&b.holder), "no heartbeat yet");
        b.heartbeat().unwrap();
        assert!(!a.alive(&b.holder), "a has not looked since");
        assert_eq!(a.heartbeat().unwrap(), 2);
        assert!(a.alive(&b.holder));
        // b's lease runs out (it stopped renewing): at a's next heartbeat, b is gone.
        db.write(|tx| {
            tx.execute(
                "UPDATE leases SET expires_ms = 0 WHERE holder = ?1",
                sql_params![&b.holder],
            )
        })
        .unwrap();
        assert!(a.alive(&b.holder), "until a looks again");
        assert_eq!(a.heartbeat().unwrap(), 1);
        assert!(!a.alive(&b.holder));
        // Alone on a SQLite file: any other process has stopped.
        let alone = Leases::new(db);
        assert!(alone.alive(&alone.holder));
        assert!(!alone.alive(&a.holder));
    }
}
