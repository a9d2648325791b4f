//! PostgreSQL backend: the engine for a fleet of stateless nodes on one
//! database.
//!
//! Same contract as SQLite (`mmc_storage::conformance`), kept the same way:
//! - **Writers conflict only on the keys they share**: a prepared
//!   transaction (`apply`, one call of `mmc_apply_prepared` in the server)
//!   locks each key it checks or writes, in (table, key) order, an absent
//!   one by inserting it; its checks then read the latest committed values
//!   and nothing can change them before its writes commit. An open
//!   transaction (`begin`) locks each key as it reads it, the same way,
//!   and each it writes when the write is sent (writes wait for the
//!   transaction's next read, scan or commit, and go together, pipelined),
//!   until it ends; a scan inside one locks its table whole
//!   against writers (every writer holds the lock of each table it writes,
//!   shared), so what it saw stays true: no phantom. Prepared transactions
//!   lock in one order and never deadlock each other; open ones lock in the
//!   order the component reads, so two of them may: the server detects it
//!   and rolls one back, reported as a conflict (nothing written; the
//!   component runs the transaction again), where a writer waiting past
//!   `lock_timeout` is failed as busy. A prepared transaction waits for a lock at most
//!   half the server's `deadlock_timeout`: crossing an open one, it gives
//!   way before the deadlock check could fail the open one, and is tried
//!   again here. A node runs at most half its pool of open
//!   transactions at once, so their reads outside themselves always find a
//!   connection.
//! - **The outbox's order is its dispatcher's**: events are written without
//!   a lock and numbered (`seq`) by the one dispatcher at a time, committed
//!   ones only (`SqlConn::number_outbox`): a cursor on `seq` never skips an
//!   event committed late.
//! - **Durable**: `synchronous_commit = on`; a commit is acknowledged once it
//!   is on the server's disk (and its synchronous replicas, if configured).
//! - Reads outside a transaction read committed data on any pooled connection.
//!
//! Keys are stored as `bytea`, so they order byte-wise (as in SQLite and
//! in memory) whatever the database's collation.
//!
//! The trait is synchronous and called from blocking threads of the host's
//! runtime and from a plain CLI `main`; each call runs as a task on this
//! backend's own small runtime and the caller waits on a channel. Unlike
//! `Runtime::block_on` that never panics, whatever runtime context the caller
//! is in (a worker, `spawn_blocking`, `block_in_place`, none).

mod backend;
mod direct;

/// Numbers (`seq`) up to `?1` of the events committed and not yet numbered,
/// in insertion order, after every event numbered before (see
/// `SqlConn::number_outbox`).
pub(crate) const SEQUENCE_OUTBOX: &str = "WITH next AS (
        SELECT ins, nextval('outbox_seq') AS seq
        FROM (SELECT ins FROM outbox WHERE seq IS NULL ORDER BY ins LIMIT ?1) unnumbered
     )
     UPDATE outbox SET seq = next.seq FROM next WHERE outbox.ins = next.ins";
#[cfg(any(test, feature = "test-util"))]
pub mod cluster;
mod migrate;
#[cfg(test)]
mod open_tests;
#[cfg(test)]
mod resilience_tests;
mod sql;
mod statements;
#[cfg(any(test, feature = "test-util"))]
pub mod test_util;
#[cfg(test)]
mod tests;
mod tls;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod};
use futures_util::future::BoxFuture;
use tokio::runtime::{Handle, Runtime};
use tokio::sync::Semaphore;

use mmc_storage::{Check, StorageError, Write};

/// The client the host's own SQL runs on (see [`Postgres::with_client`]).
pub use deadpool_postgres::Client;
pub use migrate::MIGRATIONS;
pub use tokio_postgres;

/// How long an open transaction waits for its turn on the node, or a call
/// for a pooled connection, before it fails as busy: a stuck writer must
/// surface as an error, not hang every request. The same bound as SQLite's.
const WRITER_WAIT: Duration = Duration::from_secs(10);

/// How long one statement may run: a bound on what a node waits for, far
/// above any statement's work (migrations lift it for themselves).
const STATEMENT_LIMIT: Duration = Duration::from_secs(30);

/// TCP keepalives, both ways: a peer that vanished (a paused VM, a
/// partition) is noticed within idle + interval × count, not the kernel's
/// two hours; data left unacknowledged that long also ends the connection.
const KEEPALIVE_IDLE: Duration = Duration::from_secs(10);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_COUNT: u32 = 3;
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(25);

