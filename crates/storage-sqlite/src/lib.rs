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
mod sql;

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

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS kv (
    ns    TEXT NOT NULL,
    tbl   TEXT NOT NULL,
    k     TEXT NOT NULL,
    v     BLOB NOT NULL,
    PRIMARY KEY (ns, tbl, k)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS merchants (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_ms  INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS api_keys (
    id           TEXT PRIMARY KEY,
    key_hash     TEXT NOT NULL UNIQUE,
    merchant_id  TEXT NOT NULL REFERENCES merchants(id),
    environment  TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    created_ms   INTEGER NOT NULL,
    revoked_ms   INTEGER
);

CREATE TABLE IF NOT EXISTS outbox (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    event_type   TEXT NOT NULL,
    merchant_id  TEXT NOT NULL,
    environment  TEXT NOT NULL,
    subject_id   TEXT NOT NULL,
    extra_url    TEXT,
    payload      BLOB NOT NULL,
    created_ms   INTEGER NOT NULL,
    -- Superseded by outbox_cursor; still read once, by the migration below
    -- that places the cursor of a file from before it.
    dispatched   INTEGER NOT NULL DEFAULT 0
);

-- Events up to `seq` are fanned out into deliveries. One row moved forward
-- per dispatch round, instead of a flag and an index entry updated per event.
CREATE TABLE IF NOT EXISTS outbox_cursor (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL
);
-- A file from before the cursor: start after the last event it dispatched.
-- Only when the row is missing (once per file): that lookup scans the outbox.
INSERT INTO outbox_cursor (id, seq)
SELECT 1, COALESCE(
    (SELECT MIN(seq) - 1 FROM outbox WHERE dispatched = 0),
    (SELECT MAX(seq) FROM outbox),
    0)
WHERE NOT EXISTS (SELECT 1 FROM outbox_cursor);
DROP INDEX IF EXISTS outbox_undispatched;
"#;

/// Columns added after their table was first shipped: (table, column,
/// declaration). Added at open where missing, so an older file keeps working.
const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    // A key's scopes, comma-separated; NULL (keys from before scopes) = all.
    ("api_keys", "scopes", "TEXT"),
    // Maker-checker per environment; NULL = the default (off in test, on in live).
    ("merchants", "second_approver_test", "INTEGER"),
    ("merchants", "second_approver_live", "INTEGER"),
    // A disabled webhook endpoint receives no new event; NULL = enabled.
    ("webhook_endpoints", "disabled_ms", "INTEGER"),
];

fn add_missing_columns(conn: &Connection) -> Result<(), StorageError> {
    for (table, column, decl) in ADDED_COLUMNS {
        let present: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
            [table, column],
            |r| r.get(0),
        )?;
        if !present {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
        }
    }
    Ok(())
}

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

/// Bytes the writer connections of this process wrote to their WAL.
static WAL_BYTES: AtomicU64 = AtomicU64::new(0);

/// Bytes written to the WAL by every SQLite database this process opened
/// (the server opens one): frames, each a page and its 24-byte header, as
/// SQLite counts them (`SQLITE_DBSTATUS_CACHE_WRITE`: pages written to the
/// WAL, whatever the commit's outcome). Neither the 32-byte WAL header nor
/// the checkpoints' copies into the database file are included.
pub fn wal_bytes_written() -> u64 {
    WAL_BYTES.load(Ordering::Relaxed)
}

/// Adds the pages the writer wrote to the WAL since the last call.
fn count_wal_writes(w: &Writer) {
    let (mut pages, mut highwater) = (0, 0);
    // SAFETY: the handle is the writer's open connection, used by no one
    // else while we hold the writer; the call only reads and resets a counter.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_db_status(
            w.conn.handle(),
            rusqlite::ffi::SQLITE_DBSTATUS_CACHE_WRITE,
            &mut pages,
            &mut highwater,
            1,
        )
    };
    if rc == rusqlite::ffi::SQLITE_OK && pages > 0 {
        WAL_BYTES.fetch_add(pages as u64 * w.frame_bytes, Ordering::Relaxed);
    }
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

impl Groups {
    fn resolved(&self) -> u64 {
        self.resolved_through.load(Ordering::SeqCst)
    }

    /// Waits until `group` is resolved, first asking the committer to commit
    /// it if it is still open and nobody has asked yet.
    fn wait_durable(&self, group: u64) -> Result<(), StorageError> {
        let mut st = self.state.lock();
        if !st.pending && group > st.committed_through {
            st.pending = true;
            self.work.notify_one();
        }
        while self.resolved() < group {
            self.done[(group % 2) as usize].wait(&mut st);
        }
        group_failure(&st.failed, group)
    }

    /// After a read: waits until whatever the read may have seen is durable.
    fn wait_visible_durable(&self) {
        let seen = self.visible_through.load(Ordering::SeqCst);
        if self.resolved() >= seen {
            return; // the common case: nothing in flight was visible
        }
        let mut st = self.state.lock();
        while self.resolved() < seen {
            self.done[(seen % 2) as usize].wait(&mut st);
        }
    }
}

/// Commits the open group (frames written, not yet synced). Returns its number
/// and whether the commit failed.
fn commit_open(w: &mut Writer, groups: &Groups) -> (u64, Result<(), String>) {
    let group = w.group;
    let result = if w.open {
        // Published before the frames are: a reader that may see them waits for the fsync.
        groups.visible_through.store(group, Ordering::SeqCst);
        let r = w.conn.execute_batch("COMMIT");
        if r.is_err() {
            let _ = w.conn.execute_batch("ROLLBACK");
        }
        // Before anyone is answered: every answer waits for this group's fsync.
        groups.commits.fetch_add(1, Ordering::SeqCst);
        count_wal_writes(w);
        r.map_err(|e| e.to_string())
    } else {
        Ok(())
    };
    w.open = false;
    w.group += 1;
    (group, result)
}

impl GroupState {
    fn committed(&mut self, group: u64, result: Result<(), String>) {
        if let Err(e) = result {
            self.fail(group, e);
        }
        self.committed_through = self.committed_through.max(group);
    }

    fn fail(&mut self, group: u64, e: String) {
        self.failed.push((group, e));
        let excess = self.failed.len().saturating_sub(64);
        self.failed.drain(..excess);
    }
}

/// How resolved `group` ended: durable, or the error its commit or sync failed with.
fn group_failure(failed: &[(u64, String)], group: u64) -> Result<(), StorageError> {
    match failed.iter().find(|(g, _)| *g == group) {
        Some((_, e)) => Err(StorageError::Unavailable(format!("commit failed: {e}"))),
        None => Ok(()),
    }
}

