//! Checkpoints: the WAL copied back into the database off the writers' path,
//! restarted when it has grown, its file preallocated so appends do not
//! extend it.

use super::*;

/// Folds the WAL into the database file, off the writer's path. `PASSIVE`
/// never blocks writers or readers; under `NORMAL` it fsyncs the WAL before
/// and the database after, so the WAL is reused only once the copy is durable.
///
/// Under constant load the WAL is never wholly copied at the moment a group
/// begins, so it never restarts from its top by itself. Once it holds more
/// than its restart mark ([`WAL_RESTART_MIB`]), the checkpointer copies what is left with
/// the writer held (the frames of a few milliseconds, right after two passes
/// without it: [`restart_pass`]), and the next group restarts the WAL.
///
/// It also keeps the WAL file allocated a step ahead of its frames, up to
/// `allocate_up_to` bytes ([`allocate_ahead`]).
pub(crate) fn checkpointer(
    path: PathBuf,
    wal_path: PathBuf,
    writer: Arc<Mutex<Writer>>,
    groups: Arc<Groups>,
    kv_readers: Arc<Mutex<Vec<KvReader>>>,
    restart_after_frames: i64,
    allocate_up_to: u64,
) {
    let conn = match open_connection(&path, false, "NORMAL") {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "checkpointer cannot open the database; the WAL will grow");
            return;
        }
    };
    let frame_bytes = writer.lock().frame_bytes;
    let mut allocating = allocate_up_to > 0;
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
        let frames = checkpoint(&conn);
        if let Some(frames) = frames.filter(|_| allocating) {
            let used = u64::try_from(frames).unwrap_or(0) * frame_bytes;
            allocating = allocate_ahead(&wal_path, used, allocate_up_to);
        }
        if frames.is_some_and(|frames| frames > restart_after_frames) {
            checkpoint(&conn); // the frames written meanwhile: fewer left for the held pass
            restart_pass(&conn, &writer, &groups, &kv_readers);
        }
    }
}

/// What the WAL file is allocated at start, and how close its frames may
/// come to the file's end before the checkpointer allocates the rest. An
/// idle or lightly written store (whose WAL restarts from its top long
/// before) keeps one step on disk, not its restart mark (a gigabyte by
/// default); a store under load gets its mark once, the first time its
/// frames near the step's end. Against allocating the mark at open, creates
/// read −5.7% and +6.5% in two `bench/ab.sh` runs of four and six pairs,
/// one with each build first: within this VM's noise.
pub(crate) const WAL_ALLOCATION_STEP: u64 = 32 << 20;

/// Once the WAL's `used` bytes come within a step of its file's end,
/// allocates the file up to `limit`. Only past the file's end, where no
/// frame is (SQLite counts a frame only with its header's salts and a valid
/// checksum): no lock needed. Returns whether to go on allocating (not where
/// the file system has nothing to allocate or refuses).
pub(crate) fn allocate_ahead(wal_path: &Path, used: u64, limit: u64) -> bool {
    let len = file_len(wal_path);
    if len == 0 || len >= limit || used + WAL_ALLOCATION_STEP <= len {
        return true; // no WAL yet (a clean restart), or enough ahead
    }
    match allocate(wal_path, limit) {
        Ok(true) => true,
        Ok(false) => false,
        Err(e) => {
            tracing::info!(error = %e, "WAL not allocated ahead from here on");
            false
        }
    }
}

/// How long the held pass waits for readers still on the frames it copied
/// (those in the middle of a read) before it gives up until the next round.
pub(crate) const RESTART_READER_WAIT: Duration = Duration::from_millis(5);

