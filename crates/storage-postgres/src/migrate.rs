//! Versioned migrations, applied at connect, each in a transaction that
//! holds a lock row, so that nodes starting together apply each version once.

use std::time::Duration;

use deadpool_postgres::{Object, Pool};

use crate::{db_err, get_conn, now_ms};
use mmc_storage::StorageError;

/// `(version, sql)`, applied in order, each in its own transaction with its
/// row in `schema_migrations`; the SQL of each is `migrations/NNNN.sql`.
/// Never edit a shipped version: add one.
pub const MIGRATIONS: &[(i32, &str)] = &[
    (1, include_str!("../migrations/0001.sql")),
    (2, include_str!("../migrations/0002.sql")),
    (3, include_str!("../migrations/0003.sql")),
    (4, include_str!("../migrations/0004.sql")),
    (5, include_str!("../migrations/0005.sql")),
    (6, include_str!("../migrations/0006.sql")),
    (7, include_str!("../migrations/0007.sql")),
    (8, include_str!("../migrations/0008.sql")),
    (9, include_str!("../migrations/0009.sql")),
    (10, include_str!("../migrations/0010.sql")),
    (11, include_str!("../migrations/0011.sql")),
    (12, include_str!("../migrations/0012.sql")),
    (13, include_str!("../migrations/0013.sql")),
    (14, include_str!("../migrations/0014.sql")),
    (15, include_str!("../migrations/0015.sql")),
    (16, include_str!("../migrations/0016.sql")),
    (17, include_str!("../migrations/0017.sql")),
    (18, include_str!("../migrations/0018.sql")),
    (19, include_str!("../migrations/0019.sql")),
];

pub(crate) async fn migrate(
    pool: &Pool,
    schema: Option<&str>,
    lock_wait: Duration,
) -> Result<(), StorageError> {
    // A connection of its own, closed at the end: a transaction (and the
    // lock it holds) never outlives it, whatever fails in between.
    let conn = Object::take(get_conn(pool).await?);
    // A migration's statement may outlast the session's statement_timeout.
    // The session is named after this node, so that one waiting for it can
    // say who holds the lock.
    conn.batch_execute(&format!(
        "SET lock_timeout = 0; SET statement_timeout = 0; SET application_name = '{}'",
        migrator_name()
    ))
    .await
    .map_err(db_err)?;
    bootstrap(&conn, schema).await?;
    let applied = applied(&conn).await?;
    // A version the database has and this build does not know (a newer node
    // migrated it) is fine: migrations only add, so older nodes keep working
    // during a rolling upgrade.
    for (version, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        // Each version in its own transaction, under the lock row: a node
        // that waited finds it applied by the one it waited for.
        take_lock(&conn, lock_wait).await?;
        let result = async {
            if !applied_now(&conn, *version).await? {
                conn.batch_execute(sql).await?;
                conn.execute(
                    "INSERT INTO schema_migrations (version, applied_ms) VALUES ($1, $2)",
                    &[version, &now_ms()],
                )
                .await?;
            }
            conn.batch_execute("COMMIT").await
        }
        .await;
        result.map_err(|e| {
            StorageError::Unavailable(format!(
                "postgres: migration {version} failed: {}",
                crate::describe(&e)
            ))
        })?;
    }
    Ok(())
}

/// The schema, the versions table and the lock row, made if missing. Nodes
/// starting together may race to make them (`IF NOT EXISTS` is not atomic in
/// PostgreSQL's catalogue: the loser gets a unique violation), so a race
/// lost is tried again.
async fn bootstrap(
    conn: &tokio_postgres::Client,
    schema: Option<&str>,
) -> Result<(), StorageError> {
    let mut sql = String::new();
    if let Some(schema) = schema {
        // Checked by the caller: lowercase letters, digits and _ only.
        sql.push_str(&format!("CREATE SCHEMA IF NOT EXISTS {schema};"));
    }
    sql.push_str(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
            version     integer PRIMARY KEY,
            applied_ms  bigint NOT NULL
        );
        -- One row, locked (FOR UPDATE) by the transaction that applies a version.
        CREATE TABLE IF NOT EXISTS schema_migrations_lock (
            id  integer PRIMARY KEY CHECK (id = 1)
        );
        INSERT INTO schema_migrations_lock (id) VALUES (1) ON CONFLICT DO NOTHING;",
    );
    let mut tries = 0;
    loop {
        match conn.batch_execute(&sql).await {
            Ok(()) => return Ok(()),
            Err(e) if tries < 20 && lost_a_creation_race(&e) => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(db_err(e)),
        }
    }
}

