//! SQLite backend: one file, WAL, and a commit is on disk before it is
//! acknowledged. One writer connection behind a lock — SQLite serialises
//! writers anyway and waiting on a mutex beats busy-polling — and a pool of
//! reader connections that never block the writer.
//!
//! Group commit: every write transaction is a SAVEPOINT inside an outer
//! transaction (the group), so one fsync makes a whole group durable. The
//! group is committed (its frames written to the WAL, no fsync) by the
//! applier thread right after a batch, or by the committer thread when a
//! transaction waits on a group nobody committed; the committer then fsyncs
//! the WAL outside the lock, so the next group builds while this one reaches
//! the disk. (The writer connection runs `synchronous=NORMAL`, which makes
//! SQLite skip the fsync at commit and nothing else; the committer's own
//! `fdatasync` puts it back, out of the lock, so an acknowledged commit is as
//! durable as under `FULL`.)
//!
//! Prepared transactions (`apply`: checks and writes decided beforehand) do
//! not take the lock themselves: they queue for the applier thread, which
//! runs them back to back. Interactive transactions (`begin`) take the lock.
//!
//! A transaction's `commit` returns only once its group is on disk (and fails
//! if the group's commit failed); a transaction that ends without committing
//! also waits, so nothing it read from the group is reported before it is
//! durable. Readers wait the same way for a group that was being committed
//! while they read. Checkpoints run on their own connection and thread.

pub mod backup;
mod checkpoint;
mod commit;
mod kv;
mod savepoint;
mod schema;
mod sql;
#[cfg(test)]
mod tests;

use self::checkpoint::*;
pub use self::commit::wal_bytes_written;
use self::commit::*;
use self::kv::*;
use self::savepoint::*;
use self::schema::*;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

use parking_lot::lock_api::ArcMutexGuard;
use parking_lot::{Condvar, Mutex, RawMutex};
use rusqlite::config::DbConfig;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};

use mmc_storage::{
    Backend, Check, MAX_SCAN, Order, OutboxEvent, Stage, StorageError, Transaction, Write,
    check_then_write,
};

/// How often the checkpointer folds the WAL back into the database file.
const CHECKPOINT_EVERY: Duration = Duration::from_millis(100);

/// WAL size (frames) past which the checkpointer restarts the WAL
/// ([`checkpointer`]): 1 GiB, several seconds of creates at full load. Each
/// restart holds the writer for the database's fsync (3–90 ms measured under
/// load), so every transaction in flight waits that long: the larger the WAL
/// may grow, the rarer the wait. (At SQLite's default, 1,000 pages, and then at
/// 10,000 with the writer checkpointing inside its `COMMIT`, it was 10–30 ms
/// two or three times a second under load, most of the create p99; at 256 MiB,
/// once every ~2.4 s: alternating runs put create p99 −20% and CPU per create
/// −8% at 1 GiB, docs/benchmarks.md.) Readers search only the frames not yet copied, so a
/// long WAL does not slow them; recovery after a crash reads it once (0.8 s
/// for a 1.9 GB WAL, measured). The WAL file keeps its largest size on disk,
/// so a small disk wants a lower mark: `storage.wal_restart_mib`
/// ([`Sqlite::open_with_wal_restart`]).
pub const WAL_RESTART_MIB: u64 = 1024;

/// The lowest `storage.wal_restart_mib` taken: below it the held pass would
/// come several times a second under load (the p99 it cost at SQLite's default).
pub const WAL_RESTART_MIB_MIN: u64 = 16;

/// Frames of a 4 KiB page in a MiB of WAL, near enough (a frame is the page
/// and a 24-byte header).
const FRAMES_PER_MIB: i64 = 256;

/// WAL size (pages) past which the writer checkpoints after a commit, under
/// its lock: a backstop, should the checkpointer stop or fall behind. Twice
/// the checkpointer's mark.
const BACKSTOP_FACTOR: i64 = 2;

