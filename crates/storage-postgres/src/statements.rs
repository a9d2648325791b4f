//! The key-value statements, and the calls that run them on one connection:
//! reads, scans, the locks of an open transaction, and pipelined writes with
//! the outbox's events last.

use deadpool_postgres::Client;
use futures_util::future::join_all;
use std::collections::BTreeMap;
use tokio_postgres::Statement;

use mmc_storage::{Check, OutboxEvent, StorageError, Write};

use crate::{db_err, now_ms};

pub(super) const GET: &str = "SELECT v FROM kv WHERE ns = $1 AND tbl = $2 AND k = $3";
// PUT, DELETE and EMIT are also written in migration 19's `mmc_apply_prepared`:
// a change to `kv` or `outbox` changes both (the function by a new migration).
pub(super) const PUT: &str = "INSERT INTO kv (ns, tbl, k, v) VALUES ($1, $2, $3, $4)
     ON CONFLICT (ns, tbl, k) DO UPDATE SET v = EXCLUDED.v";
pub(super) const DELETE: &str = "DELETE FROM kv WHERE ns = $1 AND tbl = $2 AND k = $3";
// Scans, by order and by whether they have an end: a bound written
// `(octet_length($4) = 0 OR k < $4)` is not one a generic plan can seek to,
// and a descending scan would walk back over every key above the end.
pub(super) const SCAN: [&str; 2] = [
    "SELECT k, v FROM kv WHERE ns = $1 AND tbl = $2 AND k >= $3 ORDER BY k LIMIT $4",
    "SELECT k, v FROM kv WHERE ns = $1 AND tbl = $2 AND k >= $3 AND k < $5 ORDER BY k LIMIT $4",
];
pub(super) const SCAN_DESC: [&str; 2] = [
    "SELECT k, v FROM kv WHERE ns = $1 AND tbl = $2 AND k >= $3 ORDER BY k DESC LIMIT $4",
    "SELECT k, v FROM kv WHERE ns = $1 AND tbl = $2 AND k >= $3 AND k < $5 ORDER BY k DESC LIMIT $4",
];
/// A prepared transaction in one round trip, locking only its keys and,
/// shared, the tables it writes, each lock waited for briefly (migration
/// 19's `mmc_apply_prepared`; the functions of migrations 3, 15, 16 and 18
/// stay for nodes of older versions).
pub(super) const APPLY: &str = "SELECT mmc_apply_prepared($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
     $11, $12, $13, $14, $15, $16, $17)";
/// A prepared transaction's arguments to [`APPLY`]: each key once (any
/// order: the server locks them sorted), with its last write and what its
/// checks expect, and the events in the order written.
pub(super) struct Keys<'a> {
    pub tbl: Vec<&'a str>,
    pub k: Vec<&'a [u8]>,
    /// The key's final value; None: deleted, or only checked.
    pub v: Vec<Option<&'a [u8]>>,
    pub written: Vec<bool>,
    pub checked: Vec<bool>,
    /// What the key's checks expect (None: absent).
    pub expect: Vec<Option<&'a [u8]>>,
    pub events: Vec<&'a OutboxEvent>,
}

impl<'a> Keys<'a> {
    /// None when two checks of one key expect different values: no value
    /// holds both, so the transaction is refused as the server would.
    pub fn of(checks: &'a [Check], writes: &'a [Write]) -> Option<Keys<'a>> {
        /// A key's last write and what its checks expect, each None when
        /// there is none (Some(None): deleted, or expected absent).
        #[derive(Default)]
        struct Key<'a> {
            write: Option<Option<&'a [u8]>>,
            check: Option<Option<&'a [u8]>>,
        }
        let mut keys: BTreeMap<(&str, &str), Key> = BTreeMap::new();
        for c in checks {
            let expect = &mut keys.entry((&c.table, &c.key)).or_default().check;
            match expect {
                Some(other) if *other != c.value.as_deref() => return None,
                _ => *expect = Some(c.value.as_deref()),
            }
        }
        let mut events = Vec::new();
        for w in writes {
            let (table, key, value) = match w {
                Write::Put { table, key, value } => (table, key, Some(value.as_slice())),
                Write::Delete { table, key } => (table, key, None),
                Write::Emit(event) => {
                    events.push(event);
                    continue;
                }
            };
            keys.entry((table, key)).or_default().write = Some(value);
        }
        let mut out = Keys {
            tbl: Vec::with_capacity(keys.len()),
            k: Vec::with_capacity(keys.len()),
            v: Vec::with_capacity(keys.len()),
            written: Vec::with_capacity(keys.len()),
            checked: Vec::with_capacity(keys.len()),
            expect: Vec::with_capacity(keys.len()),
            events,
        };
        for ((table, key), Key { write, check }) in keys {
            out.tbl.push(table);
            out.k.push(key.as_bytes());
            out.v.push(write.flatten());
            out.written.push(write.is_some());
            out.checked.push(check.is_some());
            out.expect.push(check.flatten());
        }
        Some(out)
    }
}

/// Reads a key in an open transaction and holds it until commit (migration
/// 16's `mmc_lock_key`): its value, and whether it was absent and is now
/// held by a placeholder row.
pub(super) const LOCK_KEY: &str = "SELECT v, placeholder FROM mmc_lock_key($1, $2, $3)";
/// Tables' locks: shared by their writers (in one order), whole for an open
/// transaction that scans one.
pub(super) const TABLES_SHARED: &str = "SELECT pg_advisory_xact_lock_shared(t) \
     FROM (SELECT DISTINCT t FROM unnest($1::bigint[]) t ORDER BY t) tables";