/// Makes committed groups durable, one `fdatasync` for all of them, and
/// answers their transactions. A group is committed either by the applier,
/// right after its batch when the committer is idle (no lock handed over),
/// or here, when a transaction waits on a group nobody committed.
fn committer(writer: Arc<Mutex<Writer>>, groups: Arc<Groups>, wal_path: PathBuf) {
    let mut wal: Option<File> = None;
    loop {
        let commit = {
            let mut st = groups.state.lock();
            st.idle = true;
            while !st.pending && st.committed_through <= groups.resolved() && !st.stop {
                groups.work.wait(&mut st);
            }
            if st.stop {
                return;
            }
            st.idle = false;
            std::mem::take(&mut st.pending)
        };
        if commit {
            // Never wait for the writer while a committed group is not yet
            // durable: the writer's holder may be waiting for exactly that (a
            // read inside a transaction waits until what it saw is on disk),
            // and gives the writer back only then. Blocking on the lock here
            // deadlocked both, once the applier had committed a group and
            // handed the lock to such a transaction.
            let mut w = loop {
                if groups.state.lock().committed_through > groups.resolved() {
                    make_durable(&groups, &mut wal, &wal_path);
                }
                if let Some(w) = writer.try_lock_for(Duration::from_millis(2)) {
                    break w;
                }
            };
            // Transactions that get the lock before us join this group: that is the batching.
            let (group, result) = commit_open(&mut w, &groups);
            drop(w);
            groups.state.lock().committed(group, result);
        }
        make_durable(&groups, &mut wal, &wal_path);
    }
}

/// One `fdatasync` for every committed group not yet durable; then resolves
/// them and answers their transactions. Never takes the writer.
fn make_durable(groups: &Groups, wal: &mut Option<File>, wal_path: &Path) {
    let (from, through) = (groups.resolved() + 1, groups.state.lock().committed_through);
    let synced = sync_wal(wal, wal_path);
    let mut st = groups.state.lock();
    if let Err(e) = synced {
        for g in from..=through {
            st.fail(g, e.clone());
        }
    }
    groups.resolved_through.store(through, Ordering::SeqCst);
    // Only the waiters of the groups resolved now (at most both parities).
    for g in from..=through.min(from + 1) {
        groups.done[(g % 2) as usize].notify_all();
    }
    // Jobs are queued in group order: those resolved now come first.
    let upto = st.jobs.partition_point(|(g, _, _)| *g <= through);
    let state = &mut *st; // the jobs and the failures, borrowed apart
    let answered: Vec<_> = state
        .jobs
        .drain(..upto)
        .map(|(g, job, outcome)| {
            // A job that applied answers how its group ended.
            let outcome =
                outcome.and_then(|applied| group_failure(&state.failed, g).map(|_| applied));
            (job, outcome)
        })
        .collect();
    drop(st);
    for (job, outcome) in answered {
        *job.outcome.lock() = Some(outcome);
        job.caller.unpark();
    }
}

/// Runs queued prepared transactions, each in its own savepoint of the open group.
fn applier(writer: Arc<Mutex<Writer>>, groups: Arc<Groups>, applier: Arc<Applier>) {
    loop {
        let batch = {
            let mut q = applier.queue.lock();
            while q.jobs.is_empty() && !q.stop {
                applier.work.wait(&mut q);
            }
            if q.stop {
                return;
            }
            let n = q.jobs.len().min(APPLY_BATCH);
            q.jobs.drain(..n).collect::<Vec<_>>()
        };
        let mut w = writer.lock();
        // A caller that stopped waiting has been told it failed: never apply it.
        let claimed: Vec<Arc<Job>> = batch
            .into_iter()
            .filter(|job| !job.claimed.swap(true, Ordering::AcqRel))
            .collect();
        let applied = apply_batch(&mut w, claimed);
        if !applied.is_empty() {
            let group = w.group;
            // Handed over before the lock is released: the group cannot be committed
            // (and resolved) without the committer seeing these jobs.
            let mut st = groups.state.lock();
            st.jobs
                .extend(applied.into_iter().map(|(j, o)| (group, j, o)));
            if st.idle {
                // Nothing is syncing: commit now, under the lock we hold, and
                // hand the fsync over.
                st.idle = false;
                drop(st);
                let (group, result) = commit_open(&mut w, &groups);
                groups.state.lock().committed(group, result);
                groups.work.notify_one();
            } else if !st.pending {
                // A sync is under way: the group grows until it is done.
                st.pending = true;
                groups.work.notify_one();
            }
        }
        // Fair: a waiting committer gets the writer now, not after the next batch.
        parking_lot::MutexGuard::unlock_fair(w);
    }
}

/// Applies a batch of prepared transactions in one savepoint: each job's
/// checks come before its writes, so a job whose checks fail wrote nothing,
/// and only a failed write needs a job's own savepoint to undo it. Then (rare:
/// an I/O error, a full disk) the batch is undone and applied again job by
/// job, each in its own savepoint, so one job's failure is not its
/// neighbours'. One savepoint per batch instead of per job: SQLite copies a
/// page into the savepoint journal the first time a savepoint modifies it,
/// and every job modifies the same hot pages (the outbox, the right edges of
/// time-ordered indexes). A batch that opens its group takes no savepoint at
/// all: nothing before it is there to keep, so undoing it is rolling the
/// group back, and its pages are not copied.
fn apply_batch(w: &mut Writer, jobs: Vec<Arc<Job>>) -> Vec<(Arc<Job>, Result<bool, StorageError>)> {
    let together = (|| -> Result<Vec<bool>, StorageError> {
        let scope = open_batch(w)?;
        let mut on = OnWriter {
            conn: &w.conn,
            ns: "",
        };
        let mut outcomes = Vec::with_capacity(jobs.len());
        for job in &jobs {
            on.ns = &job.ns;
            match check_then_write(&mut on, &job.checks, &job.writes) {
                Ok(applied) => outcomes.push(applied),
                Err(e) => {
                    let _ = close_batch(w, scope, false);
                    return Err(e);
                }
            }
        }
        close_batch(w, scope, true)?;
        Ok(outcomes)
    })();
    match together {
        Ok(outcomes) => jobs
            .into_iter()
            .zip(outcomes)
            .map(|(job, applied)| (job, Ok(applied)))
            .collect(),
        Err(_) => jobs
            .into_iter()
            .map(|job| {
                let outcome = apply_on(w, &job);
                (job, outcome)
            })
            .collect(),
    }
}

/// One prepared transaction on the writer: its checks, then its writes, in a savepoint.
fn apply_on(w: &mut Writer, job: &Job) -> Result<bool, StorageError> {
    enter(w, Savepoint::Txn)?;
    let mut on = OnWriter {
        conn: &w.conn,
        ns: &job.ns,
    };
    let outcome = check_then_write(&mut on, &job.checks, &job.writes);
    let kept = leave(w, Savepoint::Txn, matches!(outcome, Ok(true)));
    match (outcome, kept) {
        (Ok(true), Err(e)) => Err(e),
        (outcome, _) => outcome,
    }
}