pub struct Sqlite {
    path: PathBuf,
    writer: Arc<Mutex<Writer>>,
    groups: Arc<Groups>,
    applier: Arc<Applier>,
    readers: Mutex<Vec<Connection>>,
    /// Readers of the components' key-value table ([`Sqlite::read_kv`]).
    kv_readers: Arc<Mutex<Vec<KvReader>>>,
}

/// How long a kept snapshot may serve reads ([`KvReader`]): what bounds how
/// late a write by another process (the CLI) is seen.
const SNAPSHOT_FOR: Duration = Duration::from_millis(50);

/// A reader connection that keeps its read transaction — its snapshot —
/// from one read to the next while no group was committed in between: the
/// snapshot is then the one a new transaction would get. Beginning and ending a
/// read transaction (its WAL read lock is an `fcntl` each way, and the check
/// that the page cache is still valid) was ~6% of a GET's CPU. Only once
/// reads find nothing committed since the last one, though: under writes a
/// snapshot would rarely serve twice, and its `BEGIN` and `COMMIT` cost more
/// than the reads they would spare.
struct KvReader {
    conn: Connection,
    /// `Groups::commits` when the snapshot began, and when.
    snapshot: Option<(u64, Instant)>,
    /// `Groups::commits` at this reader's last read.
    last_read: u64,
}

impl KvReader {
    fn end_snapshot(&mut self) {
        if self.snapshot.take().is_some() && !self.conn.is_autocommit() {
            // Ending a read transaction cannot fail but on a broken
            // connection, which then fails its next `BEGIN` and is dropped.
            let _ = self
                .conn
                .prepare_cached("COMMIT")
                .and_then(|mut s| s.execute([]));
        }
    }
}

/// Prepared transactions (`apply`) waiting for the applier thread.
///
/// Why a thread and not the caller taking the writer lock: with a hundred
/// request threads on two cores, a thread holding the lock was often
/// preempted, and every other writer (the committer too) queued behind it.
/// The applier runs whatever is queued back to back under one lock
/// acquisition, so the lock changes hands once per batch, not per transaction.
#[derive(Default)]
struct Applier {
    queue: Mutex<ApplierQueue>,
    work: Condvar,
}

#[derive(Default)]
struct ApplierQueue {
    jobs: Vec<Arc<Job>>,
    stop: bool,
}

/// One prepared transaction and, once its group is resolved, its outcome.
struct Job {
    ns: String,
    checks: Vec<Check>,
    writes: Vec<Write>,
    /// Taken by the applier, or by a caller that gave up waiting: whoever
    /// takes it first decides whether it is ever applied.
    claimed: AtomicBool,
    /// Set once its group is resolved.
    outcome: Mutex<Option<Result<bool, StorageError>>>,
    caller: Thread,
}

/// Most jobs run under one lock acquisition: the committer waits no longer than that.
const APPLY_BATCH: usize = 32;

/// How long a transaction may wait for the writer (its lock, or the applier
/// for a prepared one) before the caller gives up.
const WRITER_WAIT: Duration = Duration::from_secs(10);

/// The writer connection and the group it is building.
struct Writer {
    conn: Connection,
    /// The outer transaction is open.
    open: bool,
    /// Number of the group being built.
    group: u64,
    /// Size of one WAL frame: a page and its 24-byte header.
    frame_bytes: u64,
}

/// Groups committed (by the applier or the committer) and made durable (by
/// the committer), for transactions waiting on their group.
#[derive(Default)]
struct Groups {
    state: Mutex<GroupState>,
    /// Every group up to this one is resolved (durable or failed). Written
    /// under `state`; read without it on the fast path.
    resolved_through: AtomicU64,
    /// The last group whose frames were written (visible to readers), durable or not.
    visible_through: AtomicU64,
    /// Commits of the writer that returned (groups committed or failed), counted
    /// after their frames are written: a kept snapshot is current while it is unchanged.
    commits: AtomicU64,
    /// Waiters of even and odd groups apart: at most two groups are in flight
    /// (one syncing, one building), so resolving a group wakes only its own
    /// waiters, not every thread waiting on the next one.
    done: [Condvar; 2],
    work: Condvar,
}

