//! The host's tables on PostgreSQL ([`mmc_storage::sql`]): statements run
//! on one pooled connection, in a transaction when writing. The tables are
//! migration 2 (see [`crate::MIGRATIONS`]).

use std::error::Error;

use bytes::BytesMut;
use deadpool_postgres::Object;
use tokio::runtime::Handle;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use mmc_storage::StorageError;
use mmc_storage::sql::{Row, SqlConn, SqlEngine, Value, dollar_placeholders};

use crate::{Postgres, db_err, discard, finish, get_conn, run};

/// A [`Value`] as a parameter of whatever type PostgreSQL inferred for it.
#[derive(Debug)]
struct Param(Value);

impl ToSql for Param {
    fn to_sql(
        &self,
        ty: &Type,
        out: &mut BytesMut,
    ) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        match &self.0 {
            Value::Null => Ok(IsNull::Yes),
            Value::Int(v) => match *ty {
                Type::INT8 => v.to_sql(ty, out),
                Type::INT4 => i32::try_from(*v)?.to_sql(ty, out),
                Type::INT2 => i16::try_from(*v)?.to_sql(ty, out),
                Type::BOOL => (*v != 0).to_sql(ty, out),
                Type::FLOAT8 => (*v as f64).to_sql(ty, out),
                _ => Err(format!("an integer for a {ty} parameter").into()),
            },
            Value::Real(v) => match *ty {
                Type::FLOAT4 => (*v as f32).to_sql(ty, out),
                Type::FLOAT8 => v.to_sql(ty, out),
                _ => Err(format!("a number for a {ty} parameter").into()),
            },
            // Checked, not trusted: text bytes sent for a bigint would be read as a number.
            Value::Text(v) if <&str as ToSql>::accepts(ty) => v.as_str().to_sql(ty, out),
            Value::Blob(v) if *ty == Type::BYTEA => v.as_slice().to_sql(ty, out),
            Value::Text(_) => Err(format!("text for a {ty} parameter").into()),
            Value::Blob(_) => Err(format!("bytes for a {ty} parameter").into()),
        }
    }

    // Checked in `to_sql` against the value it holds.
    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn row(r: &tokio_postgres::Row) -> Result<Row, StorageError> {
    let mut out = Vec::with_capacity(r.len());
    for (i, col) in r.columns().iter().enumerate() {
        let v = match *col.type_() {
            Type::INT8 => r.try_get::<_, Option<i64>>(i).map(Value::from),
            Type::INT4 => r
                .try_get::<_, Option<i32>>(i)
                .map(|v| v.map(i64::from).into()),
            Type::INT2 => r
                .try_get::<_, Option<i16>>(i)
                .map(|v| v.map(i64::from).into()),
            Type::BOOL => r.try_get::<_, Option<bool>>(i).map(Value::from),
            Type::FLOAT8 => r.try_get::<_, Option<f64>>(i).map(Value::from),
            Type::FLOAT4 => r
                .try_get::<_, Option<f32>>(i)
                .map(|v| v.map(f64::from).into()),
            Type::BYTEA => r.try_get::<_, Option<Vec<u8>>>(i).map(Value::from),
            _ => r.try_get::<_, Option<String>>(i).map(Value::from),
        };
        out.push(v.map_err(db_err)?);
    }
    Ok(Row(out))
}

struct Conn {
    conn: Option<Object>,
    handle: Handle,
    scope_key: Box<dyn Fn(&str) -> i64 + Send + Sync>,
    /// The outbox lock nodes of older versions write events under.
    outbox_key: i64,
    write: bool,
    /// A statement failed: PostgreSQL aborted the transaction, and `COMMIT`
    /// would now roll back without an error.
    failed: bool,
}

