//! The storage contract on PostgreSQL: reads on any pooled connection,
//! prepared transactions applied in one round trip locking only the keys
//! they check and write, and open transactions locking the keys they touch
//! (and the tables they scan) until they end.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;

use deadpool_postgres::{Client, Object, Pool};
use futures_util::future::join_all;
use mmc_storage::{Backend, Check, MAX_SCAN, Order, OutboxEvent, StorageError, Transaction, Write};
use tokio::runtime::Handle;
use tokio::sync::OwnedSemaphorePermit;
use tokio_postgres::error::SqlState;

use crate::direct::Read;
use crate::{
    Postgres, WRITER_WAIT, check_names, check_namespace, check_writes, db_err, discard, finish,
    get_conn, now_ms, run, table_key,
};

use super::statements::{
    APPLY, CHECK_FAILED, DROP_PLACEHOLDERS, Keys, LOCK_KEY, SCAN, SCAN_DESC, TABLE_WHOLE,
    TABLES_SHARED, begin_on, get_on, scan_on, write_on,
};

impl Backend for Postgres {
    fn begin(&self, namespace: &str) -> Result<Box<dyn Transaction>, StorageError> {
        check_namespace(namespace)?;
        let (pool, open) = (self.pool.clone(), self.open.clone());
        let ns_key = self.lock_key("ns", namespace);
        let (conn, turn) = run(&self.handle, async move {
            let turn = tokio::time::timeout(WRITER_WAIT, open.acquire_owned())
                .await
                .map_err(|_| {
                    StorageError::Unavailable(format!(
                        "storage busy: no turn for an open transaction in {} s",
                        WRITER_WAIT.as_secs()
                    ))
                })?
                .map_err(|_| StorageError::Unavailable("postgres: backend closed".into()))?;
            let conn = get_conn(&pool).await?;
            match begin_on(&conn, ns_key).await {
                Ok(()) => Ok((conn, turn)),
                Err(e) => {
                    discard(conn);
                    Err(e)
                }
            }
        })?;
        Ok(Box::new(PgTxn {
            conn: Some(conn),
            handle: self.handle.clone(),
            ns: namespace.to_string(),
            scope: self.scope.clone(),
            tables: HashMap::new(),
            placeholders: BTreeSet::new(),
            pending: Pending::default(),
            events: Vec::new(),
            failed: None,
            turn: Some(turn),
        }))
    }

    /// Checks then writes in one transaction, in one round trip
    /// (`mmc_apply_prepared`, migration 19): the tables it writes are locked
    /// shared (against an open transaction's scan), then every key it checks
    /// or writes in (table, key) order (an absent one by inserting it), so
    /// the checks read the latest committed values and nothing changes them
    /// before the writes commit. Two prepared transactions wait for each
    /// other only on a key they share, and never deadlock each other. One
    /// waits for a lock at most half the server's `deadlock_timeout`
    /// (migration 18), so where it crosses an open transaction's locks it is
    /// the one rolled back, before the server's deadlock check could fail
    /// the open one; it is tried again here, for up to [`WRITER_WAIT`]. No
    /// node-local queue: the pool's size bounds what waits on the database.
    fn apply(
        &self,
        namespace: &str,
        checks: Vec<Check>,
        writes: Vec<Write>,
    ) -> Result<bool, StorageError> {
        check_writes(namespace, &checks, &writes)?;
        let pool = self.pool.clone();
        let ns_key = self.lock_key("ns", namespace);
        let mut tables: Vec<i64> = writes
            .iter()
            .filter_map(|w| match w {
                Write::Put { table, .. } | Write::Delete { table, .. } => {
                    Some(table_key(&self.scope, namespace, table))
                }
                Write::Emit(_) => None,
            })
            .collect();
        tables.sort_unstable();
        tables.dedup();
        let ns = namespace.to_string();
        run(&self.handle, async move {
            let deadline = tokio::time::Instant::now() + WRITER_WAIT;
            loop {
                match apply_once(&pool, &tables, &ns, ns_key, &checks, &writes).await {
                    Err(Failure::Yielded(_)) if tokio::time::Instant::now() < deadline => {}
                    Err(Failure::Yielded(e) | Failure::Other(e)) => return Err(e),
                    Ok(applied) => return Ok(applied),
                }
            }
        })
    }

    fn get(
        &self,
        namespace: &str,
        table: &str,
        key: &str,
    ) -> Result<Option<Vec<u8>>, StorageError> {
        check_namespace(namespace)?;
        check_names(table, key)?;
        if let Read::Done(read) = self.direct.get(namespace, table, key) {
            return read;
        }
        let pool = self.pool.clone();
        let (ns, table, key) = (namespace.to_string(), table.to_string(), key.to_string());
        run(&self.handle, async move {
            let conn = get_conn(&pool).await?;
            get_on(&conn, &ns, &table, &key).await
        })
    }

