//! The storage contract on PostgreSQL: reads on any pooled connection,
//! prepared transactions applied in one round trip locking only the keys
//! they check and write, and open transactions holding the namespace's
//! writer lock until they end.

use deadpool_postgres::Object;
use mmc_storage::{Backend, Check, Order, OutboxEvent, StorageError, Transaction, Write};
use parking_lot::RawMutex;
use parking_lot::lock_api::ArcMutexGuard;
use std::future::Future;
use tokio::runtime::Handle;

use crate::{
    Postgres, check_names, check_namespace, check_writes, db_err, discard, finish, get_conn,
    now_ms, run,
};

use super::statements::{
    APPLY, CHECK_FAILED, SCAN, SCAN_DESC, begin_on, get_on, scan_on, write_on,
};

impl Backend for Postgres {
    fn begin(&self, namespace: &str) -> Result<Box<dyn Transaction>, StorageError> {
        check_namespace(namespace)?;
        let local = self.local_writer(namespace)?;
        let (pool, ns_key) = (self.pool.clone(), self.lock_key("ns", namespace));
        let conn = run(&self.handle, async move {
            let conn = get_conn(&pool).await?;
            match begin_on(&conn, ns_key).await {
                Ok(()) => Ok(conn),
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
            events: Vec::new(),
            failed: None,
            local: Some(local),
        }))
    }

    /// Checks then writes in one transaction, in one round trip
    /// (`mmc_apply_keyed`, migration 15): every key it checks or writes is
    /// locked in (table, key) order (an absent one by inserting it), so the
    /// checks read the latest committed values and nothing changes them
    /// before the writes commit. Two prepared transactions wait for each
    /// other only on a key they share; the namespace's lock is taken shared,
    /// against open transactions only. No node-local queue either: the
    /// pool's size bounds what waits on the database.
    fn apply(
        &self,
        namespace: &str,
        checks: Vec<Check>,
        writes: Vec<Write>,
    ) -> Result<bool, StorageError> {
        check_writes(namespace, &checks, &writes)?;
        let pool = self.pool.clone();
        let ns_key = self.lock_key("ns", namespace);
        let ns = namespace.to_string();
        run(&self.handle, async move {
            let conn = get_conn(&pool).await?;
            let applied = async {
                let apply = conn.prepare_cached(APPLY).await?;
                let (mut c_tbl, mut c_k, mut c_v) = (vec![], vec![], vec![]);
                for c in &checks {
                    c_tbl.push(c.table.as_str());
                    c_k.push(c.key.as_bytes());
                    c_v.push(c.value.as_deref());
                }
                let (mut w_tbl, mut w_k, mut w_v, mut e) = (vec![], vec![], vec![], vec![]);
                for w in &writes {
                    let (table, key, value) = match w {
                        Write::Put { table, key, value } => (table, key, Some(value.as_slice())),
                        Write::Delete { table, key } => (table, key, None),
                        Write::Emit(event) => {
                            e.push(event);
                            continue;
                        }
                    };
                    w_tbl.push(table.as_str());
                    w_k.push(key.as_bytes());
                    w_v.push(value);
                }
                let column =
                    |f: fn(&OutboxEvent) -> &str| e.iter().map(|x| f(x)).collect::<Vec<_>>();
                let (e_url, e_payload): (Vec<_>, Vec<_>) = e
                    .iter()
                    .map(|x| (x.extra_url.as_deref(), x.payload.as_slice()))
                    .unzip();
                let row = conn
                    .query_one(
                        &apply,
                        &[
                            &ns,
                            &ns_key,
                            &c_tbl,
                            &c_k,
                            &c_v,
                            &w_tbl,
                            &w_k,
                            &w_v,
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
            // A statement of its own (an implicit transaction): after an
            // error the server reported (a check that did not hold, a lock
            // timeout, a constraint), it rolled back whole and the connection
            // is idle and clean; after any other, its state is unknown.
            match applied {
                Err(e) if e.code().is_some_and(|c| c.code() == CHECK_FAILED) => Ok(false),
                Err(e) => {
                    if e.as_db_error().is_none() {
                        discard(conn);
                    }
                    Err(db_err(e))
                }
                ok => ok.map_err(db_err),
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
        let pool = self.pool.clone();
        let (ns, table, start, end) = (
            namespace.to_string(),
            table.to_string(),
            start.to_string(),
            end.to_string(),
        );
        run(&self.handle, async move {
            let conn = get_conn(&pool).await?;
            scan_on(&conn, &ns, &table, (&start, &end), sql, limit).await
        })
    }
}

/// An open transaction holding the namespace's writer lock (local and fleet-wide).
struct PgTxn {
    /// `None` once committed or rolled back.
    conn: Option<Object>,
    handle: Handle,
    ns: String,
    /// Written at commit (see [`write_on`]).
    events: Vec<OutboxEvent>,
    /// A statement failed: PostgreSQL has aborted the transaction, and a
    /// `COMMIT` now would roll back without an error. Commit reports it.
    failed: Option<StorageError>,
    /// This node's turn at the namespace: released when the transaction
    /// ends, as SQLite's writer is, not when the box is dropped.
    local: Option<ArcMutexGuard<RawMutex, ()>>,
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
}

impl Transaction for PgTxn {
    fn get(&mut self, table: &str, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        check_names(table, key)?;
        let (table, key) = (table.to_string(), key.to_string());
        self.call(|c, ns| async move {
            let out = get_on(&c, &ns, &table, &key).await;
            (c, out)
        })
    }

    fn put(&mut self, table: &str, key: &str, value: &[u8]) -> Result<(), StorageError> {
        check_names(table, key)?;
        let w = Write::Put {
            table: table.to_string(),
            key: key.to_string(),
            value: value.to_vec(),
        };
        self.call(|c, ns| async move {
            let out = write_on(&c, &ns, &[&w], &[]).await;
            (c, out)
        })
    }

    fn delete(&mut self, table: &str, key: &str) -> Result<(), StorageError> {
        check_names(table, key)?;
        let w = Write::Delete {
            table: table.to_string(),
            key: key.to_string(),
        };
        self.call(|c, ns| async move {
            let out = write_on(&c, &ns, &[&w], &[]).await;
            (c, out)
        })
    }

    fn scan(
        &mut self,
        table: &str,
        start: &str,
        end: &str,
        limit: u32,
    ) -> Result<Vec<(String, Vec<u8>)>, StorageError> {
        check_names(table, start)?;
        let (table, start, end) = (table.to_string(), start.to_string(), end.to_string());
        self.call(|c, ns| async move {
            let out = scan_on(&c, &ns, &table, (&start, &end), SCAN, limit).await;
            (c, out)
        })
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
            self.local.take();
            if let Some(conn) = self.conn.take() {
                rollback_later(&self.handle, conn);
            }
            return Err(StorageError::Unavailable(format!(
                "transaction rolled back: a statement in it failed: {e}"
            )));
        }
        let conn = self.conn.take().ok_or(StorageError::Finished)?;
        let events = std::mem::take(&mut self.events);
        let _local = self.local.take();
        run(&self.handle, async move {
            let refs: Vec<&OutboxEvent> = events.iter().collect();
            if let Err(e) = write_on(&conn, "", &[], &refs).await {
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
        // writes. Not waited for: the next writer of the namespace waits on
        // the fleet lock, which the rollback releases.
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
