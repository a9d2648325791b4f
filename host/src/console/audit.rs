//! The console's audit log: every action that changes something, with who
//! did it, when, from which address, and how it ended. Owners read and
//! filter it.
//!
//! An action's entry is written before the action ([`AuditLog::begin`],
//! outcome `pending`) and finished once its outcome is known (`done` or
//! `refused`): a node that stops in between leaves the attempt in the log
//! with its outcome not recorded, never a change without an entry.

use serde::Serialize;

use crate::clock::system_now_ms;
use crate::db::{SqlDb, StorageError};
use mmc_storage::sql_params;

use super::sessions::Session;

/// The audit log's words: (key, English, French), looked up by [`super::html::t`].
pub const WORDS: &[(&str, &str, &str)] = &[];

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
    /// `pending` (not recorded: the node stopped before the answer), `done`,
    /// `refused` or `unknown`.
    pub outcome: String,
}

/// How an audited action ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Done,
    Refused,
    /// No answer came (the request failed on its way): it may have been done.
    Unknown,
}

impl Outcome {
    fn as_str(self) -> &'static str {
        match self {
            Outcome::Done => "done",
            Outcome::Refused => "refused",
            Outcome::Unknown => "unknown",
        }
    }

    /// `done` for an accepted result, else `refused`.
    pub fn of<T, E>(result: &Result<T, E>) -> Outcome {
        if result.is_ok() {
            Outcome::Done
        } else {
            Outcome::Refused
        }
    }
}

/// An entry written before its action, to be finished with its outcome.
#[must_use = "an audited action's entry is finished with its outcome"]
pub struct Pending {
    id: i64,
    merchant_id: String,
    action: String,
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

const INSERT: &str = "INSERT INTO console_audit (merchant_id, environment, user_id, email, action, subject, detail, client, at_ms, outcome)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) RETURNING id";

#[derive(Clone)]
pub struct AuditLog {
    db: SqlDb,
}

impl AuditLog {
    pub fn new(db: SqlDb) -> AuditLog {
        AuditLog { db }
    }

    /// An entry for what has already happened (a sign-in, a sign-out).
    pub fn record(
        &self,
        s: &Session,
        action: &str,
        subject: Option<&str>,
        detail: Option<&str>,
        client: Option<&str>,
    ) -> Result<(), StorageError> {
        self.insert(s, action, (subject, detail), client, "done")
            .map(|_| ())
    }

    /// The entry of an action about to be done, `pending` until [`finish`](Self::finish).
    pub fn begin(
        &self,
        s: &Session,
        action: &str,
        subject: Option<&str>,
        detail: Option<&str>,
        client: Option<&str>,
    ) -> Result<Pending, StorageError> {
        let id = self.insert(s, action, (subject, detail), client, "pending")?;
        Ok(Pending {
            id,
            merchant_id: s.merchant_id.clone(),
            action: action.to_string(),
        })
    }

    fn insert(
        &self,
        s: &Session,
        action: &str,
        (subject, detail): (Option<&str>, Option<&str>),
        client: Option<&str>,
        outcome: &str,
    ) -> Result<i64, StorageError> {
        self.db.write(|tx| {
            tx.query_one(
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
                    system_now_ms() as i64,
                    outcome
                ],
            )?
            .int(0)
        })
    }

    /// Records how the action ended; `subject` and `detail`, when given,
    /// replace what [`begin`](Self::begin) wrote (what the answer told).
    pub fn finish(
        &self,
        entry: Pending,
        outcome: Outcome,
        subject: Option<&str>,
        detail: Option<&str>,
    ) -> Result<(), StorageError> {
        self.db.write(|tx| {
            tx.execute(
                "UPDATE console_audit SET outcome = ?2, subject = COALESCE(?3, subject), detail = COALESCE(?4, detail)
                 WHERE id = ?1",
                sql_params![entry.id, outcome.as_str(), subject, detail],
            )?;
            Ok(())
        })
    }

    /// Does the host-side change `change` as an audited action: its entry
    /// first, then the change, then how it ended (`told` draws the subject
    /// and the detail from an accepted result; a refusal keeps its reason).
    pub fn act<T, E: std::fmt::Display>(
        &self,
        s: &Session,
        (action, subject, client): (&str, Option<&str>, Option<&str>),
        change: impl FnOnce() -> Result<T, E>,
        told: impl FnOnce(&T) -> (Option<String>, Option<String>),
    ) -> Result<Result<T, E>, StorageError> {
        let entry = self.begin(s, action, subject, None, client)?;
        let result = change();
        let (subject, detail) = match &result {
            Ok(v) => told(v),
            Err(e) => (None, Some(e.to_string())),
        };
        let outcome = Outcome::of(&result);
        self.finish(entry, outcome, subject.as_deref(), detail.as_deref())?;
        Ok(result)
    }

