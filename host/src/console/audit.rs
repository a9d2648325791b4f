//! The console's audit log: every action that changes something, with who
//! did it, when, and from which address. Owners read and filter it.

use serde::Serialize;

use crate::clock::system_now_ms;
use crate::db::{SqlDb, StorageError};
use mmc_storage::sql_params;

use super::sessions::Session;

#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub id: i64,
    pub environment: String,
    pub user_id: String,
    pub email: String,
    pub action: String,
    pub subject: Option<String>,
    pub detail: Option<String>,
    pub client: Option<String>,
    pub at_ms: u64,
}

/// What the list is narrowed to (all optional).
#[derive(Debug, Default)]
pub struct Filter {
    pub action: Option<String>,
    pub email: Option<String>,
    pub since_ms: Option<u64>,
    pub until_ms: Option<u64>,
    pub before_id: Option<i64>,
}

pub const PAGE: usize = 50;

const INSERT: &str = "INSERT INTO console_audit (merchant_id, environment, user_id, email, action, subject, detail, client, at_ms)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

#[derive(Clone)]
pub struct AuditLog {
    db: SqlDb,
}

impl AuditLog {
    pub fn new(db: SqlDb) -> AuditLog {
        AuditLog { db }
    }

    pub fn record(
        &self,
        s: &Session,
        action: &str,
        subject: Option<&str>,
        detail: Option<&str>,
        client: Option<&str>,
    ) -> Result<(), StorageError> {
        self.db.write(|tx| {
            tx.execute(
                INSERT,
                sql_params![
                    &s.merchant_id,
                    s.environment.as_str(),
                    &s.user_id,
                    &s.email,
                    action,
                    subject,
                    detail,
                    client,
                    system_now_ms() as i64
                ],
            )
        })?;
        Ok(())
    }

    /// Records an entry unless the same one (action, subject, detail) is
    /// already there: for actions the API may answer twice (idempotent replays).
    pub fn record_once(
        &self,
        s: &Session,
        action: &str,
        subject: &str,
        detail: &str,
        client: Option<&str>,
    ) -> Result<(), StorageError> {
        self.db.write(|tx| {
            tx.lock(&format!("console_audit:{}", s.merchant_id))?;
            let seen = tx.query_opt(
                "SELECT 1 FROM console_audit WHERE merchant_id = ?1 AND action = ?2 AND subject = ?3 AND detail = ?4",
                sql_params![&s.merchant_id, action, subject, detail],
            )?;
            if seen.is_none() {
                tx.execute(
                    INSERT,
                    sql_params![&s.merchant_id, s.environment.as_str(), &s.user_id, &s.email, action, subject, detail, client, system_now_ms() as i64],
                )?;
            }
            Ok(())
        })
    }

    /// A merchant's entries, newest first, one page (and whether more follow).
    pub fn list(&self, merchant_id: &str, f: &Filter) -> Result<(Vec<Entry>, bool), StorageError> {
        let rows = self.db.read(|c| {
            c.query(
                "SELECT id, environment, user_id, email, action, subject, detail, client, at_ms FROM console_audit
                 WHERE merchant_id = ?1
                   AND (CAST(?2 AS TEXT) IS NULL OR action = ?2)
                   AND (CAST(?3 AS TEXT) IS NULL OR email = ?3)
                   AND at_ms >= ?4 AND at_ms < ?5 AND id < ?6
                 ORDER BY id DESC LIMIT ?7",
                sql_params![
                    merchant_id,
                    &f.action,
                    &f.email.as_ref().map(|e| e.trim().to_lowercase()),
                    f.since_ms.unwrap_or(0) as i64,
                    f.until_ms.map(|u| u as i64).unwrap_or(i64::MAX),
                    f.before_id.unwrap_or(i64::MAX),
                    PAGE as i64 + 1
                ],
            )
        })?;
        let mut entries = rows
            .iter()
            .map(|r| {
                Ok(Entry {
                    id: r.int(0)?,
                    environment: r.text(1)?,
                    user_id: r.text(2)?,
                    email: r.text(3)?,
                    action: r.text(4)?,
                    subject: r.opt_text(5)?,
                    detail: r.opt_text(6)?,
                    client: r.opt_text(7)?,
                    at_ms: r.int(8)? as u64,
                })
            })
            .collect::<Result<Vec<_>, StorageError>>()?;
        let more = entries.len() > PAGE;
        entries.truncate(PAGE);
        Ok((entries, more))
    }
}