/// The writer connection inside an open savepoint, for one namespace.
struct OnWriter<'a> {
    conn: &'a Connection,
    ns: &'a str,
}

impl Stage for OnWriter<'_> {
    fn read(&mut self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        get_on(self.conn, self.ns, table, key)
    }

    fn write(&mut self, write: &Write) -> Result<(), StorageError> {
        match write {
            Write::Put { table, key, value } => put_on(self.conn, self.ns, table, key, value),
            Write::Delete { table, key } => delete_on(self.conn, self.ns, table, key),
            Write::Emit(e) => emit_on(self.conn, e),
        }
    }
}

/// `fdatasync` of the WAL: every frame written so far reaches the disk.
fn sync_wal(wal: &mut Option<File>, path: &Path) -> Result<(), String> {
    if wal.is_none() {
        *wal = Some(File::open(path).map_err(|e| format!("open {}: {e}", path.display()))?);
    }
    let result = wal.as_ref().expect("opened above").sync_data();
    result.map_err(|e| {
        *wal = None; // reopened next time
        format!("fsync {}: {e}", path.display())
    })
}

/// Folds the WAL into the database file, off the writer's path. `PASSIVE`
/// never blocks writers or readers; under `NORMAL` it fsyncs the WAL before
/// and the database after, so the WAL is reused only once the copy is durable.
///
/// Under constant load the WAL is never wholly copied at the moment a group
/// begins, so it never restarts from its top by itself. Once it holds more
/// than its restart mark ([`WAL_RESTART_MIB`]), the checkpointer copies what is left with
/// the writer held (the frames of a few milliseconds, right after two passes
/// without it: [`restart_pass`]), and the next group restarts the WAL.
fn checkpointer(
    path: PathBuf,
    writer: Arc<Mutex<Writer>>,
    groups: Arc<Groups>,
    kv_readers: Arc<Mutex<Vec<KvReader>>>,
    restart_after_frames: i64,
) {
    let conn = match open_connection(&path, false, "NORMAL") {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "checkpointer cannot open the database; the WAL will grow");
            return;
        }
    };
    loop {
        std::thread::sleep(CHECKPOINT_EVERY);
        if groups.state.lock().stop {
            return;
        }
        // Idle readers let go of their snapshots: one kept would hold back
        // the WAL's restart (and hide another process's writes).
        for r in kv_readers.lock().iter_mut() {
            if r.snapshot
                .is_some_and(|(_, at)| at.elapsed() >= SNAPSHOT_FOR)
            {
                r.end_snapshot();
            }
        }
        if checkpoint(&conn).is_some_and(|frames| frames > restart_after_frames) {
            checkpoint(&conn); // the frames written meanwhile: fewer left for the held pass
            restart_pass(&conn, &writer, &groups, &kv_readers);
        }
    }
}

/// How long the held pass waits for readers still on the frames it copied
/// (those in the middle of a read) before it gives up until the next round.
const RESTART_READER_WAIT: Duration = Duration::from_millis(5);

/// Copies what is left of the WAL with the writer held, so that the next group
/// restarts it. Returns whether it could: every frame copied and no reader
/// left on them. A reader's snapshot pins the frames it sees: a `PASSIVE`
/// copy stops short of them and the WAL does not restart, so under reads
/// the writer was held once for nothing, then again 100 ms later (three
/// holds for one restart, measured). So the idle readers' kept snapshots are
/// ended here, and the copy (`RESTART`) waits a moment for readers in the
/// middle of a read.
fn restart_pass(
    conn: &Connection,
    writer: &Mutex<Writer>,
    groups: &Groups,
    kv_readers: &Mutex<Vec<KvReader>>,
) -> bool {
    let mut w = writer.lock();
    if w.open {
        // Its frames would come after the held pass: committed now,
        // made durable by the committer (as after an applier's commit).
        let (group, result) = commit_open(&mut w, groups);
        groups.state.lock().committed(group, result);
        groups.work.notify_one();
    }
    // Every kept snapshot is stale from here: a reader in use ends its own
    // when it is handed back (`read_kv`), and the idle ones end now.
    groups.commits.fetch_add(1, Ordering::SeqCst);
    for r in kv_readers.lock().iter_mut() {
        r.end_snapshot();
    }
    let _ = conn.busy_timeout(RESTART_READER_WAIT);
    let done = conn.query_row("PRAGMA wal_checkpoint(RESTART)", [], |r| r.get::<_, i64>(0));
    let _ = conn.busy_timeout(BUSY_TIMEOUT);
    parking_lot::MutexGuard::unlock_fair(w);
    match done {
        Ok(busy) => busy == 0,
        Err(e) => {
            tracing::warn!(error = %e, "checkpoint failed");
            false
        }
    }
}

/// Gives the WAL file its blocks before the writer needs them, as
/// PostgreSQL does for its WAL segments. A frame appended past the file's end
/// makes the file system allocate blocks and grow the file, and the commit's
/// `fdatasync` then writes that metadata through the file system's journal;
/// over allocated blocks only the extents' conversion from unwritten (once
/// per block; PostgreSQL zero-fills instead, which measured no better here).
/// Measured (`bench/ab.sh`, 30 s of creates from a fresh store, docs/benchmarks.md): creates
/// +10 to +15%, CPU per create -7 to -16%, until the WAL first reaches its
/// restart mark — with a 1 GiB mark, the first ten seconds or so of full
/// load after every start, since SQLite removes the WAL at a clean shutdown.
///
/// Only a WAL that holds no frame is touched: one of at most
/// [`PREALLOCATE_EMPTIES_UP_TO`] checkpointed and truncated first (never
/// waiting for another process), then allocated under SQLite's write lock (no process appends a
/// frame meanwhile), and left alone if another process holds it. The zeros
/// past the WAL header are no frame to SQLite (a frame counts only with the
/// header's salts and a valid checksum), as with the old frames it leaves
/// behind after every restart. Best effort: a failure is logged, never
/// fatal. Skipped on tmpfs (no blocks to allocate; the allocation would take
/// memory) and where it would leave less than four times its size free.
fn preallocate_wal(conn: &Connection, wal_path: &Path, bytes: u64) {
    // A longer WAL is another process's under load (a server that could not
    // allocate): emptying it would copy it all under its write lock.
    let wal = file_len(wal_path);
    if wal >= bytes || wal > PREALLOCATE_EMPTIES_UP_TO {
        return;
    }
    // Never wait here: a busy database is another process's, left as it is.
    if conn.busy_timeout(Duration::ZERO).is_err() {
        return;
    }
    preallocate_unless_busy(conn, wal_path, bytes);
    if let Err(e) = conn.busy_timeout(BUSY_TIMEOUT) {
        tracing::warn!(error = %e, "restoring the writer's busy timeout");
    }
}

