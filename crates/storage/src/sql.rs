//! The host's own tables (merchants, keys, webhook endpoints, deliveries,
//! adapter versions, the audit trail) on whichever engine is configured.
//!
//! Each statement is written once, in the SQL both engines speak: `?1`, `?2`
//! … placeholders (PostgreSQL's engine turns them into `$1`, `$2`),
//! `ON CONFLICT`, `RETURNING`, `CAST(? AS BIGINT)` where a parameter's type
//! cannot be inferred. The tables themselves are each engine's (SQLite's
//! schema, PostgreSQL's versioned migrations), as column types differ.
//!
//! Where SQLite's single writer made a read-then-write safe, a fleet needs a
//! lock: [`SqlConn::lock`] takes a named lock held until the transaction
//! ends, across every node on the database (a no-op on SQLite, whose writer
//! is already alone).

use std::sync::Arc;

use crate::StorageError;

/// A parameter or a column value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl From<i64> for Value {
    fn from(v: i64) -> Self {
        Value::Int(v)
    }
}
impl From<u32> for Value {
    fn from(v: u32) -> Self {
        Value::Int(v.into())
    }
}
impl From<u16> for Value {
    fn from(v: u16) -> Self {
        Value::Int(v.into())
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Self {
        Value::Int(v.into())
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Self {
        Value::Real(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Self {
        Value::Text(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Self {
        Value::Text(v)
    }
}
impl From<&String> for Value {
    fn from(v: &String) -> Self {
        Value::Text(v.clone())
    }
}
impl From<&[u8]> for Value {
    fn from(v: &[u8]) -> Self {
        Value::Blob(v.to_vec())
    }
}
impl From<Vec<u8>> for Value {
    fn from(v: Vec<u8>) -> Self {
        Value::Blob(v)
    }
}
impl From<&Vec<u8>> for Value {
    fn from(v: &Vec<u8>) -> Self {
        Value::Blob(v.clone())
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(v: Option<T>) -> Self {
        v.map_or(Value::Null, Into::into)
    }
}
impl<T: Clone + Into<Value>> From<&Option<T>> for Value {
    fn from(v: &Option<T>) -> Self {
        v.clone().map_or(Value::Null, Into::into)
    }
}

/// `sql_params![a, b, c]`: the parameters `?1`, `?2`, `?3`.
#[macro_export]
macro_rules! sql_params {
    ($($v:expr),* $(,)?) => {
        &[$($crate::sql::Value::from($v)),*][..]
    };
}

/// One result row.
#[derive(Debug, Clone)]
pub struct Row(pub Vec<Value>);

fn wrong_type(i: usize, want: &str, got: &Value) -> StorageError {
    StorageError::Unavailable(format!("column {i}: expected {want}, found {got:?}"))
}

impl Row {
    fn at(&self, i: usize) -> Result<&Value, StorageError> {
        self.0
            .get(i)
            .ok_or_else(|| StorageError::Unavailable(format!("no column {i}")))
    }

    pub fn int(&self, i: usize) -> Result<i64, StorageError> {
        self.opt_int(i)?
            .ok_or_else(|| wrong_type(i, "an integer", &Value::Null))
    }

    pub fn opt_int(&self, i: usize) -> Result<Option<i64>, StorageError> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Int(v) => Ok(Some(*v)),
            other => Err(wrong_type(i, "an integer", other)),
        }
    }

    pub fn real(&self, i: usize) -> Result<f64, StorageError> {
        match self.at(i)? {
            Value::Real(v) => Ok(*v),
            Value::Int(v) => Ok(*v as f64),
            other => Err(wrong_type(i, "a number", other)),
        }
    }

    pub fn text(&self, i: usize) -> Result<String, StorageError> {
        self.opt_text(i)?
            .ok_or_else(|| wrong_type(i, "text", &Value::Null))
    }

    pub fn opt_text(&self, i: usize) -> Result<Option<String>, StorageError> {
        match self.at(i)? {
            Value::Null => Ok(None),
            Value::Text(v) => Ok(Some(v.clone())),
            other => Err(wrong_type(i, "text", other)),
        }
    }

    pub fn blob(&self, i: usize) -> Result<Vec<u8>, StorageError> {
        match self.at(i)? {
            Value::Blob(v) => Ok(v.clone()),
            other => Err(wrong_type(i, "bytes", other)),
        }
    }
}

/// A connection inside [`SqlDb::read`] or [`SqlDb::write`].
pub trait SqlConn {
    /// Runs a statement; the number of rows it changed.
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, StorageError>;
    /// Runs a query (or a statement with `RETURNING`); its rows.
    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, StorageError>;
    /// In a write: holds the lock `name` until the transaction ends, on every
    /// node of the database. Takes it before reading what the write depends on.
    fn lock(&mut self, name: &str) -> Result<(), StorageError>;
    /// [`lock`](Self::lock) if it is free now: false when another node
    /// holds it (a poll that finds its work taken skips the round rather
    /// than wait holding a connection).
    fn try_lock(&mut self, name: &str) -> Result<bool, StorageError>;
    /// Numbers (`seq`) up to `limit` of the outbox's events committed and
    /// not yet numbered, after every event numbered before: what the one
    /// reader of the outbox by `seq` at a time (the dispatcher, under its
    /// lock) runs before it reads past its cursor, in its transaction. An
    /// event still uncommitted is numbered by a later round, so a cursor on
    /// `seq` never passes it. Nothing to do where events are numbered in
    /// commit order as they are written (SQLite's single writer).
    fn number_outbox(&mut self, limit: i64) -> Result<(), StorageError> {
        let _ = limit;
        Ok(())
    }
}

impl dyn SqlConn + '_ {
    pub fn query_opt(&mut self, sql: &str, params: &[Value]) -> Result<Option<Row>, StorageError> {
        Ok(self.query(sql, params)?.into_iter().next())
    }

    pub fn query_one(&mut self, sql: &str, params: &[Value]) -> Result<Row, StorageError> {
        self.query_opt(sql, params)?
            .ok_or_else(|| StorageError::Unavailable("query returned no row".into()))
    }
}

/// What an engine implements for the host's tables.
pub trait SqlEngine: Send + Sync + 'static {
    /// Runs `f` on a connection: in one durable transaction when `write`
    /// (committed if `f` succeeds, rolled back otherwise), else on
    /// committed data.
    fn run_sql(
        &self,
        write: bool,
        f: &mut dyn FnMut(&mut dyn SqlConn) -> Result<(), StorageError>,
    ) -> Result<(), StorageError>;

    /// `"sqlite"` or `"postgres"`, for the few places that must know (logs).
    fn engine_name(&self) -> &'static str;

    /// An SQL expression for the database's clock in Unix milliseconds: a
    /// fleet compares lease times on one clock, not on each node's.
    fn now_ms_sql(&self) -> &'static str;
}

/// The host's handle on its tables.
#[derive(Clone)]
pub struct SqlDb(Arc<dyn SqlEngine>);

impl SqlDb {
    pub fn new(engine: Arc<dyn SqlEngine>) -> SqlDb {
        SqlDb(engine)
    }

    pub fn engine_name(&self) -> &'static str {
        self.0.engine_name()
    }

    pub fn now_ms_sql(&self) -> &'static str {
        self.0.now_ms_sql()
    }

    /// Runs `f` on committed data.
    pub fn read<T>(
        &self,
        f: impl FnOnce(&mut dyn SqlConn) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        self.run(false, f)
    }

    /// Runs `f` in one transaction; returns once it is durable.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&mut dyn SqlConn) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        self.run(true, f)
    }