    fn scan_in(
        &self,
        namespace: &str,
        table: &str,
        (start, end): (&str, &str),
        order: Order,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        check_namespace(namespace)?;
        check_names(table, start)?;
        let sql = match order {
            Order::Asc => SCAN,
            Order::Desc => SCAN_DESC,
        };
        let direct = self.direct.scan(
            namespace,
            table,
            (start, end),
            order == Order::Desc,
            limit.min(MAX_SCAN),
        );
        if let Read::Done(read) = direct {
            return read;
        }
        let pool = self.pool.clone();
        let (ns, table, start, end) = (
            namespace.to_string(),
            table.to_string(),
            start.to_string(),
            end.to_string(),
        );
        run(&self.handle, async move {
            let conn = get_conn(&pool).await?;
            scan_on(&conn, &ns, &table, (&start, &end), sql, limit.min(MAX_SCAN)).await
        })
    }
}

enum Failure {
    /// Rolled back whole, nothing written, after waiting its longest for a
    /// lock (or to end a deadlock): safe to try again from the start.
    Yielded(StorageError),
    Other(StorageError),
}

/// One call of `mmc_apply_prepared` on a pooled connection.
async fn apply_once(
    pool: &Pool,
    tables: &[i64],
    ns: &str,
    ns_key: i64,
    checks: &[Check],
    writes: &[Write],
) -> Result<bool, Failure> {
    let conn = get_conn(pool).await.map_err(Failure::Other)?;
    let applied = async {
        let apply = conn.prepare_cached(APPLY).await?;
        let Some(k) = Keys::of(checks, writes) else {
            return Ok(false);
        };
        let e = &k.events;
        let column = |f: fn(&OutboxEvent) -> &str| e.iter().map(|x| f(x)).collect::<Vec<_>>();
        let (e_url, e_payload): (Vec<_>, Vec<_>) = e
            .iter()
            .map(|x| (x.extra_url.as_deref(), x.payload.as_slice()))
            .unzip();
        let row = conn
            .query_one(
                &apply,
                &[
                    &tables,
                    &ns,
                    &ns_key,
                    &k.tbl,
                    &k.k,
                    &k.v,
                    &k.written,
                    &k.checked,
                    &k.expect,
                    &column(|x| &x.id),
                    &column(|x| &x.event_type),
                    &column(|x| &x.merchant_id),
                    &column(|x| &x.environment),
                    &column(|x| &x.subject_id),
                    &e_url,
                    &e_payload,
                    &now_ms(),
                ],
            )
            .await?;
        Ok::<bool, tokio_postgres::Error>(row.get(0))
    }
    .await;
    // A statement of its own (an implicit transaction): after an error the
    // server reported (a check that did not hold, a deadlock, a lock
    // timeout, a constraint), it rolled back whole and the connection is
    // idle and clean; after any other, its state is unknown.
    match applied {
        Err(e) if e.code().is_some_and(|c| c.code() == CHECK_FAILED) => Ok(false),
        Err(e)
            if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE)
                || e.code() == Some(&SqlState::T_R_DEADLOCK_DETECTED) =>
        {
            Err(Failure::Yielded(db_err(e)))
        }
        Err(e) => {
            if e.as_db_error().is_none() {
                discard(conn);
            }
            Err(Failure::Other(db_err(e)))
        }
        Ok(applied) => Ok(applied),
    }
}

/// An open transaction: each key it reads or writes is locked until it ends,
/// each table it writes is locked shared, each it scans whole.
struct PgTxn {
    /// `None` once committed or rolled back.
    conn: Option<Object>,
    handle: Handle,
    ns: String,
    /// The store's scope, for the tables' lock keys.
    scope: String,
    /// The tables whose lock this transaction holds: whole (true, it
    /// scanned) or shared (false, it wrote).
    tables: HashMap<String, bool>,
    /// Keys read absent and held by a placeholder row, not written since:
    /// absent to this transaction's reads and scans, deleted at commit.
    placeholders: BTreeSet<(String, String)>,
    /// Writes not sent yet, sent before the transaction's next read, scan
    /// or commit: a transaction that writes many keys between reads (an
    /// index backfill) pays one round trip for them, not one each.
    pending: Pending,
    /// Written at commit (see [`write_on`]).
    events: Vec<OutboxEvent>,
    /// A statement failed: PostgreSQL has aborted the transaction, and a
    /// `COMMIT` now would roll back without an error. Commit reports it.
    failed: Option<StorageError>,
    /// This transaction's turn among the node's open ones: given back when
    /// it ends, not when the box is dropped.
    turn: Option<OwnedSemaphorePermit>,
}