impl Conn {
    fn call<T: Send + 'static>(
        &mut self,
        sql: &str,
        params: &[Value],
        f: impl FnOnce(Vec<tokio_postgres::Row>, u64) -> T + Send + 'static,
        returns_rows: bool,
    ) -> Result<T, StorageError> {
        let conn = self.conn.take().ok_or(StorageError::Finished)?;
        let sql = dollar_placeholders(sql);
        let params: Vec<Param> = params.iter().cloned().map(Param).collect();
        let (conn, out) = run(&self.handle, async move {
            let out = async {
                let stmt = conn.prepare_cached(&sql).await?;
                let refs: Vec<&(dyn ToSql + Sync)> =
                    params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
                if returns_rows {
                    let rows = conn.query(&stmt, &refs).await?;
                    Ok(f(rows, 0))
                } else {
                    let n = conn.execute(&stmt, &refs).await?;
                    Ok(f(Vec::new(), n))
                }
            }
            .await
            .map_err(db_err);
            Ok((conn, out))
        })?;
        self.conn = Some(conn);
        self.failed |= out.is_err();
        out
    }
}

/// A body that panicked leaves its connection here, perhaps mid-transaction
/// and holding advisory locks: closed, never handed to someone else.
impl Drop for Conn {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            discard(conn);
        }
    }
}

impl SqlConn for Conn {
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, StorageError> {
        self.call(sql, params, |_, n| n, false)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, StorageError> {
        self.call(
            sql,
            params,
            |rows, _| rows.iter().map(row).collect::<Vec<_>>(),
            true,
        )?
        .into_iter()
        .collect()
    }

    fn lock(&mut self, name: &str) -> Result<(), StorageError> {
        if !self.write {
            return Err(StorageError::Invalid(format!(
                "lock {name}: only a write transaction holds locks"
            )));
        }
        let key = (self.scope_key)(name);
        self.call(
            "SELECT pg_advisory_xact_lock(?1)",
            &[Value::Int(key)],
            |_, _| (),
            true,
        )
    }

    fn try_lock(&mut self, name: &str) -> Result<bool, StorageError> {
        if !self.write {
            return Err(StorageError::Invalid(format!(
                "lock {name}: only a write transaction holds locks"
            )));
        }
        let key = (self.scope_key)(name);
        self.call(
            "SELECT pg_try_advisory_xact_lock(?1)",
            &[Value::Int(key)],
            |rows, _| rows.first().is_some_and(|r| r.get::<_, bool>(0)),
            true,
        )
    }

    /// Under the outbox lock that nodes of older versions hold from writing
    /// an event (numbered as it is written) to their commit: none of theirs
    /// is then numbered and uncommitted, so numbering this version's events
    /// now cannot put one of theirs behind the cursor.
    fn number_outbox(&mut self, limit: i64) -> Result<(), StorageError> {
        if !self.write {
            return Err(StorageError::Invalid(
                "the outbox is numbered in a write transaction".into(),
            ));
        }
        let key = self.outbox_key;
        self.call(
            "SELECT pg_advisory_xact_lock(?1)",
            &[Value::Int(key)],
            |_, _| (),
            true,
        )?;
        self.execute(crate::SEQUENCE_OUTBOX, &[Value::Int(limit)])?;
        Ok(())
    }
}

impl SqlEngine for Postgres {
    fn run_sql(
        &self,
        write: bool,
        f: &mut dyn FnMut(&mut dyn SqlConn) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let pool = self.pool.clone();
        let conn = run(&self.handle, async move {
            let conn = get_conn(&pool).await?;
            if write && let Err(e) = conn.batch_execute("BEGIN").await {
                discard(conn);
                return Err(db_err(e));
            }
            Ok(conn)
        })?;
        let scope = self.scope.clone();
        let mut c = Conn {
            conn: Some(conn),
            handle: self.handle.clone(),
            outbox_key: crate::lock_key(&self.scope, "outbox", ""),
            scope_key: Box::new(move |name| crate::lock_key(&scope, "host", name)),
            write,
            failed: false,
        };
        let mut out = f(&mut c);
        if write && c.failed && out.is_ok() {
            out = Err(StorageError::Unavailable(
                "transaction rolled back: a statement in it failed".into(),
            ));
        }
        let Some(conn) = c.conn.take() else {
            return out; // the runtime stopped mid-statement
        };
        match (write, out) {
            (false, out) => out,
            (true, Ok(())) => run(&self.handle, finish(conn, "COMMIT")),
            (true, Err(e)) => {
                let _ = run(&self.handle, finish(conn, "ROLLBACK"));
                Err(e)
            }
        }
    }

    fn engine_name(&self) -> &'static str {
        "postgres"
    }

    fn now_ms_sql(&self) -> &'static str {
        "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
    }
}
