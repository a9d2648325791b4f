//! The console's audit log: every attempt to change something, allowed or
//! refused, and every sign-in and sign-out, with who did it, when, from
//! which address, what it was about (a payment by its merchant reference and
//! amount) and how it ended. Owners read and filter it.
//!
//! An action's entry is written before the action ([`AuditLog::begin`],
//! outcome `pending`) and finished once its outcome is known (`done` or
//! `refused`): a node that stops in between leaves the attempt in the log
//! with its outcome not recorded, never a change without an entry. An
//! attempt refused before anything was asked is written once, refused
//! ([`AuditLog::refused`]).

use serde::Serialize;

use mmc_common::clock::system_now_ms;
use mmc_db::{SqlDb, StorageError};
use mmc_storage::sql::SqlConn;
use mmc_storage::sql_params;

use super::sessions::Session;

mod table;
#[cfg(test)]
mod tests;
mod words;

pub use table::table;
pub use words::{ACTIONS, WORDS, action_words};

#[derive(Debug, Clone, Serialize)]
pub struct Entry {
    pub id: i64,
    pub environment: String,
    pub user_id: String,
    pub email: String,
    pub action: String,
    pub subject: Option<String>,
    /// The payment the action was about, when it was about one.
    pub payment: Option<Payment>,
    pub detail: Option<String>,
    pub client: Option<String>,
    pub at_ms: u64,
    /// `pending` (not recorded: the node stopped before the answer), `done`,
    /// `refused` or `unknown`.
    pub outcome: String,
}

/// The payment an entry is about, as it was when the entry was written:
/// what a reader knows it by.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Payment {
    /// The merchant's reference.
    pub reference: Option<String>,
    pub amount: Option<i64>,
    pub currency: Option<String>,
}

impl Payment {
    /// From the API's payment object; none when it names no payment.
    pub fn of(v: &serde_json::Value) -> Option<Payment> {
        let p = Payment {
            reference: v["reference"].as_str().map(str::to_string),
            amount: v["amount"].as_i64(),
            currency: v["currency"].as_str().map(str::to_string),
        };
        p.into_some()
    }

    fn into_some(self) -> Option<Payment> {
        (self != Payment::default()).then_some(self)
    }
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
    /// `done`, `refused`, or `unknown` (no answer, or not recorded).
    pub outcome: Option<String>,
    pub since_ms: Option<u64>,
    pub until_ms: Option<u64>,
    pub before_id: Option<i64>,
}

pub const PAGE: usize = 50;

/// What an entry is about: the action, its subject (an id) and the payment
/// it concerns.
pub type About<'a> = (&'a str, Option<&'a str>, Option<&'a Payment>);

/// Who acted, as an entry names them.
struct Actor<'a> {
    merchant_id: &'a str,
    environment: &'a str,
    user_id: &'a str,
    email: &'a str,
}

impl<'a> From<&'a Session> for Actor<'a> {
    fn from(s: &'a Session) -> Actor<'a> {
        Actor {
            merchant_id: &s.merchant_id,
            environment: s.environment.as_str(),
            user_id: &s.user_id,
            email: &s.email,
        }
    }
}

