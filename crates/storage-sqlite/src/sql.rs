//! The host's tables on SQLite ([`mmc_storage::sql`]): their schema, and
//! statements run on the writer (in its group commit) or a reader.

use rusqlite::Connection;
use rusqlite::types::{ToSqlOutput, ValueRef};

use mmc_storage::StorageError;
use mmc_storage::sql::{Row, SqlConn, SqlEngine, Value};

use crate::Sqlite;

/// The host's own tables (merchants and keys are in the main schema, beside
/// the outbox they predate).
pub(crate) const HOST_SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS webhook_endpoints (
    id              TEXT PRIMARY KEY,
    merchant_id     TEXT NOT NULL,
    environment     TEXT NOT NULL,
    url             TEXT NOT NULL,
    secret          TEXT NOT NULL,
    enabled_events  TEXT NOT NULL,
    description     TEXT,
    created_ms      INTEGER NOT NULL,
    deleted_ms      INTEGER
);
CREATE INDEX IF NOT EXISTS webhook_endpoints_owner ON webhook_endpoints (merchant_id, environment);

-- Signs deliveries to a payment's callback_url (no endpoint, so no endpoint secret).
CREATE TABLE IF NOT EXISTS callback_secrets (
    merchant_id  TEXT NOT NULL,
    environment  TEXT NOT NULL,
    secret       TEXT NOT NULL,
    PRIMARY KEY (merchant_id, environment)
);

CREATE TABLE IF NOT EXISTS deliveries (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id         TEXT NOT NULL,
    endpoint_id      TEXT,
    url              TEXT NOT NULL,
    environment      TEXT NOT NULL,
    merchant_id      TEXT NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_attempt_ms  INTEGER NOT NULL,
    created_ms       INTEGER NOT NULL,
    delivered_ms     INTEGER,
    last_error       TEXT
);
CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries (status, next_attempt_ms);
CREATE INDEX IF NOT EXISTS deliveries_event ON deliveries (event_id);

CREATE TABLE IF NOT EXISTS delivery_attempts (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    delivery_id  INTEGER NOT NULL,
    at_ms        INTEGER NOT NULL,
    status_code  INTEGER,
    latency_ms   INTEGER NOT NULL,
    error        TEXT
);
CREATE INDEX IF NOT EXISTS delivery_attempts_delivery ON delivery_attempts (delivery_id);
CREATE INDEX IF NOT EXISTS outbox_owner ON outbox (merchant_id, environment, seq);

-- Adapter versions deployed through the admin API (the rollback chain).
CREATE TABLE IF NOT EXISTS component_versions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT NOT NULL,
    hash         TEXT NOT NULL,
    bytes        BLOB NOT NULL,
    deployed_ms  INTEGER NOT NULL,
    active       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS component_versions_name ON component_versions (name, id);

-- The routes as changed through the admin API (each row the whole table,
-- as JSON); the active row is in force on every node.
CREATE TABLE IF NOT EXISTS route_versions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    specs        TEXT NOT NULL,
    changed_ms   INTEGER NOT NULL,
    change       TEXT NOT NULL,
    note         TEXT,
    active       INTEGER NOT NULL DEFAULT 0
);

