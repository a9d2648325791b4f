//! Online copies of a live store, and the check that no process has one open.
//!
//! The copy is SQLite's online backup, read from one snapshot: a read
//! transaction is opened on the source first and held to the end, so every
//! step copies pages of the same moment. (Without it, each step opens its own
//! read, and a write by another process between two steps restarts the copy
//! from page one: under steady load it would never end.) In WAL mode a reader
//! never blocks a writer, so the server keeps committing meanwhile; its WAL
//! only cannot restart from its top until the copy ends. Pages go over a few
//! at a time with a pause between steps, leaving the disk and the CPU to the
//! server.

use std::path::Path;
use std::time::Duration;

use rusqlite::backup::{Backup, StepResult};
use rusqlite::{Connection, OpenFlags};

use mmc_storage::StorageError;

/// Pages copied per step (4 MiB at the default 4 KiB page).
const PAGES_PER_STEP: i32 = 1024;
/// The pause between two steps.
const PAUSE: Duration = Duration::from_millis(2);

/// What a copy holds.
#[derive(Debug, Clone, Copy)]
pub struct Copied {
    pub pages: u64,
    pub bytes: u64,
}

/// Copies the database at `from` into a new file `to`, as of one moment:
/// every transaction committed before the copy began, none after. The copy
/// is a single file in rollback-journal mode (no `-wal` beside it), checked
/// (`quick_check`) and on disk before this returns. `to` must not exist.
pub fn copy_live(from: &Path, to: &Path) -> Result<Copied, StorageError> {
    if !from.is_file() {
        return Err(StorageError::Invalid(format!(
            "no SQLite database at {}",
            from.display()
        )));
    }
    if to.exists() {
        return Err(StorageError::Invalid(format!("{} exists", to.display())));
    }
    // Read-write without create: a missing file is an error, not a new store,
    // and SQLite can open the WAL index even when no server has it open.
    let src = Connection::open_with_flags(
        from,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    src.busy_timeout(Duration::from_secs(10))?;
    // The snapshot: it begins at the first read and lasts until COMMIT.
    src.execute_batch("BEGIN DEFERRED")?;
    src.query_row("SELECT count(*) FROM sqlite_schema", [], |r| {
        r.get::<_, i64>(0)
    })?;
    let mut dst = Connection::open(to)?;
    let copied = copy_pages(&src, &mut dst);
    src.execute_batch("COMMIT")?;
    let copied = copied?;
    seal(&dst)?;
    dst.close().map_err(|(_, e)| StorageError::from(e))?;
    std::fs::File::open(to)
        .and_then(|f| f.sync_all())
        .map_err(|e| StorageError::Unavailable(format!("fsync {}: {e}", to.display())))?;
    Ok(copied)
}

fn copy_pages(src: &Connection, dst: &mut Connection) -> Result<Copied, StorageError> {
    let backup = Backup::new(src, dst)?;
    loop {
        match backup.step(PAGES_PER_STEP)? {
            StepResult::Done => break,
            // The destination is this process's own new file: busy or locked
            // only for a moment, if ever.
            _ => std::thread::sleep(PAUSE),
        }
    }
    let pages = backup.progress().pagecount as u64;
    let page_size: i64 = src.pragma_query_value(None, "page_size", |r| r.get(0))?;
    Ok(Copied {
        pages,
        bytes: pages * page_size as u64,
    })
}

/// The copy as a file of its own: out of WAL mode, and checked.
fn seal(dst: &Connection) -> Result<(), StorageError> {
    let mode: String = dst.pragma_update_and_check(None, "journal_mode", "DELETE", |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("delete") {
        return Err(StorageError::Unavailable(format!(
            "the copy stayed in journal mode {mode}"
        )));
    }
    check(dst)
}

/// `PRAGMA quick_check` on an open database: `ok`, or the problems it names.
pub fn check(conn: &Connection) -> Result<(), StorageError> {
    let verdict: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
    if verdict == "ok" {
        Ok(())
    } else {
        Err(StorageError::Unavailable(format!(
            "the database fails SQLite's check: {verdict}"
        )))
    }
}

/// Whether a process has the database at `db` open, as far as SQLite's WAL
/// index shows: every connection to a WAL database holds a shared lock on the
/// index's "dead man switch" byte (offset 128 of `<db>-shm`, SQLite's unix
/// VFS) while it is open. A lock held by this process is not seen.
pub fn in_use(db: &Path) -> std::io::Result<bool> {
    let mut shm = db.as_os_str().to_owned();
    shm.push("-shm");
    match std::fs::File::open(Path::new(&shm)) {
        Ok(file) => dead_man_switch_held(&file),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(target_os = "linux")]
fn dead_man_switch_held(file: &std::fs::File) -> std::io::Result<bool> {
    use std::os::fd::AsRawFd;
    /// `UNIX_SHM_DMS` in SQLite's os_unix.c: `(22 + 8) * 4 + 8`.
    const DMS: libc::off_t = 128;
    // SAFETY: plain data, filled by the kernel.
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as libc::c_short;
    lock.l_whence = libc::SEEK_SET as libc::c_short;
    lock.l_start = DMS;
    lock.l_len = 1;
    // SAFETY: F_GETLK only reads the descriptor's locks into `lock`.
    if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GETLK, &mut lock) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(lock.l_type != libc::F_UNLCK as libc::c_short)
}

#[cfg(not(target_os = "linux"))]
fn dead_man_switch_held(_: &std::fs::File) -> std::io::Result<bool> {
    Ok(false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Sqlite;
    use mmc_storage::Backend;

    #[test]
    fn a_copy_holds_what_was_committed_and_is_a_file_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("a.db"), dir.path().join("b.db"));
        let db = Sqlite::open(&from).unwrap();
        let mut tx = db.begin("collect").unwrap();
        tx.put("payments", "p1", b"one").unwrap();
        tx.commit().unwrap();
        copy_live(&from, &to).unwrap();
        assert!(!Path::new(&format!("{}-wal", to.display())).exists());
        drop(db);
        let copy = Sqlite::open(&to).unwrap();
        let got = copy.get("collect", "payments", "p1").unwrap();
        assert_eq!(got.as_deref(), Some(&b"one"[..]));
    }

    #[test]
    fn a_copy_refuses_a_missing_source_and_an_existing_target() {
        let dir = tempfile::tempdir().unwrap();
        let (from, to) = (dir.path().join("a.db"), dir.path().join("b.db"));
        assert!(
            copy_live(&from, &to)
                .unwrap_err()
                .to_string()
                .contains("no SQLite database")
        );
        drop(Sqlite::open(&from).unwrap());
        std::fs::write(&to, b"x").unwrap();
        assert!(
            copy_live(&from, &to)
                .unwrap_err()
                .to_string()
                .contains("exists")
        );
    }
}
