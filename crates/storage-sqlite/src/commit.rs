//! Group commit: writers' transactions applied in batches on the writer
//! connection, then made durable together by one WAL sync, each caller
//! answered only once its commit is on disk.

use super::*;

/// Bytes the writer connections of this process wrote to their WAL.
pub(crate) static WAL_BYTES: AtomicU64 = AtomicU64::new(0);

/// Bytes written to the WAL by every SQLite database this process opened
/// (the server opens one): frames, each a page and its 24-byte header, as
/// SQLite counts them (`SQLITE_DBSTATUS_CACHE_WRITE`: pages written to the
/// WAL, whatever the commit's outcome). Neither the 32-byte WAL header nor
/// the checkpoints' copies into the database file are included.
pub fn wal_bytes_written() -> u64 {
    WAL_BYTES.load(Ordering::Relaxed)
}

/// Adds the pages the writer wrote to the WAL since the last call.
pub(crate) fn count_wal_writes(w: &Writer) {
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

impl Groups {
    pub(crate) fn resolved(&self) -> u64 {
        self.resolved_through.load(Ordering::SeqCst)
    }

    /// Waits until `group` is resolved, first asking the committer to commit
    /// it if it is still open and nobody has asked yet.
    pub(crate) fn wait_durable(&self, group: u64) -> Result<(), StorageError> {
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
    pub(crate) fn wait_visible_durable(&self) {
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
pub(crate) fn commit_open(w: &mut Writer, groups: &Groups) -> (u64, Result<(), String>) {
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
    pub(crate) fn committed(&mut self, group: u64, result: Result<(), String>) {
        if let Err(e) = result {
            self.fail(group, e);
        }
        self.committed_through = self.committed_through.max(group);
    }

    pub(crate) fn fail(&mut self, group: u64, e: String) {
        self.failed.push((group, e));
        let excess = self.failed.len().saturating_sub(64);
        self.failed.drain(..excess);
    }
}

/// How resolved `group` ended: durable, or the error its commit or sync failed with.
pub(crate) fn group_failure(failed: &[(u64, String)], group: u64) -> Result<(), StorageError> {
    match failed.iter().find(|(g, _)| *g == group) {
        Some((_, e)) => Err(StorageError::Unavailable(format!("commit failed: {e}"))),
        None => Ok(()),
    }
}

/// Makes committed groups durable, one `fdatasync` for all of them, and
/// answers their transactions. A group is committed either by the applier,
/// right after its batch when the committer is idle (no lock handed over),
/// or here, when a transaction waits on a group nobody committed.
pub(crate) fn committer(writer: Arc<Mutex<Writer>>, groups: Arc<Groups>, wal_path: PathBuf) {
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
pub(crate) fn make_durable(groups: &Groups, wal: &mut Option<File>, wal_path: &Path) {
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
pub(crate) fn applier(writer: Arc<Mutex<Writer>>, groups: Arc<Groups>, applier: Arc<Applier>) {
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
pub(crate) fn apply_batch(
    w: &mut Writer,
    jobs: Vec<Arc<Job>>,
) -> Vec<(Arc<Job>, Result<bool, StorageError>)> {
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
pub(crate) fn apply_on(w: &mut Writer, job: &Job) -> Result<bool, StorageError> {
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
pub(crate) struct OnWriter<'a> {
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
pub(crate) fn sync_wal(wal: &mut Option<File>, path: &Path) -> Result<(), String> {
    if wal.is_none() {
        *wal = Some(File::open(path).map_err(|e| format!("open {}: {e}", path.display()))?);
    }
    let result = wal.as_ref().expect("opened above").sync_data();
    result.map_err(|e| {
        *wal = None; // reopened next time
        format!("fsync {}: {e}", path.display())
    })
}