impl PgTxn {
    /// Runs `f` with the transaction's connection on the runtime; the
    /// connection comes back unless the runtime stopped.
    fn call<T, F, Fut>(&mut self, f: F) -> Result<T, StorageError>
    where
        T: Send + 'static,
        F: FnOnce(Object, String) -> Fut,
        Fut: Future<Output = (Object, Result<T, StorageError>)> + Send + 'static,
    {
        let conn = self.conn.take().ok_or(StorageError::Finished)?;
        let fut = f(conn, self.ns.clone());
        let (conn, out) = run(&self.handle, async move { Ok(fut.await) })?;
        self.conn = Some(conn);
        if let Err(e) = &out {
            self.failed.get_or_insert_with(|| e.clone());
        }
        out
    }

    /// The lock `table` needs before this transaction writes it (`whole`
    /// false) or scans it (true), if it does not hold it yet.
    fn table_lock(&self, table: &str, whole: bool) -> Option<i64> {
        match self.tables.get(table) {
            Some(&held) if held || !whole => None,
            _ => Some(table_key(&self.scope, &self.ns, table)),
        }
    }

    /// One write, kept until the transaction's next statement (see
    /// [`PgTxn::pending`]): the table's lock shared first (if not held),
    /// then the row, which the write locks.
    fn write(&mut self, w: Write) -> Result<(), StorageError> {
        if self.conn.is_none() {
            return Err(StorageError::Finished);
        }
        let (table, key) = match &w {
            Write::Put { table, key, .. } | Write::Delete { table, key } => (table, key),
            Write::Emit(_) => unreachable!("events are written at commit"),
        };
        check_names(table, key)?;
        if let Some(lock) = self.table_lock(table, false) {
            self.pending.locks.push(lock);
            self.tables.insert(table.clone(), false);
        }
        self.placeholders.remove(&(table.clone(), key.clone()));
        self.pending.writes.push(w);
        Ok(())
    }
}

/// Writes of an open transaction not sent yet, with the table locks they need.
#[derive(Default)]
struct Pending {
    locks: Vec<i64>,
    writes: Vec<Write>,
}

impl Pending {
    /// Sends them: the tables' locks in one statement, the keys deleted
    /// locked, then the writes in order, pipelined.
    ///
    /// A put locks its key by writing it (waiting for a transaction that is
    /// inserting the same key); a `DELETE` skips a row it cannot see yet
    /// without waiting, and the delete would be lost if this transaction
    /// then read what that one wrote. So each key deleted is first locked
    /// as a read locks it (an absent one by a placeholder, which the delete
    /// removes).
    async fn send(self, c: &Client, ns: &str) -> Result<(), StorageError> {
        if !self.locks.is_empty() {
            let stmt = c.prepare_cached(TABLES_SHARED).await.map_err(db_err)?;
            c.execute(&stmt, &[&self.locks]).await.map_err(db_err)?;
        }
        let deleted: BTreeSet<(&str, &str)> = self
            .writes
            .iter()
            .filter_map(|w| match w {
                Write::Delete { table, key } => Some((table.as_str(), key.as_str())),
                _ => None,
            })
            .collect();
        if !deleted.is_empty() {
            let stmt = c.prepare_cached(LOCK_KEY).await.map_err(db_err)?;
            let stmt = &stmt;
            let locks = deleted
                .iter()
                .map(|&(t, k)| async move { c.query_one(stmt, &[&ns, &t, &k.as_bytes()]).await });
            for r in join_all(locks).await {
                r.map_err(db_err)?;
            }
        }
        let writes: Vec<&Write> = self.writes.iter().collect();
        write_on(c, ns, &writes, &[]).await
    }
}

impl Transaction for PgTxn {
    fn get(&mut self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        check_names(table, key)?;
        let held = (table.to_string(), key.to_string());
        if self.placeholders.contains(&held) {
            return Ok(None);
        }
        let (t, k) = held.clone();
        let pending = std::mem::take(&mut self.pending);
        let (value, placeholder) = self.call(|c, ns| async move {
            let out = async {
                pending.send(&c, &ns).await?;
                let stmt = c.prepare_cached(LOCK_KEY).await.map_err(db_err)?;
                let row = c
                    .query_one(&stmt, &[&ns, &t, &k.as_bytes()])
                    .await
                    .map_err(db_err)?;
                Ok((row.get::<_, Option<Vec<u8>>>(0), row.get::<_, bool>(1)))
            }
            .await;
            (c, out)
        })?;
        if placeholder {
            self.placeholders.insert(held);
        }
        Ok(value)
    }