    fn run<T>(
        &self,
        write: bool,
        f: impl FnOnce(&mut dyn SqlConn) -> Result<T, StorageError>,
    ) -> Result<T, StorageError> {
        let mut f = Some(f);
        let mut out = None;
        let ran = self.0.run_sql(write, &mut |c| {
            let f = f
                .take()
                .ok_or_else(|| StorageError::Unavailable("transaction body run twice".into()))?;
            out = Some(f(c)?);
            Ok(())
        });
        if let Err(e) = &ran {
            crate::failures::note(crate::failures::By::Host, e);
        }
        ran?;
        out.ok_or_else(|| StorageError::Unavailable("transaction body did not run".into()))
    }
}

/// `?N` placeholders as PostgreSQL's `$N` (our statements have no `?` in
/// string literals).
pub fn dollar_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '?' && chars.peek().is_some_and(|d| d.is_ascii_digit()) {
            out.push('$');
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_become_dollars() {
        assert_eq!(
            dollar_placeholders("SELECT a FROM t WHERE b = ?1 AND (?12 IS NULL OR c = ?12)"),
            "SELECT a FROM t WHERE b = $1 AND ($12 IS NULL OR c = $12)"
        );
    }

    #[test]
    fn rows_read_typed() {
        let r = Row(vec![
            Value::Int(3),
            Value::Null,
            Value::Text("x".into()),
            Value::Blob(vec![1]),
        ]);
        assert_eq!(r.int(0).unwrap(), 3);
        assert_eq!(r.opt_int(1).unwrap(), None);
        assert_eq!(r.opt_text(1).unwrap(), None);
        assert_eq!(r.text(2).unwrap(), "x");
        assert_eq!(r.blob(3).unwrap(), vec![1]);
        assert!(r.int(2).is_err());
        assert!(r.text(1).is_err());
        let p = sql_params!["a", 1i64, Option::<String>::None, true];
        assert_eq!(p.len(), 4);
        assert_eq!(p[3], Value::Int(1));
    }
}
