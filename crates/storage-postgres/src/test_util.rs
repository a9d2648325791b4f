//! A throwaway database per test (feature `test-util`): tests never see each
//! other's rows, nor another run's.
//!
//! The server is `MMC_TEST_DATABASE_URL` when set, else
//! `postgres://postgres@127.0.0.1:5432/postgres` (`scripts/test-postgres.sh`
//! prints a usable URL, starting a private server if need be). No server is a
//! failure with the reason, never a skip.

use std::path::Path;
use std::sync::atomic::{AtomicU32, Ordering};

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// The server tests use: `MMC_TEST_DATABASE_URL`, or the local default.
pub fn server_url() -> String {
    std::env::var("MMC_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| DEFAULT_URL.to_string())
}

/// A database created for one test, dropped (connections and all) when this is.
pub struct TestDatabase {
    /// URL of the new database.
    pub url: String,
    pub name: String,
    server: String,
}

impl TestDatabase {
    /// Creates a uniquely named database on [`server_url`]. Panics with what
    /// to do when no server answers.
    pub fn create() -> TestDatabase {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        static SWEPT: std::sync::Once = std::sync::Once::new();
        let server = server_url();
        SWEPT.call_once(|| drop_orphans(&server));
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!(
            "{}{}_{}_{nanos}",
            local_prefix(),
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        if let Err(e) = admin(&server, &format!("CREATE DATABASE {name}")) {
            panic!(
                "PostgreSQL tests need a server and none answered at {server}: {e}\n\
                 Set MMC_TEST_DATABASE_URL, or run `scripts/test-postgres.sh` (it prints a \
                 URL, starting a private server if need be). These tests never skip."
            );
        }
        TestDatabase {
            url: with_database(&server, &name),
            name,
            server,
        }
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        // FORCE: a test that failed may have left connections open.
        let _ = admin(
            &self.server,
            &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
        );
    }
}

/// `mmc_test_<tag>_`: the prefix of the test databases of the processes
/// this one can see. The tag hashes the boot id and the pid namespace, so
/// containers on one kernel, or machines sharing a server, never take each
/// other's process ids for their own.
fn local_prefix() -> String {
    let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let pid_ns = std::fs::read_link("/proc/self/ns/pid").unwrap_or_default();
    // FNV-1a: stable across builds, unlike std's hasher.
    let tag = format!("{}{}", boot.trim(), pid_ns.display())
        .bytes()
        .fold(0x811c_9dc5_u32, |h, b| {
            (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
    format!("mmc_test_{tag:08x}_")
}

/// Drops the databases a killed test run left (a run that ends normally
/// drops its own): named with this prefix, by a process that no longer exists.
fn drop_orphans(server: &str) {
    let prefix = local_prefix();
    drop_databases_where(server, &prefix, |name| {
        let pid = name[prefix.len()..].split('_').next().unwrap_or_default();
        !pid.is_empty() && !Path::new(&format!("/proc/{pid}")).exists()
    });
}

/// The URL of database `name` on [`server_url`], created if missing (kept:
/// for tests whose processes come and go on one database; see
/// [`drop_databases_like`]). Panics with what to do when no server answers.
pub fn named_database(name: &str) -> String {
    let server = server_url();
    // CREATE DATABASE has no IF NOT EXISTS: ask first, then create.
    let exists = format!("SELECT 1 FROM pg_database WHERE datname = '{name}'");
    match query_exists(&server, &exists) {
        Ok(true) => {}
        Ok(false) => {
            if let Err(e) = admin(&server, &format!("CREATE DATABASE {name}")) {
                // Another test created it meanwhile.
                if !e.contains("already exists") {
                    panic!("cannot create database {name} at {server}: {e}");
                }
            }
        }
        Err(e) => panic!(
            "PostgreSQL tests need a server and none answered at {server}: {e}\n\
             Set MMC_TEST_DATABASE_URL, or run `scripts/test-postgres.sh`. These tests never skip."
        ),
    }
    with_database(&server, name)
}

/// Drops every database whose name starts with `prefix` (what an earlier
/// run's [`named_database`]s left).
pub fn drop_databases_like(prefix: &str) {
    drop_databases_where(&server_url(), prefix, |_| true);
}

/// Drops the databases named `prefix…` that `doomed` picks. `prefix` is
/// letters, digits and `_` (compared as text: `_` is no wildcard here).
fn drop_databases_where(server: &str, prefix: &str, doomed: impl Fn(&str) -> bool) {
    let Ok(names) = list(
        server,
        &format!("SELECT datname FROM pg_database WHERE starts_with(datname, '{prefix}')"),
    ) else {
        return;
    };
    for name in names.iter().filter(|n| doomed(n)) {
        let _ = admin(
            server,
            &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        );
    }
}

fn query_exists(url: &str, sql: &str) -> Result<bool, String> {
    Ok(!list(url, sql)?.is_empty())
}

/// The first column of `sql`'s rows, as text (the simple protocol: `sql`
/// may be any statement, `CREATE DATABASE` included).
fn list(url: &str, sql: &str) -> Result<Vec<String>, String> {
    off_runtime(|| list_here(url, sql))
}

/// Runs `f` on a thread of its own: the callers may be inside a tokio
/// runtime (an async test), where blocking on another one panics.
fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    std::thread::scope(|s| s.spawn(f).join().expect("database admin thread"))
}

fn list_here(url: &str, sql: &str) -> Result<Vec<String>, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| format!("{e}"))?;
        config.connect_timeout(std::time::Duration::from_secs(5));
        let (client, conn) = config
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(|e| crate::describe(&e))?;
        let conn = tokio::spawn(conn);
        let out = client
            .simple_query(sql)
            .await
            .map_err(|e| crate::describe(&e))
            .map(|msgs| {
                msgs.iter()
                    .filter_map(|m| match m {
                        tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
                        _ => None,
                    })
                    .collect()
            });
        drop(client);
        let _ = conn.await;
        out
    })
}

/// Runs `sql` on the server's maintenance database.
fn admin(url: &str, sql: &str) -> Result<(), String> {
    list(url, sql).map(|_| ())
}

/// `url` with its database replaced by `db` (URL form only).
pub fn with_database(url: &str, db: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap_or(("postgres", url));
    let (rest, query) = match rest.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (rest, None),
    };
    let authority = rest.split_once('/').map_or(rest, |(a, _)| a);
    match query {
        Some(q) => format!("{scheme}://{authority}/{db}?{q}"),
        None => format!("{scheme}://{authority}/{db}"),
    }
}

/// The `(classid, objid)` under which `pg_locks` shows the lock of
/// `namespace` (in the default schema), which every transaction of it holds
/// shared: a test can see which sessions are inside one.
pub fn namespace_lock_ids(namespace: &str) -> (u32, u32) {
    let key = crate::lock_key("", "ns", namespace) as u64;
    ((key >> 32) as u32, key as u32)
}
