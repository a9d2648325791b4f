//! `mmc backup` and `mmc restore`: what a server keeps in its data directory,
//! copied out while it runs and put back into a data directory of its own.
//!
//! A backup is a directory: the SQLite database (every table, the host's and
//! every component's, outbox included, in one file), copied from one snapshot
//! with SQLite's online backup; the data directory's generated keys, which
//! the database's sealed webhook secrets and the admin API need; and a
//! manifest. The database is copied first: a key exists before anything it
//! protects is written, so the keys copied after the snapshot cover it.
//! SQLite only: a PostgreSQL store is backed up with PostgreSQL's own tools.

use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use mmc_config::{Config, StorageUrl};

/// The manifest's name inside a backup.
pub const MANIFEST: &str = "backup.json";
/// The database's name inside a backup.
const DATABASE: &str = "mmc.db";
/// The manifest's layout; a restore refuses any other.
const FORMAT: u32 = 1;
/// Files of the data directory a restored server needs besides its
/// database, copied when they exist (a key given in the configuration
/// instead has no file).
const KEY_FILES: [&str; 2] = ["webhook_secrets_key", "admin_token"];
/// What SQLite keeps beside a database file; a stale one must not meet a
/// restored database.
const SIDE_FILES: [&str; 3] = ["-wal", "-shm", "-journal"];

#[derive(Debug, thiserror::Error)]
pub enum BackupError {
    #[error("backup and restore are for SQLite stores; on PostgreSQL use pg_dump or pg_basebackup")]
    NotSqlite,
    #[error("the data directory {0} does not exist")]
    NoDataDir(PathBuf),
    #[error("no database at {0}: nothing to back up")]
    NoDatabase(PathBuf),
    #[error("{0} exists: a backup is written to a new path")]
    TargetExists(PathBuf),
    #[error("{0} is not a backup: it has no {MANIFEST}")]
    NotABackup(PathBuf),
    #[error("{path}: backup format {found}, this version reads format {FORMAT}")]
    Format { path: PathBuf, found: u32 },
    #[error("the backup's database {path} is damaged: {reason}")]
    Damaged { path: PathBuf, reason: String },
    #[error(
        "{0} is not empty: restore into an empty data directory, or pass --force to replace its store"
    )]
    NotEmpty(PathBuf),
    #[error("a process has {0} open (a running server?): stop it before restoring")]
    InUse(PathBuf),
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("copying the database: {0}")]
    Copy(#[from] mmc_storage::StorageError),
    #[error("{0}")]
    Config(#[from] mmc_config::ConfigError),
}

/// `backup.json`: what a backup holds.
#[derive(Debug, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    /// The `mmc` version that wrote it.
    pub version: String,
    pub created_ms: u64,
    pub database: Database,
    /// Key files of the data directory, by name.
    pub files: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
pub struct Database {
    pub file: String,
    pub pages: u64,
    pub bytes: u64,
    pub sha256: String,
}

fn sqlite_path(config: &Config) -> Result<PathBuf, BackupError> {
    match config.storage_url()? {
        StorageUrl::Sqlite(path) => Ok(path),
        StorageUrl::Postgres(_) => Err(BackupError::NotSqlite),
    }
}

/// Writes a backup of `config`'s store into the new directory `to`. It is
/// built beside `to` under another name and renamed when whole: a path
/// named `to` is always a complete backup.
pub fn backup(config: &Config, to: &Path) -> Result<Manifest, BackupError> {
    let db = sqlite_path(config)?;
    if !config.data_dir.is_dir() {
        return Err(BackupError::NoDataDir(config.data_dir.clone()));
    }
    if !db.is_file() {
        return Err(BackupError::NoDatabase(db));
    }
    if to.symlink_metadata().is_ok() {
        return Err(BackupError::TargetExists(to.to_path_buf()));
    }
    let partial = sibling(to, ".partial");
    make_private_dir(&partial)?;
    let result = fill(config, &db, &partial);
    let result = result.and_then(|m| {
        std::fs::rename(&partial, to).map_err(write_err(to))?;
        sync_parent(to)?;
        Ok(m)
    });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    result
}

fn fill(config: &Config, db: &Path, dir: &Path) -> Result<Manifest, BackupError> {
    let copy = dir.join(DATABASE);
    let copied = mmc_storage_sqlite::backup::copy_live(db, &copy)?;
    // SQLite created it with the umask's mode; it holds what the keys protect.
    #[cfg(unix)]
    std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o600))
        .map_err(write_err(&copy))?;
    let mut files = Vec::new();
    for name in KEY_FILES {
        let from = config.data_dir.join(name);
        if from.is_file() {
            copy_private(&from, &dir.join(name))?;
            files.push(name.to_string());
        }
    }
    let manifest = Manifest {
        format: FORMAT,
        version: env!("CARGO_PKG_VERSION").to_string(),
        created_ms: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
        database: Database {
            file: DATABASE.into(),
            pages: copied.pages,
            bytes: copied.bytes,
            sha256: sha256_of(&copy)?,
        },
        files,
    };
    let json = serde_json::to_vec_pretty(&manifest).expect("a manifest serialises");
    write_private(&dir.join(MANIFEST), &json)?;
    sync_dir(dir)?;
    Ok(manifest)
}