-- The audit trail of adapter calls.
CREATE TABLE IF NOT EXISTS adapter_calls (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    subject_id   TEXT NOT NULL,
    environment  TEXT NOT NULL,
    operator     TEXT NOT NULL,
    adapter      TEXT,
    version      TEXT,
    operation    TEXT NOT NULL,
    outcome      TEXT NOT NULL,
    duration_ms  REAL NOT NULL,
    at_ms        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS adapter_calls_subject ON adapter_calls (subject_id, id);

-- Background duties held by one node at a time (see the host's `leases`).
CREATE TABLE IF NOT EXISTS leases (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    expires_ms  INTEGER NOT NULL
);
-- Merchant console: people (not keys), their sessions, and what they changed.
CREATE TABLE IF NOT EXISTS console_users (
    id                 TEXT PRIMARY KEY,
    merchant_id        TEXT NOT NULL,
    email              TEXT NOT NULL,
    role               TEXT NOT NULL,
    password_hash      TEXT,
    invite_hash        TEXT,
    invite_expires_ms  INTEGER,
    totp_secret        TEXT,
    totp_enabled       INTEGER NOT NULL DEFAULT 0,
    totp_last_step     INTEGER,
    created_ms         INTEGER NOT NULL,
    removed_ms         INTEGER
);
CREATE UNIQUE INDEX IF NOT EXISTS console_users_email ON console_users (email) WHERE removed_ms IS NULL;
CREATE INDEX IF NOT EXISTS console_users_merchant ON console_users (merchant_id);
CREATE INDEX IF NOT EXISTS console_users_invite ON console_users (invite_hash);

CREATE TABLE IF NOT EXISTS console_sessions (
    token_hash   TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL,
    csrf         TEXT NOT NULL,
    environment  TEXT NOT NULL,
    mfa          INTEGER NOT NULL,
    client       TEXT,
    created_ms   INTEGER NOT NULL,
    expires_ms   INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS console_sessions_user ON console_sessions (user_id);
CREATE INDEX IF NOT EXISTS console_sessions_expiry ON console_sessions (expires_ms);

CREATE TABLE IF NOT EXISTS console_audit (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    merchant_id  TEXT NOT NULL,
    environment  TEXT NOT NULL,
    user_id      TEXT NOT NULL,
    email        TEXT NOT NULL,
    action       TEXT NOT NULL,
    subject      TEXT,
    detail       TEXT,
    client       TEXT,
    at_ms        INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS console_audit_merchant ON console_audit (merchant_id, id);
CREATE INDEX IF NOT EXISTS console_audit_subject ON console_audit (merchant_id, subject);

-- Console forms already carried out (a reload finds them done), by the
-- SHA-256 of merchant and form key; forgotten after a day.
CREATE TABLE IF NOT EXISTS console_forms_done (
    key_hash  TEXT PRIMARY KEY,
    at_ms     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS console_forms_done_at ON console_forms_done (at_ms);

-- A console user's recovery codes (each stands in for an authenticator
-- code once): only their SHA-256, and when and for what each was used.
CREATE TABLE IF NOT EXISTS console_recovery_codes (
    user_id     TEXT NOT NULL,
    code_hash   TEXT NOT NULL,
    created_ms  INTEGER NOT NULL,
    used_ms     INTEGER,
    used_for    TEXT,
    PRIMARY KEY (user_id, code_hash)
) WITHOUT ROWID;

-- What a page shows once after a form (a new key, recovery codes), sealed
-- under the browser's session token (which the database never holds), and
-- gone at its first read.
CREATE TABLE IF NOT EXISTS console_shown_once (
    token_hash  TEXT NOT NULL,
    what        TEXT NOT NULL,
    sealed      TEXT NOT NULL,
    expires_ms  INTEGER NOT NULL,
    PRIMARY KEY (token_hash, what)
) WITHOUT ROWID;

-- Failed console sign-ins per account and per client address (SHA-256 keys),
-- counted here so that every node of a fleet shares one limit.
CREATE TABLE IF NOT EXISTS console_sign_in_failures (
    key_hash  TEXT PRIMARY KEY,
    failures  INTEGER NOT NULL,
    since_ms  INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS console_sign_in_failures_since ON console_sign_in_failures (since_ms);

-- The console overview's tallies, kept by the outbox dispatcher (the host's
-- `tallies`): per merchant, environment, UTC day of creation (days since
-- 1970-01-01) and operator ('' = not chosen yet).
CREATE TABLE IF NOT EXISTS overview_tallies (
    merchant_id  TEXT NOT NULL,
    environment  TEXT NOT NULL,
    day          INTEGER NOT NULL,
    operator     TEXT NOT NULL,
    payments     INTEGER NOT NULL,
    succeeded    INTEGER NOT NULL,
    finished     INTEGER NOT NULL,
    volume       INTEGER NOT NULL,
    PRIMARY KEY (merchant_id, environment, day, operator)
) WITHOUT ROWID;
-- The operator row each hosted payment in progress is counted in.
CREATE TABLE IF NOT EXISTS overview_hosted (
    payment_id  TEXT PRIMARY KEY,
    operator    TEXT NOT NULL
) WITHOUT ROWID;
-- The last outbox event counted; no row: never counted (the dispatcher
-- counts the stored payments first).
CREATE TABLE IF NOT EXISTS overview_cursor (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL
);
"#;

struct Param<'a>(&'a Value);

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self.0 {
            Value::Null => ToSqlOutput::Borrowed(ValueRef::Null),
            Value::Int(v) => ToSqlOutput::Borrowed(ValueRef::Integer(*v)),
            Value::Real(v) => ToSqlOutput::Borrowed(ValueRef::Real(*v)),
            Value::Text(v) => ToSqlOutput::Borrowed(ValueRef::Text(v.as_bytes())),
            Value::Blob(v) => ToSqlOutput::Borrowed(ValueRef::Blob(v)),
        })
    }
}

fn value(v: ValueRef<'_>) -> Result<Value, StorageError> {
    Ok(match v {
        ValueRef::Null => Value::Null,
        ValueRef::Integer(i) => Value::Int(i),
        ValueRef::Real(r) => Value::Real(r),
        ValueRef::Text(t) => Value::Text(
            std::str::from_utf8(t)
                .map_err(|_| StorageError::Unavailable("sqlite: text is not UTF-8".into()))?
                .to_string(),
        ),
        ValueRef::Blob(b) => Value::Blob(b.to_vec()),
    })
}

struct Conn<'a>(&'a Connection);

impl SqlConn for Conn<'_> {
    fn execute(&mut self, sql: &str, params: &[Value]) -> Result<u64, StorageError> {
        let mut stmt = self.0.prepare_cached(sql)?;
        let n = stmt.execute(rusqlite::params_from_iter(params.iter().map(Param)))?;
        Ok(n as u64)
    }

    fn query(&mut self, sql: &str, params: &[Value]) -> Result<Vec<Row>, StorageError> {
        let mut stmt = self.0.prepare_cached(sql)?;
        let width = stmt.column_count();
        let mut rows = stmt.query(rusqlite::params_from_iter(params.iter().map(Param)))?;
        let mut out = Vec::new();
        while let Some(r) = rows.next()? {
            let mut row = Vec::with_capacity(width);
            for i in 0..width {
                row.push(value(r.get_ref(i)?)?);
            }
            out.push(Row(row));
        }
        Ok(out)
    }

    /// One writer already: nothing to take.
    fn lock(&mut self, _name: &str) -> Result<(), StorageError> {
        Ok(())
    }

    fn try_lock(&mut self, _name: &str) -> Result<bool, StorageError> {
        Ok(true)
    }
}

impl SqlEngine for Sqlite {
    fn run_sql(
        &self,
        write: bool,
        f: &mut dyn FnMut(&mut dyn SqlConn) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        if write {
            self.write(|c| f(&mut Conn(c)))
        } else {
            self.read(|c| f(&mut Conn(c)))
        }
    }

    fn engine_name(&self) -> &'static str {
        "sqlite"
    }

    fn now_ms_sql(&self) -> &'static str {
        "CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)"
    }
}