/// Tunables; `Default` suits a node.
#[derive(Debug, Clone)]
pub struct Options {
    /// Schema the tables live in (created if missing); `None`: the server's
    /// default search path (`public`). Letters, digits and `_` only.
    pub schema: Option<String>,
    /// Connections per node. Several nodes share the server's
    /// `max_connections` (100 by default).
    pub pool_size: usize,
    /// Connections per node beside the pool, for reads outside a
    /// transaction, each driven by the thread that reads (no hand-over to
    /// the backend's runtime and back); 0: reads share the pool. A read
    /// finding them all busy is served by the pool. `None`: half the pool
    /// (more would crowd the server while creates write on the pool).
    pub read_connections: Option<usize>,
    /// How long a session may sit idle inside a transaction before the
    /// server ends it, rolling the transaction back and releasing its locks:
    /// a node frozen mid-transaction (stopped, paused, cut off) blocks the
    /// other nodes' writers of that namespace this long at most. It must
    /// exceed the longest gap between the statements of a legitimate
    /// transaction: a component's own computing between storage calls (no
    /// operator call runs inside a transaction), milliseconds in practice.
    /// A writer waits for a lock this long plus a second before it fails as busy.
    pub idle_in_transaction_timeout: Duration,
    /// How long a node starting waits for another node's migration. Past
    /// it, the start fails naming the session that holds the migration lock
    /// (a migrator frozen with it would otherwise block every node that
    /// starts, for ever).
    pub migration_lock_wait: Duration,
}

/// The default [`Options::migration_lock_wait`].
pub const MIGRATION_LOCK_WAIT: Duration = Duration::from_secs(120);

/// The default [`Options::idle_in_transaction_timeout`].
pub const IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(3);

impl Default for Options {
    fn default() -> Self {
        Options {
            schema: None,
            pool_size: 16,
            read_connections: None,
            idle_in_transaction_timeout: IDLE_IN_TRANSACTION_TIMEOUT,
            migration_lock_wait: MIGRATION_LOCK_WAIT,
        }
    }
}

pub struct Postgres {
    /// `Some` until dropped; shut down in the background, so dropping the
    /// backend never blocks (nor panics inside another runtime).
    runtime: Option<Runtime>,
    handle: Handle,
    pool: Pool,
    /// Mixed into advisory lock keys: stores in different schemas of one
    /// database do not queue behind each other.
    scope: String,
    /// Open transactions running on this node (see [`open_slots`]).
    open: Arc<Semaphore>,
    /// Reads outside a transaction, on connections their caller drives.
    direct: direct::DirectReads,
}