/// Puts the backup at `from` in place of `config`'s store. Refuses a data
/// directory that holds anything unless `force`, and a store a process has
/// open in any case.
pub fn restore(config: &Config, from: &Path, force: bool) -> Result<Manifest, BackupError> {
    let db = sqlite_path(config)?;
    let manifest = read_manifest(from)?;
    let source = from.join(&manifest.database.file);
    verify(&source, &manifest.database)?;
    let data_dir = &config.data_dir;
    if !force {
        if !is_empty_dir(data_dir)? {
            return Err(BackupError::NotEmpty(data_dir.clone()));
        }
        if db.symlink_metadata().is_ok() {
            return Err(BackupError::NotEmpty(db));
        }
    }
    match mmc_storage_sqlite::backup::in_use(&db) {
        Ok(false) => {}
        Ok(true) => return Err(BackupError::InUse(db)),
        Err(e) => return Err(read_err(&db)(e)),
    }
    std::fs::create_dir_all(data_dir).map_err(write_err(data_dir))?;
    if let Some(dir) = db.parent() {
        std::fs::create_dir_all(dir).map_err(write_err(dir))?;
    }
    // The new file is whole on disk before the old one goes.
    let incoming = sibling(&db, ".restoring");
    remove_if_present(&incoming)?;
    copy_private(&source, &incoming)?;
    for suffix in SIDE_FILES {
        remove_if_present(&sibling(&db, suffix))?;
    }
    std::fs::rename(&incoming, &db).map_err(write_err(&db))?;
    sync_parent(&db)?;
    for name in KEY_FILES {
        let to = data_dir.join(name);
        remove_if_present(&to)?;
        if manifest.files.iter().any(|f| f == name) {
            copy_private(&from.join(name), &to)?;
        }
    }
    sync_dir(data_dir)?;
    Ok(manifest)
}

fn read_manifest(from: &Path) -> Result<Manifest, BackupError> {
    let path = from.join(MANIFEST);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(BackupError::NotABackup(from.to_path_buf()));
        }
        Err(e) => return Err(read_err(&path)(e)),
    };
    // The format first: a later layout may not parse as this one.
    let format = serde_json::from_slice::<serde_json::Value>(&bytes)
        .ok()
        .and_then(|v| v["format"].as_u64())
        .ok_or_else(|| BackupError::NotABackup(from.to_path_buf()))?;
    if format != u64::from(FORMAT) {
        return Err(BackupError::Format {
            path,
            found: u32::try_from(format).unwrap_or(u32::MAX),
        });
    }
    let manifest: Manifest =
        serde_json::from_slice(&bytes).map_err(|_| BackupError::NotABackup(from.to_path_buf()))?;
    let plain = |name: &str| Path::new(name).file_name().is_some_and(|f| f == name);
    if !plain(&manifest.database.file) || !manifest.files.iter().all(|f| plain(f)) {
        return Err(BackupError::NotABackup(from.to_path_buf()));
    }
    Ok(manifest)
}

/// The backup's database is the one its manifest names, and SQLite finds it sound.
fn verify(path: &Path, expected: &Database) -> Result<(), BackupError> {
    let damaged = |reason: String| BackupError::Damaged {
        path: path.to_path_buf(),
        reason,
    };
    if !path.is_file() {
        return Err(damaged("missing".into()));
    }
    if sha256_of(path)? != expected.sha256 {
        return Err(damaged("its SHA-256 is not the manifest's".into()));
    }
    let conn = rusqlite::Connection::open_with_flags(
        path,
        rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|e| damaged(e.to_string()))?;
    mmc_storage_sqlite::backup::check(&conn).map_err(|e| damaged(e.to_string()))
}

fn is_empty_dir(dir: &Path) -> Result<bool, BackupError> {
    match std::fs::read_dir(dir) {
        Ok(mut entries) => Ok(entries.next().is_none()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(read_err(dir)(e)),
    }
}

fn sha256_of(path: &Path) -> Result<String, BackupError> {
    let mut file = std::fs::File::open(path).map_err(read_err(path))?;
    let mut hasher = Sha256::new();
    std::io::copy(&mut file, &mut hasher).map_err(read_err(path))?;
    Ok(hex::encode(hasher.finalize()))
}

/// `path` with `suffix` added to its file name.
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

fn make_private_dir(dir: &Path) -> Result<(), BackupError> {
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => BackupError::TargetExists(dir.to_path_buf()),
        _ => write_err(dir)(e),
    })
}

/// Copies `from` to the new file `to`, readable by its owner only, on disk.
fn copy_private(from: &Path, to: &Path) -> Result<(), BackupError> {
    let mut src = std::fs::File::open(from).map_err(read_err(from))?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut dst = options.open(to).map_err(write_err(to))?;
    std::io::copy(&mut src, &mut dst).map_err(write_err(to))?;
    dst.sync_all().map_err(write_err(to))
}

fn write_private(path: &Path, bytes: &[u8]) -> Result<(), BackupError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(write_err(path))?;
    file.write_all(bytes).map_err(write_err(path))?;
    file.sync_all().map_err(write_err(path))
}

fn remove_if_present(path: &Path) -> Result<(), BackupError> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(write_err(path)(e)),
        _ => Ok(()),
    }
}

/// A rename or a new file survives a crash once its directory is synced.
fn sync_dir(dir: &Path) -> Result<(), BackupError> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(write_err(dir))
}

fn sync_parent(path: &Path) -> Result<(), BackupError> {
    match path.parent().filter(|p| !p.as_os_str().is_empty()) {
        Some(dir) => sync_dir(dir),
        None => sync_dir(Path::new(".")),
    }
}

fn read_err(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |source| BackupError::Read {
        path: path.to_path_buf(),
        source,
    }
}

fn write_err(path: &Path) -> impl FnOnce(std::io::Error) -> BackupError + '_ {
    move |source| BackupError::Write {
        path: path.to_path_buf(),
        source,
    }
}