fn lost_a_creation_race(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    e.code().is_some_and(|c| {
        [
            SqlState::UNIQUE_VIOLATION,
            SqlState::DUPLICATE_TABLE,
            SqlState::DUPLICATE_SCHEMA,
            // A table's row type made by the other creator meanwhile:
            // `type "schema_migrations" already exists`.
            SqlState::DUPLICATE_OBJECT,
        ]
        .contains(c)
    })
}

async fn applied(conn: &tokio_postgres::Client) -> Result<Vec<i32>, StorageError> {
    Ok(conn
        .query("SELECT version FROM schema_migrations", &[])
        .await
        .map_err(db_err)?
        .iter()
        .map(|r| r.get(0))
        .collect())
}

async fn applied_now(
    conn: &tokio_postgres::Client,
    version: i32,
) -> Result<bool, tokio_postgres::Error> {
    Ok(conn
        .query_opt(
            "SELECT 1 FROM schema_migrations WHERE version = $1",
            &[&version],
        )
        .await?
        .is_some())
}

/// This node, as the migration's session names it: `mmc migration on
/// <host> pid <pid>` (quotes dropped: it goes into a SET statement).
fn migrator_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown host".into());
    format!("mmc migration on {host} pid {}", std::process::id()).replace(['\'', '\\'], "")
}

/// Opens a transaction holding the migration lock (the lock row, `FOR
/// UPDATE`), waiting at most `wait` for another node's migration; past it,
/// fails naming the session that holds the lock. A row lock, not an
/// advisory one: it ends with its transaction, and engines that speak
/// PostgreSQL without advisory locks have it.
async fn take_lock(conn: &tokio_postgres::Client, wait: Duration) -> Result<(), StorageError> {
    use tokio_postgres::error::SqlState;
    let started = std::time::Instant::now();
    loop {
        conn.batch_execute("BEGIN").await.map_err(db_err)?;
        let taken = conn
            .batch_execute("SELECT 1 FROM schema_migrations_lock WHERE id = 1 FOR UPDATE NOWAIT")
            .await;
        match taken {
            Ok(()) => return Ok(()),
            Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => {
                conn.batch_execute("ROLLBACK").await.map_err(db_err)?;
            }
            Err(e) => {
                let _ = conn.batch_execute("ROLLBACK").await;
                return Err(db_err(e));
            }
        }
        if started.elapsed() >= wait {
            let holder = lock_holder(conn)
                .await
                .unwrap_or_else(|| "a connection that has since closed".into());
            return Err(StorageError::Unavailable(format!(
                "postgres: the migration lock has been held for more than {} s by {holder}; \
                 start again once that migration has ended, or close that connection (pg_terminate_backend)",
                wait.as_secs()
            )));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Who holds the migration lock: the transaction whose id the lock row's
/// `xmax` names, as the server sees its session (name, address, process id
/// and start).
async fn lock_holder(conn: &tokio_postgres::Client) -> Option<String> {
    let row = conn
        .query_opt(
            "SELECT coalesce(a.application_name, ''), coalesce(host(a.client_addr), 'a local socket'),
                    a.pid, coalesce(to_char(a.backend_start, 'YYYY-MM-DD HH24:MI:SS TZ'), '')
             FROM schema_migrations_lock r
             JOIN pg_locks l ON l.locktype = 'transactionid' AND l.transactionid = r.xmax
                             AND l.mode = 'ExclusiveLock' AND l.granted
             JOIN pg_stat_activity a ON a.pid = l.pid
             WHERE r.id = 1
             LIMIT 1",
            &[],
        )
        .await
        .ok()??;
    let (name, addr, pid, since): (String, String, i32, String) =
        (row.get(0), row.get(1), row.get(2), row.get(3));
    let name = if name.is_empty() {
        "an unnamed connection".into()
    } else {
        format!("\"{name}\"")
    };
    Some(format!(
        "{name} (from {addr}, server pid {pid}, connected {since})"
    ))
}