/// The most WAL [`preallocate_wal`] checkpoints to empty it (a fresh store's
/// schema, what a CLI command left): a few milliseconds of copying.
const PREALLOCATE_EMPTIES_UP_TO: u64 = 16 << 20;

fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

fn preallocate_unless_busy(conn: &Connection, wal_path: &Path, bytes: u64) {
    let emptied = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        Ok(r.get::<_, i64>(0)? == 0 && r.get::<_, i64>(1)? == 0)
    });
    if !matches!(emptied, Ok(true)) {
        return; // another process reads or writes it
    }
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        tracing::debug!(error = %e, "WAL not preallocated: the database is busy");
        return;
    }
    // Frames are appended only under the write lock we hold: an empty file has none.
    let done = if file_len(wal_path) == 0 {
        allocate(wal_path, bytes)
    } else {
        Ok(())
    };
    if let Err(e) = conn.execute_batch("ROLLBACK") {
        tracing::warn!(error = %e, "ending the WAL preallocation");
    }
    if let Err(e) = done {
        tracing::info!(error = %e, bytes, "WAL not preallocated");
    }
}

#[cfg(target_os = "linux")]
fn allocate(path: &Path, bytes: u64) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new().write(true).open(path)?;
    let fd = file.as_raw_fd();
    // SAFETY: both structs are plain data the kernel fills; `fd` is open for
    // the duration of the calls.
    let (fs, vfs) = unsafe {
        let (mut fs, mut vfs) = (
            std::mem::zeroed::<libc::statfs>(),
            std::mem::zeroed::<libc::statvfs>(),
        );
        if libc::fstatfs(fd, &mut fs) != 0 || libc::fstatvfs(fd, &mut vfs) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        (fs, vfs)
    };
    if fs.f_type == libc::TMPFS_MAGIC {
        return Ok(());
    }
    // Both are u64 on 64-bit Linux; a 32-bit target's narrower ones widen.
    #[allow(clippy::useless_conversion)]
    let free = u64::from(vfs.f_bavail).saturating_mul(u64::from(vfs.f_frsize));
    if free / 4 < bytes {
        return Err(std::io::Error::other(format!(
            "{free} bytes free: keeping them for the database"
        )));
    }
    let len = libc::off_t::try_from(bytes).map_err(std::io::Error::other)?;
    // SAFETY: a plain system call on an open descriptor.
    match unsafe { libc::fallocate(fd, 0, 0, len) } {
        0 => file.sync_all(),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(not(target_os = "linux"))]
fn allocate(_: &Path, _: u64) -> std::io::Result<()> {
    Ok(())
}

/// One `PASSIVE` checkpoint; the frames the WAL holds, or `None` if it failed.
fn checkpoint(conn: &Connection) -> Option<i64> {
    let frames = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(1));
    frames
        .map_err(|e| tracing::warn!(error = %e, "checkpoint failed"))
        .ok()
}

impl Drop for Sqlite {
    fn drop(&mut self) {
        self.applier.queue.lock().stop = true;
        self.applier.work.notify_all();
        self.groups.state.lock().stop = true;
        self.groups.work.notify_all();
    }
}

/// The writer's savepoints: one per batch of prepared transactions, or one
/// per transaction (an interactive one, or a prepared one applied alone).
#[derive(Clone, Copy)]
enum Savepoint {
    Batch,
    Txn,
}

impl Savepoint {
    /// (open, keep, undo) statements.
    fn sql(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Savepoint::Batch => (
                "SAVEPOINT batch",
                "RELEASE batch",
                "ROLLBACK TO batch; RELEASE batch",
            ),
            Savepoint::Txn => (
                "SAVEPOINT txn",
                "RELEASE txn",
                "ROLLBACK TO txn; RELEASE txn",
            ),
        }
    }
}

/// Opens the group's outer transaction if needed and savepoint `sp` in it.
fn enter(w: &mut Writer, sp: Savepoint) -> Result<(), StorageError> {
    if !w.open {
        begin_group(w)?;
    }
    w.conn.prepare_cached(sp.sql().0)?.execute([])?;
    Ok(())
}

/// Opens the group's outer transaction.
fn begin_group(w: &mut Writer) -> Result<(), StorageError> {
    // IMMEDIATE: take the write lock up front, so a read-then-write cannot
    // fail with SQLITE_BUSY when another process (the CLI) writes meanwhile.
    w.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
    w.open = true;
    Ok(())
}

/// What a batch is undone by: rolling back the group it opened (nothing
/// before it to keep, and no savepoint, so SQLite copies none of its pages
/// into a savepoint journal), or its savepoint in a group holding earlier work.
#[derive(Clone, Copy)]
enum BatchScope {
    OwnGroup,
    Savepoint,
}

fn open_batch(w: &mut Writer) -> Result<BatchScope, StorageError> {
    if w.open {
        enter(w, Savepoint::Batch)?;
        Ok(BatchScope::Savepoint)
    } else {
        begin_group(w)?;
        Ok(BatchScope::OwnGroup)
    }
}

/// Ends a batch: kept, or undone. An undone group of its own is rolled back
/// whole; nothing was handed over from it, so its number is reused.
fn close_batch(w: &mut Writer, scope: BatchScope, keep: bool) -> Result<(), StorageError> {
    match (scope, keep) {
        (BatchScope::OwnGroup, true) => Ok(()), // committed with its group
        (BatchScope::OwnGroup, false) => {
            let r = w.conn.execute_batch("ROLLBACK");
            w.open = false;
            Ok(r?)
        }
        (BatchScope::Savepoint, keep) => leave(w, Savepoint::Batch, keep),
    }
}