impl Postgres {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/db`) and
    /// brings the schema up to date (see [`MIGRATIONS`]).
    pub fn connect(url: &str) -> Result<Postgres, StorageError> {
        Self::connect_with(url, Options::default())
    }

    /// Like [`connect`](Self::connect), with the tables in `schema` (created
    /// if missing): tests isolate themselves this way.
    pub fn connect_schema(url: &str, schema: &str) -> Result<Postgres, StorageError> {
        Self::connect_with(
            url,
            Options {
                schema: Some(schema.to_string()),
                ..Options::default()
            },
        )
    }

    pub fn connect_with(url: &str, options: Options) -> Result<Postgres, StorageError> {
        let (url, ssl_mode, tls) = tls::from_url(url)?;
        let mut config: tokio_postgres::Config = url
            .parse()
            .map_err(|e| StorageError::Invalid(format!("storage url: {e}")))?;
        config.ssl_mode(ssl_mode);
        if let Some(schema) = &options.schema {
            check_schema_name(schema)?;
        }
        if options.idle_in_transaction_timeout < Duration::from_millis(100) {
            return Err(StorageError::Invalid(
                "idle_in_transaction_timeout must be at least 100 ms".into(),
            ));
        }
        config.options(session_options(&config, &options));
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_secs(5));
        }
        if config.get_application_name().is_none() {
            config.application_name("mmc");
        }
        // Unless the URL chose its own (tokio-postgres's idle default is 2 h).
        if config.get_keepalives() && config.get_keepalives_idle() == Duration::from_secs(7200) {
            config
                .keepalives_idle(KEEPALIVE_IDLE)
                .keepalives_interval(KEEPALIVE_INTERVAL)
                .keepalives_retries(KEEPALIVE_COUNT);
        }
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(TCP_USER_TIMEOUT);
        }

        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("mmc-postgres")
            .enable_all()
            .build()
            .map_err(|e| StorageError::Unavailable(format!("postgres runtime: {e}")))?;
        let reads = options
            .read_connections
            .unwrap_or((options.pool_size / 2).max(1));
        let direct = direct::DirectReads::new(config.clone(), tls.clone(), reads);
        let manager = Manager::from_config(
            config,
            tls,
            ManagerConfig {
                // A connection is checked only for being closed: one that
                // ended a transaction badly is never returned (see `discard`).
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(options.pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(WRITER_WAIT))
            .create_timeout(Some(WRITER_WAIT))
            .recycle_timeout(Some(WRITER_WAIT))
            .build()
            .map_err(|e| StorageError::Invalid(format!("postgres pool: {e}")))?;
        let db = Postgres {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            pool,
            scope: options.schema.clone().unwrap_or_default(),
            open: Arc::new(Semaphore::new(open_slots(options.pool_size))),
            direct,
        };
        let (pool, schema) = (db.pool.clone(), options.schema.clone());
        let wait = options.migration_lock_wait;
        run(&db.handle, async move {
            migrate::migrate(&pool, schema.as_deref(), wait).await
        })?;
        Ok(db)
    }

    /// Runs `f` on a pooled connection (autocommit; `f` may open its own
    /// transaction with `client.transaction()`), for the host's own tables:
    ///
    /// ```no_run
    /// # fn f(db: &mmc_storage_postgres::Postgres) -> Result<(), mmc_storage::StorageError> {
    /// let n: i64 = db.with_client(|c| Box::pin(async move {
    ///     let row = c.query_one("SELECT count(*) FROM outbox", &[]).await?;
    ///     Ok(row.get(0))
    /// }))?;
    /// # Ok(()) }
    /// ```
    ///
    /// A database error maps to `StorageError::Unavailable`.
    pub fn with_client<T, F>(&self, f: F) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut Client) -> BoxFuture<'c, Result<T, tokio_postgres::Error>>
            + Send
            + 'static,
    {
        let pool = self.pool.clone();
        run(&self.handle, async move {
            let mut conn = get_conn(&pool).await?;
            let out = f(&mut conn).await;
            // `f` may have left a transaction open (an early return): never
            // hand such a connection to someone else.
            if out.is_err() {
                discard(conn);
            }
            out.map_err(db_err)
        })
    }

    /// The advisory lock key of `(kind, name)` in this store: a stable 64-bit
    /// hash (FNV-1a), the same on every node and every build.
    fn lock_key(&self, kind: &str, name: &str) -> i64 {
        lock_key(&self.scope, kind, name)
    }
}

/// How many open transactions one node runs at once: half its pool, so the
/// other half always serves their reads outside themselves (a component may
/// read committed data mid-transaction) and the prepared transactions.
fn open_slots(pool_size: usize) -> usize {
    (pool_size / 2).max(1)
}