    /// Done, unless the same change (action, subject, detail) is already
    /// done: the replay of an idempotent request (a double submit, a retry
    /// after a lost answer) is the same change, and its entry goes.
    pub fn finish_once(
        &self,
        entry: Pending,
        subject: &str,
        detail: &str,
    ) -> Result<(), StorageError> {
        self.db.write(|tx| {
            tx.lock(&format!("console_audit:{}", entry.merchant_id))?;
            let seen = tx.query_opt(
                "SELECT 1 FROM console_audit WHERE merchant_id = ?1 AND action = ?2 AND subject = ?3
                   AND detail = ?4 AND outcome = 'done' AND id <> ?5",
                sql_params![&entry.merchant_id, &entry.action, subject, detail, entry.id],
            )?;
            if seen.is_some() {
                tx.execute("DELETE FROM console_audit WHERE id = ?1", sql_params![entry.id])?;
            } else {
                tx.execute(
                    "UPDATE console_audit SET outcome = 'done', subject = ?2, detail = ?3 WHERE id = ?1",
                    sql_params![entry.id, subject, detail],
                )?;
            }
            Ok(())
        })
    }

    /// A merchant's entries, newest first, one page (and whether more follow).
    pub fn list(&self, merchant_id: &str, f: &Filter) -> Result<(Vec<Entry>, bool), StorageError> {
        let rows = self.db.read(|c| {
            c.query(
                "SELECT id, environment, user_id, email, action, subject, detail, client, at_ms, outcome FROM console_audit
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
                    outcome: r.text(9)?,
                })
            })
            .collect::<Result<Vec<_>, StorageError>>()?;
        let more = entries.len() > PAGE;
        entries.truncate(PAGE);
        Ok((entries, more))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::console::sessions::Sessions;
    use crate::console::users::{Role, Users};

    fn outcomes(log: &AuditLog, merchant: &str) -> Vec<(String, Option<String>, String)> {
        let (entries, _) = log.list(merchant, &Filter::default()).unwrap();
        entries
            .into_iter()
            .rev()
            .map(|e| (e.action, e.detail, e.outcome))
            .collect()
    }

    #[test]
    fn an_entry_is_written_before_its_action_and_a_replay_is_one_change() {
        let dir = tempfile::tempdir().unwrap();
        let (db, m) = crate::console::test_shop(&dir);
        let user = Users::new(db.clone())
            .invite(&m.id, "f@shop.bj", Role::Finance)
            .unwrap()
            .user;
        let sessions = Sessions::new(db.clone());
        let token = sessions.open(&user.id, true, None).unwrap();
        let s = sessions.find(&token).unwrap().unwrap();
        let log = AuditLog::new(db);

        // Written before the action: a node that stops here leaves the attempt.
        let refund = log
            .begin(&s, "payment.refund", Some("pay_1"), Some("amount 5"), None)
            .unwrap();
        let pending = (
            "payment.refund".to_string(),
            Some("amount 5".into()),
            "pending".into(),
        );
        assert_eq!(outcomes(&log, &m.id), vec![pending.clone()]);
        log.finish_once(refund, "pay_1", "refund re_1 amount 5")
            .unwrap();
        // The replay of the same request: the same refund, one entry.
        let replay = log
            .begin(&s, "payment.refund", Some("pay_1"), Some("amount 5"), None)
            .unwrap();
        log.finish_once(replay, "pay_1", "refund re_1 amount 5")
            .unwrap();
        let cancel = log
            .begin(&s, "payment.cancel", Some("pay_1"), None, None)
            .unwrap();
        log.finish(
            cancel,
            Outcome::Refused,
            None,
            Some("409 payment_not_cancellable"),
        )
        .unwrap();
        let act: Result<(), String> = log
            .act(
                &s,
                ("key.revoke", Some("key_1"), None),
                || Err("no such key".to_string()),
                |_| (None, None),
            )
            .unwrap();
        assert!(act.is_err());
        let stopped = log.begin(&s, "bulk.upload", None, Some("june.csv"), None);
        drop(stopped);
        assert_eq!(
            outcomes(&log, &m.id),
            vec![
                (
                    "payment.refund".to_string(),
                    Some("refund re_1 amount 5".into()),
                    "done".into()
                ),
                (
                    "payment.cancel".to_string(),
                    Some("409 payment_not_cancellable".into()),
                    "refused".into()
                ),
                (
                    "key.revoke".to_string(),
                    Some("no such key".into()),
                    "refused".into()
                ),
                (
                    "bulk.upload".to_string(),
                    Some("june.csv".into()),
                    "pending".into()
                ),
            ]
        );
    }
}