pub(super) const TABLE_WHOLE: &str = "SELECT pg_advisory_xact_lock($1)";
/// The placeholders an open transaction leaves at commit (keys it read
/// absent and did not write): gone, as if never there.
pub(super) const DROP_PLACEHOLDERS: &str = "DELETE FROM kv WHERE ns = $1 AND (tbl, k) IN \
     (SELECT * FROM unnest($2::text[], $3::bytea[]))";

/// The SQLSTATE `mmc_apply_prepared` raises when a check does not hold.
pub(super) const CHECK_FAILED: &str = "MM001";
/// Without a number (`seq`): the dispatcher gives it once committed.
pub(super) const EMIT: &str = "INSERT INTO outbox
     (id, event_type, merchant_id, environment, subject_id, extra_url, payload, created_ms, seq)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULL)";

pub(super) async fn get_on(
    c: &Client,
    ns: &str,
    table: &str,
    key: &str,
) -> Result<Option<Vec<u8>>, StorageError> {
    let stmt = c.prepare_cached(GET).await.map_err(db_err)?;
    get_with(c, &stmt, ns, table, key).await
}

/// [`get_on`] with its statement prepared (`GET`).
pub(super) async fn get_with(
    c: &tokio_postgres::Client,
    stmt: &Statement,
    ns: &str,
    table: &str,
    key: &str,
) -> Result<Option<Vec<u8>>, StorageError> {
    let row = c
        .query_opt(stmt, &[&ns, &table, &key.as_bytes()])
        .await
        .map_err(db_err)?;
    Ok(row.map(|r| r.get(0)))
}

/// Which of a scan's pair of statements serves `range`: 0 without an end
/// key, 1 with one (it binds the end as a fifth parameter).
pub(super) fn with_end(range: (&str, &str)) -> usize {
    usize::from(!range.1.is_empty())
}

/// At most `limit` rows: callers cap it at `MAX_SCAN` (an open
/// transaction asks for as many more as it holds keys to pass over).
pub(super) async fn scan_on(
    c: &Client,
    ns: &str,
    table: &str,
    range: (&str, &str),
    sql: [&str; 2],
    limit: u32,
) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
    let stmt = c
        .prepare_cached(sql[with_end(range)])
        .await
        .map_err(db_err)?;
    scan_with(c, &stmt, ns, table, range, limit).await
}

/// [`scan_on`] with its statement prepared: the first of its pair for a
/// range without an end key, the second for one with.
pub(super) async fn scan_with(
    c: &tokio_postgres::Client,
    stmt: &Statement,
    ns: &str,
    table: &str,
    (start, end): (&str, &str),
    limit: u32,
) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
    let limit = i64::from(limit);
    let rows = if end.is_empty() {
        c.query(stmt, &[&ns, &table, &start.as_bytes(), &limit])
            .await
    } else {
        c.query(
            stmt,
            &[&ns, &table, &start.as_bytes(), &limit, &end.as_bytes()],
        )
        .await
    }
    .map_err(db_err)?;
    rows.into_iter()
        .map(|r| {
            let k: Vec<u8> = r.get(0);
            let k = String::from_utf8(k).map_err(|_| {
                StorageError::Unavailable("postgres: a stored key is not UTF-8".into())
            })?;
            Ok((k, r.get(1)))
        })
        .collect()
}

/// Opens the transaction and takes the namespace's lock shared (against
/// nodes of older versions only, whose open transactions take it whole), in
/// one round trip.
pub(super) async fn begin_on(c: &Client, ns_key: i64) -> Result<(), StorageError> {
    c.batch_execute(&format!(
        "BEGIN; SELECT pg_advisory_xact_lock_shared({ns_key})"
    ))
    .await
    .map_err(db_err)
}

/// Runs the writes in order, pipelined (sent without waiting for each
/// answer), events last (without a lock: the dispatcher numbers them, see
/// [`crate::SEQUENCE_OUTBOX`]).
pub(super) async fn write_on(
    c: &Client,
    ns: &str,
    writes: &[&Write],
    events: &[&OutboxEvent],
) -> Result<(), StorageError> {
    let (put, delete) = (
        c.prepare_cached(PUT).await.map_err(db_err)?,
        c.prepare_cached(DELETE).await.map_err(db_err)?,
    );
    let calls = writes.iter().map(|w| async {
        match w {
            Write::Put { table, key, value } => {
                c.execute(&put, &[&ns, table, &key.as_bytes(), value]).await
            }
            Write::Delete { table, key } => {
                c.execute(&delete, &[&ns, table, &key.as_bytes()]).await
            }
            Write::Emit(_) => Ok(0),
        }
    });
    for r in join_all(calls).await {
        r.map_err(db_err)?;
    }
    if events.is_empty() {
        return Ok(());
    }
    let emit = c.prepare_cached(EMIT).await.map_err(db_err)?;
    let (emit, now) = (&emit, &now_ms());
    let inserts = events.iter().map(|e| async move {
        c.execute(
            emit,
            &[
                &e.id,
                &e.event_type,
                &e.merchant_id,
                &e.environment,
                &e.subject_id,
                &e.extra_url,
                &e.payload,
                now,
            ],
        )
        .await
    });
    for r in join_all(inserts).await {
        r.map_err(db_err)?;
    }
    Ok(())
}