/// The lock of `table` in `namespace` (see [`lock_key`]): shared by every
/// writer of the table, whole for an open transaction that scans it.
fn table_key(scope: &str, namespace: &str, table: &str) -> i64 {
    lock_key(scope, "table", &format!("{namespace}\0{table}"))
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.pool.close();
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

/// The advisory lock key of `(kind, name)` in the store `scope` (FNV-1a).
fn lock_key(scope: &str, kind: &str, name: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for part in ["mmc-storage", scope, kind, name] {
        for b in part.bytes().chain([0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h as i64
}

/// The session settings every connection starts with (startup options: no
/// round trip per transaction), after any the URL gave (later ones win):
/// - every commit durable before it is acknowledged, whatever the server's default;
/// - a session idle inside a transaction ended (see
///   [`Options::idle_in_transaction_timeout`]), and a lock wait bounded a
///   second beyond it, so a waiter outlasts a dead holder, then fails as busy;
/// - statements bounded ([`STATEMENT_LIMIT`]);
/// - the server's keepalives on its side of the connection too.
fn session_options(config: &tokio_postgres::Config, options: &Options) -> String {
    let idle = options.idle_in_transaction_timeout;
    let mut session = format!(
        "-c synchronous_commit=on -c idle_in_transaction_session_timeout={} \
         -c lock_timeout={} -c statement_timeout={} -c tcp_keepalives_idle={} \
         -c tcp_keepalives_interval={} -c tcp_keepalives_count={KEEPALIVE_COUNT} \
         -c tcp_user_timeout={}",
        idle.as_millis(),
        (idle + Duration::from_secs(1)).as_millis(),
        STATEMENT_LIMIT.as_millis(),
        KEEPALIVE_IDLE.as_secs(),
        KEEPALIVE_INTERVAL.as_secs(),
        TCP_USER_TIMEOUT.as_millis(),
    );
    if let Some(schema) = &options.schema {
        session.push_str(&format!(" -c search_path={schema}"));
    }
    match config.get_options() {
        Some(given) => format!("{given} {session}"),
        None => session,
    }
}

/// Runs `fut` on the backend's runtime and waits for it on this thread.
fn run<T: Send + 'static>(
    handle: &Handle,
    fut: impl Future<Output = Result<T, StorageError>> + Send + 'static,
) -> Result<T, StorageError> {
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    handle.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv()
        .map_err(|_| StorageError::Unavailable("postgres: storage runtime stopped".into()))?
}

fn db_err(e: tokio_postgres::Error) -> StorageError {
    use tokio_postgres::error::SqlState;
    match e.code() {
        Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => StorageError::Unavailable(
            "storage busy: writer lock not acquired in time (lock_timeout)".into(),
        ),
        Some(c) if *c == SqlState::T_R_DEADLOCK_DETECTED => StorageError::Conflict(
            "two transactions waited for each other; this one was rolled back".into(),
        ),
        Some(c) if *c == SqlState::T_R_SERIALIZATION_FAILURE => {
            StorageError::Conflict(format!("postgres: {}", describe(&e)))
        }
        _ => StorageError::Unavailable(format!("postgres: {}", describe(&e))),
    }
}

/// An error with its causes: tokio-postgres puts the useful part (the
/// server's message, "Connection refused") in the source.
pub(crate) fn describe(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let more = c.to_string();
        if !out.contains(&more) {
            out = format!("{out}: {more}");
        }
        cause = c.source();
    }
    out
}

async fn get_conn(pool: &Pool) -> Result<Object, StorageError> {
    pool.get().await.map_err(|e| match e {
        PoolError::Backend(e) => db_err(e),
        PoolError::Timeout(_) => StorageError::Unavailable(format!(
            "storage busy: no postgres connection in {} s",
            WRITER_WAIT.as_secs()
        )),
        e => StorageError::Unavailable(format!("postgres pool: {e}")),
    })
}

/// Takes a connection out of the pool and closes it (the server rolls back
/// whatever it had open): for one whose transaction state is unknown.
fn discard(conn: Object) {
    drop(Object::take(conn));
}

/// Limits shared with SQLite. PostgreSQL `text` cannot hold NUL, so names
/// (not keys, which are `bytea`) must not contain one.
fn check_names(table: &str, key: &str) -> Result<(), StorageError> {
    if table.is_empty() || table.len() > 64 {
        return Err(StorageError::Invalid(
            "table name must be 1 to 64 bytes".into(),
        ));
    }
    if table.contains('\0') {
        return Err(StorageError::Invalid("table name contains NUL".into()));
    }
    if key.len() > 1024 {
        return Err(StorageError::Invalid("key longer than 1024 bytes".into()));
    }
    Ok(())
}

fn check_namespace(ns: &str) -> Result<(), StorageError> {
    if ns.contains('\0') {
        return Err(StorageError::Invalid("namespace contains NUL".into()));
    }
    Ok(())
}

fn check_schema_name(schema: &str) -> Result<(), StorageError> {
    let ok = !schema.is_empty()
        && schema.len() <= 63
        && schema
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !schema.as_bytes()[0].is_ascii_digit();
    if ok {
        Ok(())
    } else {
        Err(StorageError::Invalid(format!(
            "schema name {schema:?}: lowercase letters, digits and _ only"
        )))
    }
}

fn check_writes(ns: &str, checks: &[Check], writes: &[Write]) -> Result<(), StorageError> {
    check_namespace(ns)?;
    for c in checks {
        check_names(&c.table, &c.key)?;
    }
    for w in writes {
        match w {
            Write::Put { table, key, .. } | Write::Delete { table, key } => {
                check_names(table, key)?
            }
            Write::Emit(_) => {}
        }
    }
    Ok(())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Ends the transaction and hands the connection back, or closes it when
/// the end failed (its state is unknown).
async fn finish(conn: Object, sql: &str) -> Result<(), StorageError> {
    match conn.batch_execute(sql).await {
        Ok(()) => Ok(()),
        Err(e) => {
            discard(conn);
            Err(db_err(e))
        }
    }
}