#[derive(Default)]
struct GroupState {
    /// Recent groups whose commit failed, with the error.
    failed: Vec<(u64, String)>,
    /// A commit of the open group is wanted: a transaction waits for it, or
    /// the applier wrote to it while a sync was under way.
    pending: bool,
    /// The last group committed (its frames written), synced or not.
    committed_through: u64,
    /// The committer is waiting for work: no commit or sync is under way.
    idle: bool,
    stop: bool,
    /// Applied jobs with their group, answered when it is resolved.
    jobs: Vec<(u64, Arc<Job>, Result<bool, StorageError>)>,
}

impl Drop for Sqlite {
    fn drop(&mut self) {
        self.applier.queue.lock().stop = true;
        self.applier.work.notify_all();
        self.groups.state.lock().stop = true;
        self.groups.work.notify_all();
    }
}

impl Sqlite {
    pub fn open(path: &Path) -> Result<Sqlite, StorageError> {
        Self::open_with_wal_restart(path, WAL_RESTART_MIB)
    }

    /// [`Sqlite::open`] with the WAL size (MiB, at least
    /// [`WAL_RESTART_MIB_MIN`]) past which the checkpointer restarts it; the
    /// writer's backstop is twice that.
    pub fn open_with_wal_restart(path: &Path, mib: u64) -> Result<Sqlite, StorageError> {
        if mib < WAL_RESTART_MIB_MIN {
            return Err(StorageError::Invalid(format!(
                "the WAL restart mark is {mib} MiB; the least is {WAL_RESTART_MIB_MIN}"
            )));
        }
        // The backstop (twice the frames) must fit SQLite's page count.
        let frames = i64::try_from(mib)
            .ok()
            .filter(|m| *m <= i64::MAX / (FRAMES_PER_MIB * BACKSTOP_FACTOR))
            .map(|m| m * FRAMES_PER_MIB)
            .ok_or_else(|| StorageError::Invalid(format!("the WAL restart mark {mib} MiB")))?;
        let bytes = mib.saturating_mul(1 << 20);
        Self::open_with(path, frames, frames * BACKSTOP_FACTOR, bytes)
    }

