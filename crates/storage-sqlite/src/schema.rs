//! The store's tables, created when missing, and columns added to a store
//! made by an older version.

use super::*;

pub(crate) const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS kv (
    ns    TEXT NOT NULL,
    tbl   TEXT NOT NULL,
    k     TEXT NOT NULL,
    v     BLOB NOT NULL,
    PRIMARY KEY (ns, tbl, k)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS merchants (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    created_ms  INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS api_keys (
    id           TEXT PRIMARY KEY,
    key_hash     TEXT NOT NULL UNIQUE,
    merchant_id  TEXT NOT NULL REFERENCES merchants(id),
    environment  TEXT NOT NULL CHECK (environment IN ('test', 'live')),
    created_ms   INTEGER NOT NULL,
    revoked_ms   INTEGER
);

CREATE TABLE IF NOT EXISTS outbox (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    event_type   TEXT NOT NULL,
    merchant_id  TEXT NOT NULL,
    environment  TEXT NOT NULL,
    subject_id   TEXT NOT NULL,
    extra_url    TEXT,
    payload      BLOB NOT NULL,
    created_ms   INTEGER NOT NULL,
    -- Superseded by outbox_cursor; still read once, by the migration below
    -- that places the cursor of a file from before it.
    dispatched   INTEGER NOT NULL DEFAULT 0
);

-- Events up to `seq` are fanned out into deliveries. One row moved forward
-- per dispatch round, instead of a flag and an index entry updated per event.
CREATE TABLE IF NOT EXISTS outbox_cursor (
    id   INTEGER PRIMARY KEY CHECK (id = 1),
    seq  INTEGER NOT NULL
);
-- A file from before the cursor: start after the last event it dispatched.
-- Only when the row is missing (once per file): that lookup scans the outbox.
INSERT INTO outbox_cursor (id, seq)
SELECT 1, COALESCE(
    (SELECT MIN(seq) - 1 FROM outbox WHERE dispatched = 0),
    (SELECT MAX(seq) FROM outbox),
    0)
WHERE NOT EXISTS (SELECT 1 FROM outbox_cursor);
DROP INDEX IF EXISTS outbox_undispatched;
"#;

/// Columns added after their table was first shipped: (table, column,
/// declaration). Added at open where missing, so an older file keeps working.
pub(crate) const ADDED_COLUMNS: &[(&str, &str, &str)] = &[
    // A key's scopes, comma-separated; NULL (keys from before scopes) = all.
    ("api_keys", "scopes", "TEXT"),
    // Maker-checker per environment; NULL = the default (off in test, on in live).
    ("merchants", "second_approver_test", "INTEGER"),
    ("merchants", "second_approver_live", "INTEGER"),
    // A disabled webhook endpoint receives no new event; NULL = enabled.
    ("webhook_endpoints", "disabled_ms", "INTEGER"),
    // A console action's outcome: `pending` until it is known, `done` or
    // `refused`; entries from before it were written once done.
    ("console_audit", "outcome", "TEXT NOT NULL DEFAULT 'done'"),
    // The console user who made a key (maker-checker counts it as that
    // person); NULL = a service key, made with the command line.
    ("api_keys", "created_by_user", "TEXT"),
    // Until when a console user may approve no payout (their access was
    // reset); NULL = no hold.
    ("console_users", "approvals_held_until_ms", "INTEGER"),
    // A session that may enrol a second factor: opened by an invitation or
    // reset link, or one that just passed the current factor.
    (
        "console_sessions",
        "may_enrol",
        "INTEGER NOT NULL DEFAULT 0",
    ),
    // What the last code asked again before an action was given for: the
    // same request submitted twice carries the same code.
    ("console_users", "totp_last_purpose", "TEXT"),
    // The payment an audited action was about, as the log shows it: its
    // merchant reference and amount, kept at write time so that the log's
    // page reads them with its entries.
    ("console_audit", "reference", "TEXT"),
    ("console_audit", "amount", "INTEGER"),
    ("console_audit", "currency", "TEXT"),
    // The IANA zone the console shows a merchant's times in; NULL = UTC.
    ("merchants", "time_zone", "TEXT"),
    // A key's name, the start of the key as shown in lists (the
    // environment's prefix and a few characters), and when it last
    // authenticated (to the minute); NULL for keys made before them.
    ("api_keys", "name", "TEXT"),
    ("api_keys", "shown_prefix", "TEXT"),
    ("api_keys", "last_used_ms", "INTEGER"),
    // The console form's idempotency key a key was made with: the same
    // form submitted again makes no second key.
    ("api_keys", "request_key", "TEXT"),
];

pub(crate) fn add_missing_columns(conn: &Connection) -> Result<(), StorageError> {
    for (table, column, decl) in ADDED_COLUMNS {
        let present: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2)",
            [table, column],
            |r| r.get(0),
        )?;
        if !present {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
        }
    }
    Ok(())
}