/// Ends savepoint `sp`: kept (`RELEASE`) or undone.
fn leave(w: &mut Writer, sp: Savepoint, keep: bool) -> Result<(), StorageError> {
    let (_, release, undo) = sp.sql();
    if keep {
        if let Err(e) = w.conn.prepare_cached(release)?.execute([]) {
            let _ = w.conn.execute_batch(undo);
            return Err(e.into());
        }
        Ok(())
    } else {
        Ok(w.conn.execute_batch(undo)?)
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
    /// the writer's backstop (0: none); and the bytes of WAL file to
    /// allocate ahead ([`preallocate_wal`]; 0: none).
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
        if preallocate > 0 {
            let w = writer.lock();
            preallocate_wal(&w.conn, Path::new(&wal_path), preallocate);
        }
        {
            let (w, g) = (writer.clone(), groups.clone());
            let wal_path = PathBuf::from(wal_path);
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
                .spawn(move || checkpointer(p, w, g, r, restart_after_frames))
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

/// How long a connection waits for another process's lock (the CLI's writes).
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

fn open_connection(
    path: &Path,
    read_only: bool,
    synchronous: &str,
) -> Result<Connection, StorageError> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(path, flags)?;
    // Other processes (the CLI) may write while the server runs.
    conn.busy_timeout(BUSY_TIMEOUT)?;
    if !read_only {
        conn.pragma_update(None, "journal_mode", "WAL")?;
    }
    conn.pragma_update(None, "synchronous", synchronous)?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // Savepoints journal every page they first touch: in memory, not a temp file.
    conn.pragma_update(None, "temp_store", "MEMORY")?;
    // Query-planner stability: without it SQLite re-prepares a statement
    // whenever a parameter it could plan on (a LIMIT, a `?4 = ''`) is rebound,
    // which was 15% of a GET's CPU.
    conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, true)?;
    // The writer runs every host and component statement; keep them all prepared.
    conn.set_prepared_statement_cache_capacity(128);
    Ok(conn)
}

fn check_names(table: &str, key: &str) -> Result<(), StorageError> {
    if table.is_empty() || table.len() > 64 {
        return Err(StorageError::Invalid(
            "table name must be 1 to 64 bytes".into(),
        ));
    }
    if key.len() > 1024 {
        return Err(StorageError::Invalid("key longer than 1024 bytes".into()));
    }
    Ok(())
}

fn scan_on(
    conn: &Connection,
    ns: &str,
    table: &str,
    (start, end): (&str, &str),
    order: Order,
    limit: u32,
) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
    check_names(table, start)?;
    // One statement per shape: a bound written `(?4 = '' OR k < ?4)` is not
    // one the planner can seek to, and a descending scan would then start at
    // the table's last key and walk back over every key above `end`.
    let mut stmt = conn.prepare_cached(match (order, end.is_empty()) {
        (Order::Asc, true) => "SELECT k, v FROM kv WHERE ns = ?1 AND tbl = ?2 AND k >= ?3 ORDER BY k LIMIT ?4",
        (Order::Asc, false) => "SELECT k, v FROM kv WHERE ns = ?1 AND tbl = ?2 AND k >= ?3 AND k < ?5 ORDER BY k LIMIT ?4",
        (Order::Desc, true) => "SELECT k, v FROM kv WHERE ns = ?1 AND tbl = ?2 AND k >= ?3 ORDER BY k DESC LIMIT ?4",
        (Order::Desc, false) => "SELECT k, v FROM kv WHERE ns = ?1 AND tbl = ?2 AND k >= ?3 AND k < ?5 ORDER BY k DESC LIMIT ?4",
    })?;
    let limit = limit.min(MAX_SCAN);
    let row = |r: &rusqlite::Row<'_>| Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?));
    let rows = if end.is_empty() {
        stmt.query_map(params![ns, table, start, limit], row)?
            .collect::<Result<_, _>>()?
    } else {
        stmt.query_map(params![ns, table, start, limit, end], row)?
            .collect::<Result<_, _>>()?
    };
    Ok(rows)
}

fn get_on(
    conn: &Connection,
    ns: &str,
    table: &str,
    key: &str,
) -> Result<Option<Vec<u8>>, StorageError> {
    check_names(table, key)?;
    let mut stmt = conn.prepare_cached("SELECT v FROM kv WHERE ns = ?1 AND tbl = ?2 AND k = ?3")?;
    Ok(stmt
        .query_row(params![ns, table, key], |r| r.get(0))
        .optional()?)
}

fn put_on(
    conn: &Connection,
    ns: &str,
    table: &str,
    key: &str,
    value: &[u8],
) -> Result<(), StorageError> {
    check_names(table, key)?;
    let mut stmt =
        conn.prepare_cached("INSERT OR REPLACE INTO kv (ns, tbl, k, v) VALUES (?1, ?2, ?3, ?4)")?;
    stmt.execute(params![ns, table, key, value])?;
    Ok(())
}