    fn put(&mut self, table: &str, key: &str, value: &[u8]) -> Result<(), StorageError> {
        self.write(Write::Put {
            table: table.to_string(),
            key: key.to_string(),
            value: value.to_vec(),
        })
    }

    fn delete(&mut self, table: &str, key: &str) -> Result<(), StorageError> {
        self.write(Write::Delete {
            table: table.to_string(),
            key: key.to_string(),
        })
    }

    /// Takes the table's lock whole first: no other transaction writes the
    /// table until this one ends, so the range stays as read.
    fn scan(
        &mut self,
        table: &str,
        start: &str,
        end: &str,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        check_names(table, start)?;
        let lock = self.table_lock(table, true);
        // This transaction's placeholders are rows to the server: read past
        // as many as the range may hold, and leave them out.
        let ours: Vec<String> = self
            .placeholders
            .iter()
            .filter(|(t, k)| {
                t == table && k.as_str() >= start && (end.is_empty() || k.as_str() < end)
            })
            .map(|(_, k)| k.clone())
            .collect();
        let limit = limit.min(MAX_SCAN) as usize;
        let (t, start, end) = (table.to_string(), start.to_string(), end.to_string());
        let asked = (limit + ours.len()) as u32;
        let pending = std::mem::take(&mut self.pending);
        let rows = self.call(|c, ns| async move {
            let out = async {
                pending.send(&c, &ns).await?;
                if let Some(lock) = lock {
                    let stmt = c.prepare_cached(TABLE_WHOLE).await.map_err(db_err)?;
                    c.execute(&stmt, &[&lock]).await.map_err(db_err)?;
                }
                scan_on(&c, &ns, &t, (&start, &end), SCAN, asked).await
            }
            .await;
            (c, out)
        })?;
        self.tables.insert(table.to_string(), true);
        Ok(rows
            .into_iter()
            .filter(|(k, _)| !ours.contains(k))
            .take(limit)
            .collect())
    }

    /// Kept until commit, and written last.
    fn emit(&mut self, event: &OutboxEvent) -> Result<(), StorageError> {
        if self.conn.is_none() {
            return Err(StorageError::Finished);
        }
        self.events.push(event.clone());
        Ok(())
    }

    fn commit(&mut self) -> Result<(), StorageError> {
        if let Some(e) = self.failed.take() {
            self.turn.take();
            if let Some(conn) = self.conn.take() {
                rollback_later(&self.handle, conn);
            }
            // A conflict stays one: the caller may run it all again.
            return Err(match e {
                StorageError::Conflict(m) => StorageError::Conflict(m),
                e => StorageError::Unavailable(format!(
                    "transaction rolled back: a statement in it failed: {e}"
                )),
            });
        }
        let conn = self.conn.take().ok_or(StorageError::Finished)?;
        let pending = std::mem::take(&mut self.pending);
        let events = std::mem::take(&mut self.events);
        let (tables, keys): (Vec<String>, Vec<Vec<u8>>) = std::mem::take(&mut self.placeholders)
            .into_iter()
            .map(|(t, k)| (t, k.into_bytes()))
            .unzip();
        let ns = self.ns.clone();
        let _turn = self.turn.take();
        run(&self.handle, async move {
            let written = async {
                pending.send(&conn, &ns).await?;
                if !keys.is_empty() {
                    let stmt = conn
                        .prepare_cached(DROP_PLACEHOLDERS)
                        .await
                        .map_err(db_err)?;
                    conn.execute(&stmt, &[&ns, &tables, &keys])
                        .await
                        .map_err(db_err)?;
                }
                let refs: Vec<&OutboxEvent> = events.iter().collect();
                write_on(&conn, "", &[], &refs).await
            }
            .await;
            if let Err(e) = written {
                discard(conn);
                return Err(e);
            }
            finish(conn, "COMMIT").await
        })
    }
}

impl Drop for PgTxn {
    fn drop(&mut self) {
        // A component that trapped, timed out or forgot to commit: undo its
        // writes. Not waited for: another writer of its keys waits on their
        // locks, which the rollback releases.
        if let Some(conn) = self.conn.take() {
            rollback_later(&self.handle, conn);
        }
    }
}

fn rollback_later(handle: &Handle, conn: Object) {
    handle.spawn(async move {
        let _ = finish(conn, "ROLLBACK").await;
    });
}
