//! Background duties shared by a fleet: a job (expiry, reconciliation, bulk
//! payouts) runs on one node at a time, the holder of its lease. The lease
//! is a row with an expiry; its holder renews every lease it holds in one
//! statement with its heartbeat, so an idle fleet writes one row a node
//! every [`RENEW_EVERY`], whatever the number of jobs. A node that dies
//! stops renewing, and another takes the lease over once it has expired
//! ([`LEASE_MS`] at most). On SQLite one process owns the file, so every
//! lease is its own without a write (and a process restarted after a crash
//! does not wait for its predecessor's leases to expire).
//!
//! A lease makes doubled work rare, not impossible (a holder cut off from
//! the database keeps working until it notices): what keeps money safe is
//! still that every state change is checked against what is stored
//! (`apply`), so a second runner finds the work done.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mmc_storage::sql_params;
use uuid::Uuid;

use mmc_capabilities::node::Nodes;
use mmc_capabilities::storage::LeaseGuard;
use mmc_db::{SqlDb, StorageError};

/// How long a lease lasts without renewal: the bound on a dead holder's
/// duties standing still.
pub const LEASE_MS: u64 = 5_000;

/// Renewed this often (a third of its life), with the holder's heartbeat.
pub const RENEW_EVERY: Duration = Duration::from_millis(LEASE_MS / 3);

/// How long after it was last taken or renewed a lease counts as its
/// holder's: two thirds of its life, so a renewal stuck on the database (a
/// full pool, a slow server) is not counted on to the end.
const HELD_FOR: Duration = Duration::from_millis(LEASE_MS * 2 / 3);

