//! The key-value table and the outbox on one connection: scans, reads,
//! writes and events, with names checked before they reach SQL.

use super::*;

/// How long a connection waits for another process's lock (the CLI's writes).
pub(crate) const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

pub(crate) fn open_connection(
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

pub(crate) fn check_names(table: &str, key: &str) -> Result<(), StorageError> {
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

pub(crate) fn scan_on(
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

pub(crate) fn get_on(
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

pub(crate) fn put_on(
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

pub(crate) fn delete_on(
    conn: &Connection,
    ns: &str,
    table: &str,
    key: &str,
) -> Result<(), StorageError> {
    check_names(table, key)?;
    let mut stmt = conn.prepare_cached("DELETE FROM kv WHERE ns = ?1 AND tbl = ?2 AND k = ?3")?;
    stmt.execute(params![ns, table, key])?;
    Ok(())
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

pub(crate) fn emit_on(conn: &Connection, e: &OutboxEvent) -> Result<(), StorageError> {
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