    /// [`Sqlite::open`] with the WAL's restart marks: the checkpointer's, and
    /// the writer's backstop (0: none); and the most bytes of WAL file to
    /// allocate ahead, a step at a time ([`allocate_ahead`]; 0: none).
    fn open_with(
        path: &Path,
        restart_after_frames: i64,
        backstop_pages: i64,
        preallocate: u64,
    ) -> Result<Sqlite, StorageError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| StorageError::Unavailable(e.to_string()))?;
        }
        // The writer keeps SQLite's automatic checkpoint, at a high mark, as a
        // backstop: the checkpointer restarts the WAL long before (BACKSTOP_FACTOR).
        let conn = open_connection(path, false, "NORMAL")?;
        conn.execute_batch(SCHEMA)?;
        conn.execute_batch(sql::HOST_SCHEMA)?;
        add_missing_columns(&conn)?;
        conn.pragma_update(None, "wal_autocheckpoint", backstop_pages)?;
        let page_size: i64 = conn.pragma_query_value(None, "page_size", |r| r.get(0))?;
        let writer = Arc::new(Mutex::new(Writer {
            conn,
            open: false,
            group: 1,
            frame_bytes: page_size as u64 + 24,
        }));
        let groups = Arc::new(Groups::default());
        let mut wal_path = path.as_os_str().to_owned();
        wal_path.push("-wal");
        let wal_path = PathBuf::from(wal_path);
        if preallocate > 0 {
            let w = writer.lock();
            let first_step = preallocate.min(WAL_ALLOCATION_STEP);
            preallocate_wal(&w.conn, &wal_path, first_step);
        }
        {
            let (w, g, wal_path) = (writer.clone(), groups.clone(), wal_path.clone());
            std::thread::Builder::new()
                .name("sqlite-committer".into())
                .spawn(move || committer(w, g, wal_path))
                .map_err(|e| StorageError::Unavailable(e.to_string()))?;
        }
        let applier = Arc::new(Applier::default());
        {
            let (w, g, a) = (writer.clone(), groups.clone(), applier.clone());
            std::thread::Builder::new()
                .name("sqlite-applier".into())
                .spawn(move || self::applier(w, g, a))
                .map_err(|e| StorageError::Unavailable(e.to_string()))?;
        }
        let kv_readers = Arc::new(Mutex::new(Vec::new()));
        {
            let (p, w, g, r) = (
                path.to_path_buf(),
                writer.clone(),
                groups.clone(),
                kv_readers.clone(),
            );
            std::thread::Builder::new()
                .name("sqlite-checkpoint".into())
                .spawn(move || {
                    checkpointer(p, wal_path, w, g, r, restart_after_frames, preallocate)
                })
                .map_err(|e| StorageError::Unavailable(e.to_string()))?;
        }
        Ok(Sqlite {
            path: path.to_path_buf(),
            writer,
            groups,
            applier,
            readers: Mutex::new(Vec::new()),
            kv_readers,
        })
    }

    /// Runs `f` on a reader connection: committed, durable data; never blocks writers.
    pub fn read<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        let conn = match self.readers.lock().pop() {
            Some(c) => c,
            None => open_connection(&self.path, true, "NORMAL")?,
        };
        let out = f(&conn);
        self.readers.lock().push(conn);
        self.groups.wait_visible_durable();
        out
    }

    /// As [`Sqlite::read`], for the components' reads: on a reader that keeps
    /// its snapshot while nothing was committed since it began ([`KvReader`]),
    /// for at most [`SNAPSHOT_FOR`]. A commit of this process is counted before
    /// its writer is answered, so a read after an answer sees the write, as with
    /// a fresh transaction.
    fn read_kv<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        let mut r = match self.kv_readers.lock().pop() {
            Some(r) => r,
            None => KvReader {
                conn: open_connection(&self.path, true, "NORMAL")?,
                snapshot: None,
                last_read: u64::MAX,
            },
        };
        // Read before the snapshot begins: a commit after this makes it stale, never missing.
        let commits = self.groups.commits.load(Ordering::SeqCst);
        let current = r
            .snapshot
            .is_some_and(|(seen, at)| seen == commits && at.elapsed() < SNAPSHOT_FOR);
        if !current {
            r.end_snapshot();
            if r.last_read == commits {
                // Deferred: the snapshot begins at `f`'s first read.
                r.conn.prepare_cached("BEGIN")?.execute([])?;
                r.snapshot = Some((commits, Instant::now()));
            }
        }
        r.last_read = commits;
        let out = f(&r.conn);
        // A snapshot a commit made stale ends now, not at this reader's next
        // read: an idle reader must not keep the WAL from restarting.
        if out.is_err() || self.groups.commits.load(Ordering::SeqCst) != commits {
            r.end_snapshot();
        }
        self.kv_readers.lock().push(r);
        self.groups.wait_visible_durable();
        out
    }

    /// Runs `f` in a write transaction; returns once it is durable.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        let mut w = self.writer.lock();
        enter(&mut w, Savepoint::Txn)?;
        let out = f(&w.conn);
        let kept = leave(&mut w, Savepoint::Txn, out.is_ok());
        let group = w.group;
        drop(w);
        self.groups.wait_durable(group)?;
        kept?;
        out
    }
}

impl Backend for Sqlite {
    fn packs_cheaply(&self) -> bool {
        false
    }