pub struct Leases {
    db: SqlDb,
    /// Only this process serves the storage (SQLite): nothing to share.
    alone: bool,
    /// This process, in every lease it holds.
    pub holder: String,
    /// The nodes whose heartbeat lease was live at this node's last
    /// heartbeat: what [`Nodes::alive`] answers from, without a query.
    live: parking_lot::RwLock<HashSet<String>>,
    /// The leases this node holds (its heartbeat's aside), each with when
    /// it was last taken or renewed: the moment the database was asked, on
    /// this node's monotonic clock (the database counts from later).
    held: parking_lot::Mutex<HashMap<String, Instant>>,
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
            held: Default::default(),
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
        let asked = Instant::now();
        // On the database's clock: nodes whose clocks disagree still agree
        // on when a lease ends.
        let now = self.db.now_ms_sql();
        // Read first: a node waiting for another's lease, asking at every
        // tick, writes nothing (a refused upsert still locks the row: a
        // commit flushed to disk).
        let taken = self.db.read(|c| {
            c.query_opt(
                &format!(
                    "SELECT 1 FROM leases WHERE name = ?1 AND holder <> ?2 AND expires_ms >= {now}"
                ),
                sql_params![name, &self.holder],
            )
        })?;
        let ours = taken.is_none()
            && self.db.write(|tx| {
                tx.execute(
                    &take_sql(now),
                    sql_params![name, &self.holder, LEASE_MS as i64],
                )
            })? == 1;
        let mut held = self.held.lock();
        if ours {
            mark_held(&mut held, name.to_string(), asked);
        } else {
            held.remove(name);
        }
        Ok(ours)
    }

    /// Whether `name` is this node's, as it last knew: taken or renewed
    /// within the last two thirds of a lease, and not found taken by
    /// another node since. No query, so it may be asked at every commit.
    pub fn holds(&self, name: &str) -> bool {
        self.alone
            || self
                .held
                .lock()
                .get(name)
                .is_some_and(|at| at.elapsed() < HELD_FOR)
    }

    /// `name` as a guard for the writes of its job (see [`LeaseGuard`]).
    pub fn guard(self: &Arc<Self>, name: &str) -> Arc<dyn LeaseGuard> {
        Arc::new(Guard {
            leases: self.clone(),
            name: name.to_string(),
        })
    }

    /// Gives up every lease this node holds (graceful shutdown: the others
    /// take its duties over at once instead of after expiry).
    pub fn release_all(&self) -> Result<u64, StorageError> {
        if self.alone {
            return Ok(0);
        }
        self.held.lock().clear();
        self.db.write(|tx| {
            tx.execute(
                "DELETE FROM leases WHERE holder = ?1",
                sql_params![&self.holder],
            )
        })
    }

    /// Says this node is alive (a lease of its own) and renews every lease
    /// it holds, in one transaction; learns which nodes are alive: their
    /// count, itself included, is what a fleet-wide limit is shared by; the
    /// set is what [`Nodes::alive`] answers from.
    pub fn heartbeat(&self) -> Result<u32, StorageError> {
        if self.alone {
            return Ok(1);
        }
        let asked = Instant::now();
        let now = self.db.now_ms_sql();
        let node = format!("node:{}", self.holder);
        let renewed = self.db.write(|tx| {
            tx.execute(
                &take_sql(now),
                sql_params![&node, &self.holder, LEASE_MS as i64],
            )?;
            // Still this node's in the table (a lease another node took
            // after it expired is not): what the holder renews.
            tx.query(
                &format!(
                    "UPDATE leases SET expires_ms = {now} + ?2 WHERE holder = ?1 AND name <> ?3 RETURNING name"
                ),
                sql_params![&self.holder, LEASE_MS as i64, &node],
            )?
            .iter()
            .map(|r| r.text(0))
            .collect::<Result<HashSet<String>, _>>()
        })?;
        {
            let mut held = self.held.lock();
            // Lost to another node, unless taken again since this was asked.
            held.retain(|name, at| renewed.contains(name) || *at > asked);
            for name in renewed {
                mark_held(&mut held, name, asked);
            }
        }
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

/// Takes a lease (?1) for a holder (?2) for ?3 ms from `now`: inserted, or
/// renewed when the holder has it, or taken over once it expired.
fn take_sql(now: &str) -> String {
    format!(
        "INSERT INTO leases (name, holder, expires_ms) VALUES (?1, ?2, {now} + ?3)
         ON CONFLICT (name) DO UPDATE SET holder = excluded.holder, expires_ms = excluded.expires_ms
         WHERE leases.holder = excluded.holder OR leases.expires_ms < {now}"
    )
}

/// `name` held since `asked`, unless known held since later.
fn mark_held(held: &mut HashMap<String, Instant>, name: String, asked: Instant) {
    let at = held.entry(name).or_insert(asked);
    *at = (*at).max(asked);
}

/// A job's lease, checked when a write of the job commits.
struct Guard {
    leases: Arc<Leases>,
    name: String,
}

impl LeaseGuard for Guard {
    fn held(&self) -> bool {
        self.leases.holds(&self.name)
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

    #[test]
    fn the_heartbeat_renews_what_its_node_holds_and_lets_go_of_what_was_taken() {
        let (_dir, db) = sqlite();
        let (a, b) = (Leases::shared(db.clone()), Leases::shared(db.clone()));
        let expires = |name: &str| {
            db.read(|c| {
                c.query_one(
                    "SELECT expires_ms FROM leases WHERE name = ?1",
                    sql_params![name],
                )?
                .int(0)
            })
            .unwrap()
        };
        let set_expiry = |name: &str, ms: i64| {
            db.write(|tx| {
                tx.execute(
                    "UPDATE leases SET expires_ms = ?2 WHERE name = ?1",
                    sql_params![name, ms],
                )
            })
            .unwrap();
        };
        assert!(a.acquire("job:x").unwrap() && a.acquire("job:y").unwrap());
        assert!(a.holds("job:x") && a.holds("job:y"));
        assert!(!b.holds("job:x"), "never taken by b");
        assert!(!b.acquire("job:x").unwrap(), "held by a");
        assert!(!b.holds("job:x"));

        // Both of a's leases near their end: its heartbeat renews them.
        let soon = expires("job:x") - LEASE_MS as i64 + 1_000;
        set_expiry("job:x", soon);
        set_expiry("job:y", soon);
        assert_eq!(a.heartbeat().unwrap(), 1);
        assert!(expires("job:x") >= soon + LEASE_MS as i64 - 1_000);
        assert!(expires("job:y") >= soon + LEASE_MS as i64 - 1_000);
        assert!(a.holds("job:x") && a.holds("job:y"));

        // a's `job:x` expired (a frozen, say) and b took it: a learns at its
        // next heartbeat, and does not renew it.
        set_expiry("job:x", 0);
        assert!(b.acquire("job:x").unwrap());
        let taken = expires("job:x");
        a.heartbeat().unwrap();
        assert!(!a.holds("job:x"), "taken by b");
        assert!(a.holds("job:y"));
        assert_eq!(expires("job:x"), taken, "b's lease is not a's to renew");
        assert_eq!(a.holder_of("job:x").unwrap(), Some(b.holder.clone()));
        assert!(b.holds("job:x"));

        // Released: a holds nothing until it takes a lease again.
        a.release_all().unwrap();
        assert!(!a.holds("job:y"));
        assert!(a.acquire("job:y").unwrap());
        // On SQLite alone, a process holds every lease without a row.
        assert!(Leases::new(db.clone()).holds("anything"));
    }

    /// On PostgreSQL a node waiting for another's lease leaves the row
    /// alone: it reads it and never locks it (a refused upsert would, its
    /// locker's id left in the row's `xmax`, a commit flushed each time).
    #[test]
    fn a_node_waiting_for_a_lease_on_postgres_never_locks_its_row() {
        let t = mmc_storage_postgres::test_util::TestDatabase::create();
        let db = SqlDb::new(Arc::new(mmc_db::Postgres::connect(&t.url).unwrap()));
        let (a, b) = (Leases::new(db.clone()), Leases::new(db.clone()));
        assert!(a.shared_with_others());
        let locker = || {
            db.read(|c| {
                c.query_one("SELECT xmax::text FROM leases WHERE name = 'job:x'", &[])?
                    .text(0)
            })
            .unwrap()
        };
        assert!(a.acquire("job:x").unwrap());
        assert_eq!(locker(), "0");
        for _ in 0..3 {
            assert!(!b.acquire("job:x").unwrap(), "held by a");
        }
        assert_eq!(locker(), "0", "b never locked a's row");
        assert_eq!(a.heartbeat().unwrap(), 1);
        assert_eq!(b.heartbeat().unwrap(), 2);
        assert!(a.holds("job:x") && !b.holds("job:x"));
        assert_eq!(a.holder_of("job:x").unwrap(), Some(a.holder.clone()));
    }
}