/// Writes one entry in `tx`; its id.
fn insert(
    tx: &mut dyn SqlConn,
    who: &Actor,
    (action, subject, payment): About,
    (detail, client): (Option<&str>, Option<&str>),
    outcome: &str,
) -> Result<i64, StorageError> {
    let p = payment.cloned().unwrap_or_default();
    tx.query_one(
        "INSERT INTO console_audit (merchant_id, environment, user_id, email, action, subject, detail, client, at_ms, outcome,
                                    reference, amount, currency)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13) RETURNING id",
        sql_params![
            who.merchant_id,
            who.environment,
            who.user_id,
            who.email,
            action,
            subject,
            detail,
            client,
            system_now_ms() as i64,
            outcome,
            p.reference,
            p.amount,
            p.currency
        ],
    )?
    .int(0)
}

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
        self.db
            .write(|tx| {
                insert(
                    tx,
                    &s.into(),
                    (action, subject, None),
                    (detail, client),
                    "done",
                )
            })
            .map(|_| ())
    }

    /// An attempt refused before anything was asked (the role may not, a
    /// check of the console's own), with why: `detail` says it as the API
    /// would (`403 insufficient_scope`).
    pub fn refused(
        &self,
        s: &Session,
        about: About,
        detail: &str,
        client: Option<&str>,
    ) -> Result<(), StorageError> {
        self.db
            .write(|tx| insert(tx, &s.into(), about, (Some(detail), client), "refused"))
            .map(|_| ())
    }

    /// A sign-in, with a second factor or a password alone.
    pub fn signed_in(
        &self,
        s: &Session,
        mfa: bool,
        client: Option<&str>,
    ) -> Result<(), StorageError> {
        let how = if mfa {
            "with a second factor"
        } else {
            "with a password"
        };
        self.record(s, "session.sign_in", None, Some(how), client)
    }

    /// The person's second factor is off until the new one they are
    /// shown is confirmed.
    pub fn factor_replaced(&self, s: &Session, client: Option<&str>) -> Result<(), StorageError> {
        let why = Some("replaced: a new one to confirm");
        self.record(s, "user.totp_disabled", Some(&s.user_id), why, client)
    }

    /// A new key's secret, shown to the person who made it.
    pub fn key_shown(
        &self,
        s: &Session,
        key_id: &str,
        client: Option<&str>,
    ) -> Result<(), StorageError> {
        self.record(s, "key.shown", Some(key_id), None, client)
    }

    /// A sign-in refused after its password was checked (a wrong password,
    /// or a wrong second-factor code after a right one; never what was
    /// typed), in the log of the merchant whose person `email` names. An
    /// address nobody has belongs to no merchant's log. The sign-in
    /// throttle bounds how many such attempts there can be, and so these
    /// entries.
    pub fn sign_in_refused(
        &self,
        email: &str,
        password_right: bool,
        client: Option<&str>,
    ) -> Result<(), StorageError> {
        let why = if password_right {
            "wrong second-factor code"
        } else {
            "wrong password"
        };
        let email = crate::users::lookup_email(email);
        self.db.write(|tx| {
            let Some(r) = tx.query_opt(
                "SELECT merchant_id, id, email FROM console_users WHERE email = ?1 AND removed_ms IS NULL",
                sql_params![&email],
            )?
            else {
                return Ok(());
            };
            let (merchant_id, user_id, email) = (r.text(0)?, r.text(1)?, r.text(2)?);
            let who = Actor {
                merchant_id: &merchant_id,
                // Not signed in: no environment yet.
                environment: "",
                user_id: &user_id,
                email: &email,
            };
            let about = ("session.sign_in", None, None);
            insert(tx, &who, about, (Some(why), client), "refused").map(|_| ())
        })
    }

    /// The first password chosen through a one-time link, and the sign-in
    /// it opened: the link was an invitation's, or a reset's when the last
    /// link the log gave this person was one.
    pub fn link_accepted(&self, s: &Session, client: Option<&str>) -> Result<(), StorageError> {
        self.db.write(|tx| {
            let last = tx.query_opt(
                "SELECT action FROM console_audit WHERE merchant_id = ?1 AND subject = ?2
                   AND action IN ('user.invite', 'user.reset') AND outcome = 'done'
                 ORDER BY id DESC LIMIT 1",
                sql_params![&s.merchant_id, &s.user_id],
            )?;
            let reset = match last {
                Some(r) => r.text(0)? == "user.reset",
                None => false,
            };
            let (accepted, how) = if reset {
                ("user.reset_accepted", "first password after a reset")
            } else {
                ("user.invite_accepted", "first password of an invitation")
            };
            let who = Actor::from(s);
            let subject = Some(s.user_id.as_str());
            insert(tx, &who, (accepted, subject, None), (None, client), "done")?;
            let signed_in = ("session.sign_in", None, None);
            insert(tx, &who, signed_in, (Some(how), client), "done").map(|_| ())
        })
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
        self.begin_about(s, (action, subject, None), detail, client)
    }

    /// [`begin`](Self::begin) of an action about a payment.
    pub fn begin_about(
        &self,
        s: &Session,
        about: About,
        detail: Option<&str>,
        client: Option<&str>,
    ) -> Result<Pending, StorageError> {
        let id = self
            .db
            .write(|tx| insert(tx, &s.into(), about, (detail, client), "pending"))?;
        Ok(Pending {
            id,
            merchant_id: s.merchant_id.clone(),
            action: about.0.to_string(),
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

    /// A merchant's entries, newest first, one page (and whether more
    /// follow): one query, the payment each is about with it.
    pub fn list(&self, merchant_id: &str, f: &Filter) -> Result<(Vec<Entry>, bool), StorageError> {
        let rows = self.db.read(|c| {
            c.query(
                "SELECT id, environment, user_id, email, action, subject, detail, client, at_ms, outcome,
                        reference, amount, currency
                 FROM console_audit
                 WHERE merchant_id = ?1
                   AND (CAST(?2 AS TEXT) IS NULL OR action = ?2)
                   AND (CAST(?3 AS TEXT) IS NULL OR email = ?3)
                   AND (CAST(?8 AS TEXT) IS NULL OR outcome = ?8
                        OR (CAST(?8 AS TEXT) = 'unknown' AND outcome = 'pending'))
                   AND at_ms >= ?4 AND at_ms < ?5 AND id < ?6
                 ORDER BY id DESC LIMIT ?7",
                sql_params![
                    merchant_id,
                    &f.action,
                    &f.email.as_deref().map(crate::users::lookup_email),
                    f.since_ms.unwrap_or(0) as i64,
                    f.until_ms.map(|u| u as i64).unwrap_or(i64::MAX),
                    f.before_id.unwrap_or(i64::MAX),
                    PAGE as i64 + 1,
                    &f.outcome
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
                    payment: Payment {
                        reference: r.opt_text(10)?,
                        amount: r.opt_int(11)?,
                        currency: r.opt_text(12)?,
                    }
                    .into_some(),
                })
            })
            .collect::<Result<Vec<_>, StorageError>>()?;
        let more = entries.len() > PAGE;
        entries.truncate(PAGE);
        Ok((entries, more))
    }
}