    fn begin(&self, namespace: &str) -> Result<Box<dyn Transaction>, StorageError> {
        // Bounded wait: a stuck writer must surface as an error, not hang every request.
        let guard = self.writer.try_lock_arc_for(WRITER_WAIT).ok_or_else(|| {
            StorageError::Unavailable(format!(
                "storage busy: writer lock not acquired in {} s",
                WRITER_WAIT.as_secs()
            ))
        })?;
        let mut guard = guard;
        enter(&mut guard, Savepoint::Txn)?;
        Ok(Box::new(SqliteTxn {
            writer: Some(guard),
            groups: self.groups.clone(),
            ns: namespace.to_string(),
        }))
    }

    /// Queued for the applier thread; the caller sleeps until its group is on disk.
    fn apply(
        &self,
        namespace: &str,
        checks: Vec<Check>,
        writes: Vec<Write>,
    ) -> Result<bool, StorageError> {
        let job = Arc::new(Job {
            ns: namespace.to_string(),
            checks,
            writes,
            claimed: AtomicBool::new(false),
            outcome: Mutex::new(None),
            caller: std::thread::current(),
        });
        self.applier.queue.lock().jobs.push(job.clone());
        self.applier.work.notify_one();
        let deadline = Instant::now() + WRITER_WAIT;
        loop {
            if let Some(outcome) = job.outcome.lock().take() {
                return outcome;
            }
            let now = Instant::now();
            if now >= deadline && !job.claimed.swap(true, Ordering::AcqRel) {
                return Err(StorageError::Unavailable(format!(
                    "storage busy: transaction not started in {} s",
                    WRITER_WAIT.as_secs()
                )));
            }
            // Spurious wake-ups are fine: the outcome is checked again.
            std::thread::park_timeout(
                deadline
                    .saturating_duration_since(now)
                    .max(Duration::from_millis(100)),
            );
        }
    }

    fn get(
        &self,
        namespace: &str,
        table: &str,
        key: &str,
    ) -> Result<Option<Vec<u8>>, StorageError> {
        self.read_kv(|c| get_on(c, namespace, table, key))
    }

    fn scan_in(
        &self,
        namespace: &str,
        table: &str,
        range: (&str, &str),
        order: Order,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        self.read_kv(|c| scan_on(c, namespace, table, range, order, limit))
    }
}

struct SqliteTxn {
    /// `None` once committed or rolled back.
    writer: Option<ArcMutexGuard<RawMutex, Writer>>,
    groups: Arc<Groups>,
    ns: String,
}

impl SqliteTxn {
    fn conn(&self) -> Result<&Connection, StorageError> {
        self.writer
            .as_deref()
            .map(|w| &w.conn)
            .ok_or(StorageError::Finished)
    }

    /// Ends the savepoint, frees the writer, waits for the group on disk.
    fn finish(&mut self, keep: bool) -> Result<(), StorageError> {
        let mut w = self.writer.take().ok_or(StorageError::Finished)?;
        let kept = leave(&mut w, Savepoint::Txn, keep);
        let group = w.group;
        drop(w);
        self.groups.wait_durable(group)?;
        kept
    }
}

impl Transaction for SqliteTxn {
    fn get(&mut self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        get_on(self.conn()?, &self.ns, table, key)
    }

    fn put(&mut self, table: &str, key: &str, value: &[u8]) -> Result<(), StorageError> {
        put_on(self.conn()?, &self.ns, table, key, value)
    }

    fn delete(&mut self, table: &str, key: &str) -> Result<(), StorageError> {
        delete_on(self.conn()?, &self.ns, table, key)
    }

    fn scan(
        &mut self,
        table: &str,
        start: &str,
        end: &str,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        scan_on(
            self.conn()?,
            &self.ns,
            table,
            (start, end),
            Order::Asc,
            limit,
        )
    }

    fn emit(&mut self, e: &OutboxEvent) -> Result<(), StorageError> {
        emit_on(self.conn()?, e)
    }

    fn commit(&mut self) -> Result<(), StorageError> {
        self.finish(true)
    }
}

impl Drop for SqliteTxn {
    fn drop(&mut self) {
        // A component that trapped, timed out or forgot to commit: undo its writes.
        if self.writer.is_some() {
            let _ = self.finish(false);
        }
    }
}