fn delete_on(conn: &Connection, ns: &str, table: &str, key: &str) -> Result<(), StorageError> {
    check_names(table, key)?;
    let mut stmt = conn.prepare_cached("DELETE FROM kv WHERE ns = ?1 AND tbl = ?2 AND k = ?3")?;
    stmt.execute(params![ns, table, key])?;
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

fn emit_on(conn: &Connection, e: &OutboxEvent) -> Result<(), StorageError> {
    let mut stmt = conn.prepare_cached(
        "INSERT INTO outbox (id, event_type, merchant_id, environment, subject_id, extra_url, payload, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?;
    stmt.execute(params![
        e.id,
        e.event_type,
        e.merchant_id,
        e.environment,
        e.subject_id,
        e.extra_url,
        e.payload,
        now_ms()
    ])?;
    Ok(())
}

impl Backend for Sqlite {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wal_bytes_count_the_frames_a_commit_writes() {
        let dir = tempfile::tempdir().unwrap();
        let db = Sqlite::open(&dir.path().join("t.db")).unwrap();
        let before = wal_bytes_written();
        let value = vec![7u8; 64 * 1024]; // spans many pages
        let mut tx = db.begin("c").unwrap();
        tx.put("t", "big", &value).unwrap();
        tx.commit().unwrap();
        let frame = 4096 + 24;
        let written = wal_bytes_written() - before; // other tests may add theirs
        assert!(written >= 16 * frame, "{written} bytes");
        let wal = std::fs::metadata(dir.path().join("t.db-wal"))
            .unwrap()
            .len();
        assert!(wal >= 16 * frame, "the WAL holds them: {wal} bytes");
    }

    /// An outbox event with id `id` (ids are unique: a taken one fails the insert).
    fn event(id: &str) -> Write {
        Write::Emit(mmc_storage::OutboxEvent {
            id: id.into(),
            event_type: "payment.created".into(),
            merchant_id: "m".into(),
            environment: "test".into(),
            subject_id: "p".into(),
            extra_url: None,
            payload: b"{}".to_vec(),
        })
    }

    fn put(key: &str, value: &str) -> Write {
        Write::Put {
            table: "t".into(),
            key: key.into(),
            value: value.as_bytes().to_vec(),
        }
    }

    /// Readers keep their snapshots between reads (`read_kv`) only while this
    /// process committed nothing: a read after a write's answer sees it, on
    /// whichever reader it lands, written by `apply` or by a transaction.
    #[test]
    fn a_kept_snapshot_never_hides_a_write_this_process_answered() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Sqlite::open(&dir.path().join("s.db")).unwrap());
        let workers: Vec<_> = (0..4)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || {
                    let key = format!("k{t}");
                    for i in 0..150 {
                        let value = i.to_string();
                        if i % 2 == 0 {
                            assert!(db.apply("c", vec![], vec![put(&key, &value)]).unwrap());
                        } else {
                            let mut tx = db.begin("c").unwrap();
                            tx.put("t", &key, value.as_bytes()).unwrap();
                            tx.commit().unwrap();
                        }
                        assert_eq!(
                            db.get("c", "t", &key).unwrap(),
                            Some(value.clone().into_bytes()),
                            "{key} after write {i}"
                        );
                        let rows = db.scan("c", "t", &key, "", 1).unwrap();
                        assert_eq!(rows, vec![(key.clone(), value.into_bytes())]);
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    }

    /// Another process's commits are not counted here: a kept snapshot may
    /// hide one for at most `SNAPSHOT_FOR`. And an idle reader lets go of
    /// its snapshot, so the WAL can restart (a TRUNCATE checkpoint completes).
    #[test]
    fn another_process_write_is_seen_soon_and_idle_snapshots_let_the_wal_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let db = Sqlite::open(&path).unwrap();
        let other = Sqlite::open(&path).unwrap(); // as the CLI would, from another process
        assert!(db.apply("c", vec![], vec![put("k", "1")]).unwrap());
        assert_eq!(db.get("c", "t", "k").unwrap(), Some(b"1".to_vec()));
        assert!(other.apply("c", vec![], vec![put("k", "2")]).unwrap());
        let written = Instant::now();
        while db.get("c", "t", "k").unwrap() != Some(b"2".to_vec()) {
            assert!(written.elapsed() < Duration::from_secs(5), "never seen");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(db.get("c", "t", "k").unwrap(), Some(b"2".to_vec())); // a snapshot kept again
        let checkpoint = Connection::open(&path).unwrap();
        let idle = Instant::now();
        loop {
            // (busy, frames in the WAL, frames checkpointed): 0 frames once it restarted.
            let (busy, log): (i64, i64) = checkpoint
                .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })
                .unwrap();
            if busy == 0 && log == 0 {
                break;
            }
            assert!(
                idle.elapsed() < Duration::from_secs(5),
                "a snapshot still held"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(db.get("c", "t", "k").unwrap(), Some(b"2".to_vec()));
    }

    #[test]
    fn dropped_transaction_rolls_back_and_scan_is_ordered() {
        let dir = tempfile::tempdir().unwrap();
        let db = Sqlite::open(&dir.path().join("t.db")).unwrap();
        {
            let mut tx = db.begin("c").unwrap();
            tx.put("t", "b", b"2").unwrap();
            tx.put("t", "a", b"1").unwrap();
            tx.commit().unwrap();
        }
        {
            let mut tx = db.begin("c").unwrap();
            tx.put("t", "c", b"3").unwrap();
            // dropped: rolled back
        }
        let rows = db.scan("c", "t", "", "", 10).unwrap();
        assert_eq!(
            rows,
            vec![("a".into(), b"1".to_vec()), ("b".into(), b"2".to_vec())]
        );
        assert_eq!(
            db.get("other", "t", "a").unwrap(),
            None,
            "namespaces are separate"
        );
    }

    #[test]
    fn apply_writes_only_when_every_check_still_holds() {
        use mmc_storage::{Check, Write};
        let dir = tempfile::tempdir().unwrap();
        let db = Sqlite::open(&dir.path().join("a.db")).unwrap();
        let check = |key: &str, value: Option<&[u8]>| Check {
            table: "t".into(),
            key: key.into(),
            value: value.map(<[u8]>::to_vec),
        };
        // Absent as read: applied, durable, visible at once.
        assert!(
            db.apply("c", vec![check("a", None)], vec![put("a", "1")])
                .unwrap()
        );
        assert_eq!(db.get("c", "t", "a").unwrap(), Some(b"1".to_vec()));
        // A draft that read "a" as absent is stale now: nothing of it is written.
        let stale = db
            .apply(
                "c",
                vec![check("a", None)],
                vec![put("a", "2"), put("b", "2")],
            )
            .unwrap();
        assert!(!stale);
        assert_eq!(db.get("c", "t", "a").unwrap(), Some(b"1".to_vec()));
        assert_eq!(db.get("c", "t", "b").unwrap(), None);
        // Read as it is: applied, deletes included.
        let writes = vec![
            Write::Delete {
                table: "t".into(),
                key: "a".into(),
            },
            put("b", "3"),
        ];
        assert!(db.apply("c", vec![check("a", Some(b"1"))], writes).unwrap());
        assert_eq!(db.get("c", "t", "a").unwrap(), None);
        assert_eq!(db.get("c", "t", "b").unwrap(), Some(b"3".to_vec()));
    }

    #[test]
    fn a_write_that_fails_in_a_batch_undoes_only_its_own_job() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Sqlite::open(&dir.path().join("b.db")).unwrap());
        assert!(db.apply("c", vec![], vec![event("evt_taken")]).unwrap());
        // An open transaction holds the writer: the first apply below takes
        // the applier to the lock, the rest queue behind it as one batch.
        let holder = db.begin("c").unwrap();
        let spawn = |key: &'static str, event_id: &'static str| {
            let db = db.clone();
            std::thread::spawn(move || db.apply("c", vec![], vec![put(key, "1"), event(event_id)]))
        };
        let first = spawn("first", "evt_first");
        std::thread::sleep(Duration::from_millis(50));
        let before = spawn("before", "evt_before");
        std::thread::sleep(Duration::from_millis(20));
        let failing = spawn("failing", "evt_taken"); // its event id is taken: the insert fails
        std::thread::sleep(Duration::from_millis(20));
        let after = spawn("after", "evt_after");
        std::thread::sleep(Duration::from_millis(50));
        drop(holder);
        assert!(first.join().unwrap().unwrap());
        assert!(before.join().unwrap().unwrap());
        assert!(failing.join().unwrap().is_err());
        assert!(after.join().unwrap().unwrap());
        for key in ["first", "before", "after"] {
            assert_eq!(db.get("c", "t", key).unwrap(), Some(b"1".to_vec()), "{key}");
        }
        // Its put came before the failed insert, in the same job: undone with it.
        assert_eq!(db.get("c", "t", "failing").unwrap(), None);
        // And the writer goes on.
        assert!(db.apply("c", vec![], vec![put("later", "1")]).unwrap());
    }

    /// The same, for both kinds of batch: one that opens its group (no
    /// savepoint: undone by rolling the group back) and one inside a group
    /// that already holds an earlier transaction (which must survive).
    #[test]
    fn a_failed_batch_is_undone_whether_or_not_it_opened_its_group() {
        for group_already_open in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let db = Sqlite::open(&dir.path().join("g.db")).unwrap();
            assert!(db.apply("c", vec![], vec![event("evt_taken")]).unwrap());
            let job = |key: &str, event_id: &str| {
                Arc::new(Job {
                    ns: "c".into(),
                    checks: vec![],
                    writes: vec![put(key, "1"), event(event_id)],
                    claimed: AtomicBool::new(true),
                    outcome: Mutex::new(None),
                    caller: std::thread::current(),
                })
            };
            let mut w = db.writer.lock();
            assert!(!w.open, "the first apply's group is committed");
            if group_already_open {
                enter(&mut w, Savepoint::Txn).unwrap();
                put_on(&w.conn, "c", "t", "earlier", b"1").unwrap();
                leave(&mut w, Savepoint::Txn, true).unwrap();
            }
            let jobs = vec![
                job("before", "evt_before"),
                job("failing", "evt_taken"), // its event id is taken: the insert fails
                job("after", "evt_after"),
            ];
            let outcomes: Vec<_> = apply_batch(&mut w, jobs)
                .into_iter()
                .map(|(_, o)| o.map_err(|e| e.to_string()))
                .collect();
            assert!(
                matches!(outcomes[..], [Ok(true), Err(_), Ok(true)]),
                "{outcomes:?}"
            );
            assert!(w.open, "the jobs that applied wait in the open group");
            drop(w);
            // A later apply joins that group and commits it.
            assert!(db.apply("c", vec![], vec![put("later", "1")]).unwrap());
            let mut kept = vec!["before", "after", "later"];
            if group_already_open {
                kept.push("earlier");
            }
            for key in kept {
                assert_eq!(db.get("c", "t", key).unwrap(), Some(b"1".to_vec()), "{key}");
            }
            assert_eq!(db.get("c", "t", "failing").unwrap(), None);
        }
    }

    #[test]
    fn concurrent_applies_all_become_durable_and_a_conflict_applies_once() {
        use mmc_storage::Check;
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Sqlite::open(&dir.path().join("q.db")).unwrap());
        let absent = |key: &str| Check {
            table: "t".into(),
            key: key.into(),
            value: None,
        };
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || {
                    let mut won = 0;
                    for i in 0..50 {
                        let key = format!("{t:02}-{i:03}");
                        assert!(
                            db.apply("c", vec![absent(&key)], vec![put(&key, "v")])
                                .unwrap()
                        );
                        // Applied means durable and visible to readers, at once.
                        assert!(db.get("c", "t", &key).unwrap().is_some());
                        // Every thread races for the same key: one of them gets it.
                        let shared = format!("shared-{i:03}");
                        let mine = format!("{t}");
                        if db
                            .apply("c", vec![absent(&shared)], vec![put(&shared, &mine)])
                            .unwrap()
                        {
                            won += 1;
                        }
                    }
                    won
                })
            })
            .collect();
        let won: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
        assert_eq!(won, 50, "each shared key applied exactly once");
        drop(db);
        let again = Sqlite::open(&dir.path().join("q.db")).unwrap();
        assert_eq!(again.scan("c", "t", "", "", 1000).unwrap().len(), 450);
    }

    /// Under writes that never pause, the WAL is never wholly copied when a
    /// group begins: only the checkpointer's restart (the writer's backstop is
    /// off here) keeps it from growing with everything ever written.
    #[test]
    fn the_wal_restarts_under_writes_that_never_pause() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("w.db");
        let db = Arc::new(Sqlite::open_with(&path, 256, 0, 0).unwrap());
        let before = wal_bytes_written(); // other tests add theirs: a few pages
        let value = "v".repeat(4096); // a page or more per transaction
        let (threads, each) = (4, 2_000);
        let writers: Vec<_> = (0..threads)
            .map(|t| {
                let (db, value) = (db.clone(), value.clone());
                std::thread::spawn(move || {
                    for i in 0..each {
                        let key = format!("{t}-{i:05}");
                        assert!(db.apply("c", vec![], vec![put(&key, &value)]).unwrap());
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
        // ~130 MiB of frames were written (a 4 KiB value takes two pages); the
        // WAL file is as long as the most it held between two restarts, ~20
        // MiB here: the checkpointer looks every 100 ms, the writes go fast.
        let written = wal_bytes_written() - before;
        let wal = std::fs::metadata(dir.path().join("w.db-wal"))
            .unwrap()
            .len();
        assert!(written > 64 << 20, "only {written} bytes written");
        assert!(
            wal * 3 < written,
            "WAL of {wal} bytes after {written}: never restarted"
        );
        drop(db);
        let again = Sqlite::open(&path).unwrap();
        for t in 0..threads {
            for i in (0..each).step_by(97).chain([each - 1]) {
                let key = format!("{t}-{i:05}");
                assert_eq!(
                    again.get("c", "t", &key).unwrap(),
                    Some(value.clone().into_bytes())
                );
            }
        }
    }

    #[test]
    fn the_wal_restart_mark_is_taken_in_mib_and_refused_under_the_least() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.db");
        let low = Sqlite::open_with_wal_restart(&path, WAL_RESTART_MIB_MIN - 1);
        assert!(
            matches!(&low, Err(StorageError::Invalid(m)) if m.contains("the least is 16")),
            "{:?}",
            low.err()
        );
        let db = Sqlite::open_with_wal_restart(&path, 64).unwrap();
        let backstop: i64 = db
            .writer
            .lock()
            .conn
            .pragma_query_value(None, "wal_autocheckpoint", |r| r.get(0))
            .unwrap();
        assert_eq!(
            backstop,
            64 * 256 * 2,
            "the writer's backstop: twice the mark"
        );
        assert!(db.apply("c", vec![], vec![put("k", "v")]).unwrap());
    }

    /// The WAL file gets its blocks at open (not on tmpfs, where there are
    /// none to allocate), and the zeros past its header are no frames: what
    /// was written survives a reopen that recovers the WAL, and a second
    /// opener finds the file allocated and leaves it as it is.
    #[test]
    fn the_wal_is_allocated_ahead_and_its_zeros_are_no_frames() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.db");
        let wal = dir.path().join("p.db-wal");
        let db = Sqlite::open_with_wal_restart(&path, 16).unwrap();
        let len = std::fs::metadata(&wal).unwrap().len();
        let tmpfs = {
            let out = std::process::Command::new("stat")
                .args(["-f", "-c", "%T"])
                .arg(dir.path())
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).trim() == "tmpfs"
        };
        if tmpfs {
            assert_eq!(len, 0, "allocated on tmpfs");
        } else {
            assert_eq!(len, 16 << 20, "the WAL was not allocated ahead");
        }
        for i in 0..50 {
            assert!(
                db.apply("c", vec![], vec![put(&format!("k{i:02}"), "v")])
                    .unwrap()
            );
        }
        // Another opener with a higher mark (as the CLI would, configured
        // so) checkpoints and truncates the WAL under SQLite's locks, then
        // allocates its own size, unless this one is mid-write: nothing lost.
        let other = Sqlite::open_with_wal_restart(&path, 32).unwrap();
        assert!(std::fs::metadata(&wal).unwrap().len() >= len);
        assert_eq!(other.scan("c", "t", "", "", 100).unwrap().len(), 50);
        assert!(db.apply("c", vec![], vec![put("k50", "v")]).unwrap());
        assert_eq!(other.scan("c", "t", "", "", 100).unwrap().len(), 51);
        drop(other);
        // As a crash leaves them (the database file first, then the WAL,
        // which holds every frame the copy of the database may have): a new
        // process recovers the frames from the WAL, ahead of the zeros.
        let copy = tempfile::tempdir().unwrap();
        std::fs::copy(&path, copy.path().join("p.db")).unwrap();
        std::fs::copy(&wal, copy.path().join("p.db-wal")).unwrap();
        drop(db);
        let again = Sqlite::open_with_wal_restart(&copy.path().join("p.db"), 16).unwrap();
        assert_eq!(again.scan("c", "t", "", "", 100).unwrap().len(), 51);
        assert_eq!(again.get("c", "t", "k50").unwrap(), Some(b"v".to_vec()));
    }

    #[test]
    fn the_held_pass_restarts_the_wal_past_a_reader_that_kept_its_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.db");
        // The checkpointer thread never holds the writer here: the test does.
        let db = Sqlite::open_with(&path, i64::MAX, 0, 0).unwrap();
        let frames = |c: &Connection| -> i64 {
            c.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get(1))
                .unwrap()
        };
        let value = "v".repeat(2048);
        for i in 0..40 {
            assert!(
                db.apply("c", vec![], vec![put(&format!("a{i}"), &value)])
                    .unwrap()
            );
        }
        // An idle reader with a snapshot on those frames, as `read_kv` keeps
        // one (its age pushed ahead: the checkpointer's sweep must not end it).
        let mut reader = KvReader {
            conn: open_connection(&path, true, "NORMAL").unwrap(),
            snapshot: None,
            last_read: 0,
        };
        reader.conn.execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .conn
            .query_row("SELECT count(*) FROM kv", [], |r| r.get(0))
            .unwrap();
        let far = Instant::now() + Duration::from_secs(3600);
        reader.snapshot = Some((db.groups.commits.load(Ordering::SeqCst), far));
        db.kv_readers.lock().push(reader);
        for i in 0..40 {
            assert!(
                db.apply("c", vec![], vec![put(&format!("b{i}"), &value)])
                    .unwrap()
            );
        }
        let conn = open_connection(&path, false, "NORMAL").unwrap();
        let before = frames(&conn);
        assert!(before > 80, "{before} frames");
        assert!(restart_pass(&conn, &db.writer, &db.groups, &db.kv_readers));
        // The next group starts the WAL from its top.
        assert!(db.apply("c", vec![], vec![put("c", "1")]).unwrap());
        let after = frames(&conn);
        assert!(
            after < 10,
            "{after} frames after the restart ({before} before)"
        );
        assert_eq!(
            db.get("c", "t", "a0").unwrap(),
            Some(value.clone().into_bytes())
        );
        assert_eq!(db.get("c", "t", "b39").unwrap(), Some(value.into_bytes()));
    }

    #[test]
    fn outbox_cursor_starts_after_what_an_older_file_dispatched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("o.db");
        {
            // A file from before the cursor: two events dispatched by flag, one not.
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(
                "CREATE TABLE outbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
                    event_type TEXT NOT NULL, merchant_id TEXT NOT NULL, environment TEXT NOT NULL,
                    subject_id TEXT NOT NULL, extra_url TEXT, payload BLOB NOT NULL,
                    created_ms INTEGER NOT NULL, dispatched INTEGER NOT NULL DEFAULT 0);
                 INSERT INTO outbox (id, event_type, merchant_id, environment, subject_id, payload, created_ms, dispatched)
                 VALUES ('e1', 't', 'm', 'test', 's', x'', 0, 1), ('e2', 't', 'm', 'test', 's', x'', 0, 1),
                        ('e3', 't', 'm', 'test', 's', x'', 0, 0);",
            )
            .unwrap();
        }
        let db = Sqlite::open(&path).unwrap();
        let seq: i64 = db
            .read(|c| Ok(c.query_row("SELECT seq FROM outbox_cursor", [], |r| r.get(0))?))
            .unwrap();
        assert_eq!(seq, 2, "e3 is still to dispatch");
    }

    #[test]
    fn concurrent_transactions_share_commits_and_all_become_durable() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Sqlite::open(&dir.path().join("g.db")).unwrap());
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let db = db.clone();
                std::thread::spawn(move || {
                    for i in 0..50 {
                        let mut tx = db.begin("c").unwrap();
                        tx.put("t", &format!("{t:02}-{i:03}"), b"v").unwrap();
                        tx.commit().unwrap();
                        // Committed means visible to readers (on disk), at once.
                        assert!(
                            db.get("c", "t", &format!("{t:02}-{i:03}"))
                                .unwrap()
                                .is_some()
                        );
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(db.scan("c", "t", "", "", 1000).unwrap().len(), 400);
        drop(db);
        // Reopened from the file: everything is there.
        let again = Sqlite::open(&dir.path().join("g.db")).unwrap();
        assert_eq!(again.scan("c", "t", "", "", 1000).unwrap().len(), 400);
    }

    /// A transaction that reads outside itself while it holds the writer (as a
    /// component may) waits for what it saw to be durable; the committer must
    /// make that durable without the writer. It once took the writer first:
    /// both waited for ever (seen as a hung test suite).
    #[test]
    fn a_transaction_reading_outside_itself_never_deadlocks_the_committer() {
        let dir = tempfile::tempdir().unwrap();
        let db = Arc::new(Sqlite::open(&dir.path().join("d.db")).unwrap());
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        let mut threads = Vec::new();
        for t in 0..4 {
            let db = db.clone();
            threads.push(std::thread::spawn(move || {
                for i in 0..200 {
                    let mut tx = db.begin("c").unwrap();
                    tx.put("t", &format!("{t}-{i}"), b"v").unwrap();
                    // A read outside the transaction, writer held.
                    db.get("c", "t", &format!("{}-{i}", (t + 1) % 4)).unwrap();
                    tx.commit().unwrap();
                }
            }));
        }
        for t in 0..4 {
            let db = db.clone();
            threads.push(std::thread::spawn(move || {
                for i in 0..200 {
                    let w = Write::Put {
                        table: "a".into(),
                        key: format!("{t}-{i}"),
                        value: b"v".to_vec(),
                    };
                    assert!(db.apply("c", vec![], vec![w]).unwrap());
                }
            }));
        }
        std::thread::spawn(move || {
            for t in threads {
                t.join().unwrap();
            }
            done_tx.send(()).unwrap();
        });
        done_rx
            .recv_timeout(Duration::from_secs(60))
            .expect("every transaction ended: no deadlock");
        assert_eq!(db.scan("c", "t", "", "", 1000).unwrap().len(), 800);
        assert_eq!(db.scan("c", "a", "", "", 1000).unwrap().len(), 800);
    }
}