/// Copies what is left of the WAL with the writer held, so that the next group
/// restarts it. Returns whether it could: every frame copied and no reader
/// left on them. A reader's snapshot pins the frames it sees: a `PASSIVE`
/// copy stops short of them and the WAL does not restart, so under reads
/// the writer was held once for nothing, then again 100 ms later (three
/// holds for one restart, measured). So the idle readers' kept snapshots are
/// ended here, and the copy (`RESTART`) waits a moment for readers in the
/// middle of a read.
pub(crate) fn restart_pass(
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
/// restart mark (SQLite removes the WAL at a clean shutdown). At start only
/// its first step ([`WAL_ALLOCATION_STEP`]); the checkpointer allocates the
/// rest as the frames come ([`allocate_ahead`]).
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
pub(crate) fn preallocate_wal(conn: &Connection, wal_path: &Path, bytes: u64) {
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
pub(crate) const PREALLOCATE_EMPTIES_UP_TO: u64 = 16 << 20;

pub(crate) fn file_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

pub(crate) fn preallocate_unless_busy(conn: &Connection, wal_path: &Path, bytes: u64) {
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
        allocate(wal_path, bytes).map(|_| ())
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
/// Allocates the file's first `bytes` (growing it to that length if
/// shorter); `Ok(false)` where there is nothing to allocate (tmpfs).
pub(crate) fn allocate(path: &Path, bytes: u64) -> std::io::Result<bool> {
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
        return Ok(false);
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
        0 => file.sync_all().map(|()| true),
        _ => Err(std::io::Error::last_os_error()),
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn allocate(_: &Path, _: u64) -> std::io::Result<bool> {
    Ok(false)
}

/// One `PASSIVE` checkpoint; the frames the WAL holds, or `None` if it failed.
pub(crate) fn checkpoint(conn: &Connection) -> Option<i64> {
    let frames = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(1));
    frames
        .map_err(|e| tracing::warn!(error = %e, "checkpoint failed"))
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::put;

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

    /// Disk blocks a file holds (what `du` counts), not its length.
    fn allocated(path: &Path) -> u64 {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(path).map_or(0, |m| m.blocks() * 512)
    }

    /// An idle store gives its WAL one step of disk, not its restart mark;
    /// under writes the file is allocated ahead of the frames, never past
    /// the mark.
    #[test]
    fn an_idle_store_keeps_one_step_of_wal_and_a_written_one_is_allocated_ahead() {
        // In the checkout, not the system's temporary directory: that may be
        // a tmpfs, where nothing is allocated.
        let dir = tempfile::tempdir_in(env!("CARGO_MANIFEST_DIR")).unwrap();
        let path = dir.path().join("a.db");
        let wal_path = dir.path().join("a.db-wal");
        let mark = 128u64 << 20;
        let db = Arc::new(Sqlite::open_with(&path, 1 << 30, 0, mark).unwrap());
        std::thread::sleep(CHECKPOINT_EVERY * 3);
        let idle = allocated(&wal_path);
        assert!(
            (WAL_ALLOCATION_STEP..WAL_ALLOCATION_STEP + (1 << 20)).contains(&idle),
            "an idle store's WAL holds {idle} bytes of disk"
        );
        // ~100 MiB of frames from writers that never pause (so the WAL does
        // not restart from its top; its mark is far off here), the file
        // watched meanwhile: allocated past what was written, never past the
        // mark.
        let before = wal_bytes_written();
        let value = "v".repeat(4096); // two pages a transaction
        let writers: Vec<_> = (0..4)
            .map(|t| {
                let (db, value) = (db.clone(), value.clone());
                std::thread::spawn(move || {
                    for i in 0..3_000 {
                        let key = format!("{t}-{i:05}");
                        assert!(db.apply("c", vec![], vec![put(&key, &value)]).unwrap());
                    }
                })
            })
            .collect();
        let mut most_ahead = 0i64;
        while !writers.iter().all(|w| w.is_finished()) {
            let written = wal_bytes_written() - before;
            let len = file_len(&wal_path);
            assert!(
                len <= mark.max(written + (1 << 20)),
                "WAL file of {len} bytes after {written} written: allocated past its mark"
            );
            if len > WAL_ALLOCATION_STEP {
                most_ahead = most_ahead.max(len as i64 - written as i64);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        for w in writers {
            w.join().unwrap();
        }
        assert!(
            most_ahead > (WAL_ALLOCATION_STEP / 2) as i64,
            "past its first step the WAL file was never allocated ahead of its frames \
             (at most {most_ahead} bytes)"
        );
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
}
