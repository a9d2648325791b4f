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

use std::fmt::Write;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde::Serialize;

use crate::clock::system_now_ms;
use crate::db::{SqlDb, StorageError};
use mmc_storage::sql::SqlConn;
use mmc_storage::sql_params;

use super::format::{self, Zone};
use super::html::{self, Lang, esc, t};
use super::sessions::Session;
use super::web::{self, ConsoleError, Req};
use super::{Console, blocking};

/// The audit log's words: (key, English, French), looked up by [`super::html::t`].
/// An action's name is `audit.` and the action.
pub const WORDS: &[(&str, &str, &str)] = &[
    ("ad_password", "with a password", "avec un mot de passe"),
    (
        "ad_second_factor",
        "with a password and a second factor",
        "avec un mot de passe et un second facteur",
    ),
    (
        "ad_first_invitation",
        "first password, from an invitation",
        "premier mot de passe, par une invitation",
    ),
    (
        "ad_first_reset",
        "first password after a reset",
        "premier mot de passe après une réinitialisation",
    ),
    ("ad_wrong_password", "wrong password", "mot de passe erroné"),
    (
        "ad_replaced",
        "replaced: a new one to confirm",
        "remplacé : un nouveau à confirmer",
    ),
    (
        "ad_wrong_code",
        "wrong second-factor code",
        "code de second facteur erroné",
    ),
    ("audit.payment.refund", "Refund", "Remboursement"),
    (
        "audit.payment.cancel",
        "Cancel a payment",
        "Annulation d'un paiement",
    ),
    (
        "audit.event.resend",
        "Resend an event",
        "Renvoi d'un événement",
    ),
    ("audit.link.create", "Payment link", "Lien de paiement"),
    ("audit.bulk.upload", "Batch upload", "Import d'un lot"),
    (
        "audit.bulk.approve",
        "Batch approval",
        "Approbation d'un lot",
    ),
    ("audit.bulk.reject", "Batch rejection", "Rejet d'un lot"),
    ("audit.key.create", "API key created", "Clé d'API créée"),
    ("audit.key.shown", "API key shown", "Clé d'API affichée"),
    ("audit.key.revoke", "API key revoked", "Clé d'API révoquée"),
    (
        "audit.endpoint.add",
        "Webhook endpoint added",
        "Adresse de webhook ajoutée",
    ),
    (
        "audit.endpoint.disable",
        "Webhook endpoint paused",
        "Adresse de webhook suspendue",
    ),
    (
        "audit.endpoint.enable",
        "Webhook endpoint resumed",
        "Adresse de webhook réactivée",
    ),
    (
        "audit.endpoint.rotate_secret",
        "Webhook secret renewed",
        "Secret de webhook renouvelé",
    ),
    (
        "audit.reconciliation.run",
        "Reconciliation run",
        "Rapprochement lancé",
    ),
    (
        "audit.reconciliation.case.resolve",
        "Reconciliation case resolved",
        "Écart de rapprochement résolu",
    ),
    ("audit.session.sign_in", "Sign-in", "Connexion"),
    ("audit.session.sign_out", "Sign-out", "Déconnexion"),
    (
        "audit.session.end",
        "Session ended by an owner",
        "Session fermée par un propriétaire",
    ),
    ("audit.user.invite", "Invitation", "Invitation"),
    (
        "audit.user.invite_accepted",
        "Invitation accepted",
        "Invitation acceptée",
    ),
    ("audit.user.reset", "Access reset", "Accès réinitialisé"),
    (
        "audit.user.reset_accepted",
        "New password after a reset",
        "Nouveau mot de passe après réinitialisation",
    ),
    ("audit.user.remove", "Member removed", "Membre retiré"),
    (
        "audit.user.password_changed",
        "Password changed",
        "Mot de passe modifié",
    ),
    (
        "audit.user.totp_enabled",
        "Second factor enabled",
        "Second facteur activé",
    ),
    (
        "audit.user.totp_disabled",
        "Second factor disabled",
        "Second facteur désactivé",
    ),
    ("audit_everyone", "Everyone", "Tout le monde"),
    ("audit_any_action", "Any action", "Toute action"),
    ("audit_any_outcome", "Any outcome", "Toute issue"),
    (
        "audit_not_known",
        "not known (no answer, or not recorded)",
        "inconnue (sans réponse ou non enregistrée)",
    ),
    (
        "audit_none",
        "No entry matches these filters.",
        "Aucune entrée ne correspond à ces filtres.",
    ),
];

/// The actions the log's page offers as a filter, in the order it lists them.
pub const ACTIONS: &[&str] = &[
    "payment.refund",
    "payment.cancel",
    "event.resend",
    "link.create",
    "bulk.upload",
    "bulk.approve",
    "bulk.reject",
    "key.create",
    "key.shown",
    "key.revoke",
    "endpoint.add",
    "endpoint.disable",
    "endpoint.enable",
    "endpoint.rotate_secret",
    "reconciliation.run",
    "reconciliation.case.resolve",
    "session.sign_in",
    "session.sign_out",
    "session.end",
    "user.invite",
    "user.invite_accepted",
    "user.reset",
    "user.reset_accepted",
    "user.remove",
    "user.password_changed",
    "user.totp_enabled",
    "user.totp_disabled",
];

/// An action in the reader's words (its own name when this build has none).
pub fn action_words(l: Lang, action: &str) -> String {
    match t(l, &format!("audit.{action}")) {
        "?" => action.to_string(),
        words => words.to_string(),
    }
}

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
        let email = email.trim().to_lowercase();
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
                    &f.email.as_ref().map(|e| e.trim().to_lowercase()),
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

type Resp = Response<Full<Bytes>>;

/// `GET /console/audit` (owners): newest first, filtered by person,
/// action, outcome and period, paged by `before`.
pub fn page(c: &Console, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    if !s.role.manages_users() {
        return Err(ConsoleError::Forbidden("owner".into()));
    }
    let l = req.lang;
    let day = |v: Option<String>, shift: u64| -> Result<Option<u64>, ConsoleError> {
        v.map(|d| {
            super::payments::date_secs(&d)
                .map(|secs| (secs + shift) * 1000)
                .ok_or_else(|| {
                    ConsoleError::Refused(400, super::payments::plain(l, "bad_date", &["date", &d]))
                })
        })
        .transpose()
    };
    let filter = Filter {
        action: req.param("action"),
        email: req.param("email"),
        outcome: req.param("outcome"),
        since_ms: day(req.param("from"), 0)?,
        until_ms: day(req.param("to"), 86_400)?,
        before_id: req.param("before").and_then(|b| b.parse().ok()),
    };
    let people = blocking(|| c.users.list(&s.merchant_id)).map_err(super::auth::user_error)?;
    let emails: Vec<&str> = people.iter().map(|u| u.email.as_str()).collect();
    let (entries, more) = blocking(|| c.audit.list(&s.merchant_id, &filter))?;
    let mut body = filters(l, req, &emails);
    if entries.is_empty() {
        let _ = write!(body, "<p>{}</p>", t(l, "audit_none"));
    } else {
        body.push_str(&table(l, &entries, s.zone));
    }
    if more && let Some(last) = entries.last() {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        for name in ["email", "action", "outcome", "from", "to"] {
            if let Some(v) = req.param(name) {
                q.append_pair(name, &v);
            }
        }
        q.append_pair("before", &last.id.to_string());
        let _ = write!(
            body,
            "<p><a rel=\"next\" href=\"/console/audit?{}\">{} →</a></p>",
            esc(&q.finish()),
            t(l, "older")
        );
    }
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "audit"), &body),
    ))
}

/// A `<select>` of `name`: "any" first, then each (value, words), the
/// query's value chosen.
fn choice(req: &Req, name: &str, any: &str, options: &[(&str, String)]) -> String {
    let current = req.param(name).unwrap_or_default();
    let mut out = format!(
        "<select name=\"{name}\"><option value=\"\">{}</option>",
        esc(any)
    );
    for (value, words) in options {
        let _ = write!(
            out,
            "<option value=\"{}\"{}>{}</option>",
            esc(value),
            if *value == current { " selected" } else { "" },
            esc(words)
        );
    }
    out.push_str("</select>");
    out
}

/// The log's filters, as the query has them: the team's people, the
/// actions, the outcomes and a period.
fn filters(l: Lang, req: &Req, emails: &[&str]) -> String {
    let people: Vec<(&str, String)> = emails.iter().map(|e| (*e, e.to_string())).collect();
    let actions: Vec<(&str, String)> = ACTIONS.iter().map(|a| (*a, action_words(l, a))).collect();
    let outcomes = [
        ("done", t(l, "outcome_done").to_string()),
        ("refused", t(l, "outcome_refused").to_string()),
        ("unknown", t(l, "audit_not_known").to_string()),
    ];
    let date = |name: &str| esc(req.param(name).as_deref().unwrap_or_default());
    format!(
        "<form method=\"get\" action=\"/console/audit\"><fieldset>\
         <label>{w}{people}</label><label>{a}{actions}</label><label>{o}{outcomes}</label>\
         <label>{f}<input name=\"from\" type=\"date\" value=\"{fv}\"></label>\
         <label>{to}<input name=\"to\" type=\"date\" value=\"{tv}\"></label>\
         <button>{filter}</button></fieldset></form>",
        w = t(l, "who"),
        people = choice(req, "email", t(l, "audit_everyone"), &people),
        a = t(l, "action"),
        actions = choice(req, "action", t(l, "audit_any_action"), &actions),
        o = t(l, "outcome"),
        outcomes = choice(req, "outcome", t(l, "audit_any_outcome"), &outcomes),
        f = t(l, "from"),
        fv = date("from"),
        to = t(l, "to"),
        tv = date("to"),
        filter = t(l, "filter"),
    )
}

/// The entries as a table: what each was about names its payment by the
/// merchant's reference and amount, linked to the payment's page.
fn table(l: Lang, entries: &[Entry], zone: Zone) -> String {
    let mut out = format!(
        "<table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "when"),
        t(l, "who"),
        t(l, "what"),
        t(l, "outcome"),
        t(l, "environment"),
        t(l, "where")
    );
    for e in entries {
        let outcome = match e.outcome.as_str() {
            "done" => t(l, "outcome_done"),
            "refused" => t(l, "outcome_refused"),
            "unknown" => t(l, "outcome_unknown"),
            _ => t(l, "outcome_pending"),
        };
        let mut about = about(l, e);
        // The detail as written: the API's status and code, ids and amounts,
        // in words where it is one of the console's own phrases.
        about.extend(e.detail.as_deref().map(|d| match detail_words(l, d) {
            Some(words) => esc(words),
            None => format!("<code>{}</code>", esc(d)),
        }));
        let about = if about.is_empty() {
            String::new()
        } else {
            format!("<br>{}", about.join(" · "))
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{} <strong>{}</strong>{about}</td><td>{outcome}</td><td>{}</td><td>{}</td></tr>",
            zone.when(e.at_ms),
            esc(&e.email),
            esc(&action_words(l, &e.action)),
            esc(&e.action),
            esc(&e.environment),
            esc(e.client.as_deref().unwrap_or_default()),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// The console's own phrases in an entry's detail, in the reader's language.
fn detail_words(l: Lang, detail: &str) -> Option<&'static str> {
    let key = match detail {
        "with a password" => "ad_password",
        "with a second factor" => "ad_second_factor",
        "replaced: a new one to confirm" => "ad_replaced",
        "first password of an invitation" => "ad_first_invitation",
        "first password after a reset" => "ad_first_reset",
        "wrong password" => "ad_wrong_password",
        "wrong second-factor code" => "ad_wrong_code",
        _ => return None,
    };
    Some(t(l, key))
}

/// What an entry was about, as HTML: its payment (the reference, linked,
/// and the amount), else its subject's id.
fn about(l: Lang, e: &Entry) -> Vec<String> {
    let id = e.subject.as_deref().unwrap_or_default();
    let Some(p) = &e.payment else {
        return (!id.is_empty()).then(|| esc(id)).into_iter().collect();
    };
    let name = esc(p.reference.as_deref().unwrap_or(id));
    let mut out = vec![if id.is_empty() {
        name
    } else {
        format!("<a href=\"/console/payments/{}\">{name}</a>", esc(id))
    }];
    if let (Some(a), Some(cur)) = (p.amount, &p.currency) {
        out.push(esc(&format::money(l, a, cur)));
    }
    out
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

    #[test]
    fn refusals_sign_ins_and_payments_are_kept_and_the_list_narrows_to_what_is_asked() {
        let dir = tempfile::tempdir().unwrap();
        let (db, m) = crate::console::test_shop(&dir);
        let users = Users::new(db.clone());
        let agent = users
            .invite(&m.id, "agent@shop.bj", Role::Support)
            .unwrap()
            .user;
        let owner = users
            .invite(&m.id, "owner@shop.bj", Role::Owner)
            .unwrap()
            .user;
        let sessions = Sessions::new(db.clone());
        let session = |id: &str| {
            let token = sessions.open(id, false, None).unwrap();
            sessions.find(&token).unwrap().unwrap()
        };
        let (a, o) = (session(&agent.id), session(&owner.id));
        let log = AuditLog::new(db);

        let payment = Payment {
            reference: Some("order-42".into()),
            amount: Some(15_000),
            currency: Some("XOF".into()),
        };
        log.refused(
            &a,
            ("payment.refund", Some("pay_1"), Some(&payment)),
            "403 insufficient_scope",
            Some("10.0.0.1"),
        )
        .unwrap();
        log.sign_in_refused(" Agent@Shop.bj ", false, None).unwrap();
        log.sign_in_refused("nobody@shop.bj", false, None).unwrap();
        // An owner's reset, then the link it gave: the reset's first password.
        log.record(&o, "user.reset", Some(&agent.id), None, None)
            .unwrap();
        log.link_accepted(&a, None).unwrap();
        log.link_accepted(&o, None).unwrap();
        let lost = log
            .begin(&o, "payment.cancel", Some("pay_2"), None, None)
            .unwrap();
        drop(lost);

        let list = |f: Filter| {
            let (entries, _) = log.list(&m.id, &f).unwrap();
            entries
                .into_iter()
                .rev()
                .map(|e| (e.email, e.action, e.outcome, e.detail))
                .collect::<Vec<_>>()
        };
        let entry = |who: &str, action: &str, outcome: &str, detail: Option<&str>| {
            (
                who.to_string(),
                action.to_string(),
                outcome.to_string(),
                detail.map(str::to_string),
            )
        };
        let refund = entry(
            "agent@shop.bj",
            "payment.refund",
            "refused",
            Some("403 insufficient_scope"),
        );
        let refused_sign_in = entry(
            "agent@shop.bj",
            "session.sign_in",
            "refused",
            Some("wrong password"),
        );
        assert_eq!(
            list(Filter {
                outcome: Some("refused".into()),
                ..Filter::default()
            }),
            vec![refund.clone(), refused_sign_in.clone()],
            "an address nobody has is in no merchant's log"
        );
        assert_eq!(
            list(Filter {
                email: Some("agent@shop.bj".into()),
                ..Filter::default()
            }),
            vec![
                refund,
                refused_sign_in,
                entry("agent@shop.bj", "user.reset_accepted", "done", None),
                entry(
                    "agent@shop.bj",
                    "session.sign_in",
                    "done",
                    Some("first password after a reset")
                ),
            ]
        );
        assert_eq!(
            list(Filter {
                action: Some("session.sign_in".into()),
                email: Some("owner@shop.bj".into()),
                ..Filter::default()
            }),
            vec![entry(
                "owner@shop.bj",
                "session.sign_in",
                "done",
                Some("first password of an invitation")
            )]
        );
        // Not known: no answer, or the node stopped before it.
        assert_eq!(
            list(Filter {
                outcome: Some("unknown".into()),
                ..Filter::default()
            }),
            vec![entry("owner@shop.bj", "payment.cancel", "pending", None)]
        );
        let (entries, _) = log
            .list(
                &m.id,
                &Filter {
                    action: Some("payment.refund".into()),
                    ..Filter::default()
                },
            )
            .unwrap();
        assert_eq!(entries[0].payment.as_ref(), Some(&payment));
        assert_eq!(entries[0].client.as_deref(), Some("10.0.0.1"));
        let page = table(Lang::En, &entries, Zone::Utc);
        assert!(
            page.contains("<a href=\"/console/payments/pay_1\">order-42</a> · 15,000 XOF · <code>403 insufficient_scope</code>")
                && page.contains("Refund <strong>payment.refund</strong>"),
            "{page}"
        );
    }

    #[test]
    fn every_action_offered_has_words_in_both_languages() {
        for action in ACTIONS {
            for l in [Lang::En, Lang::Fr] {
                assert_ne!(action_words(l, action), *action, "{action} in {l:?}");
            }
        }
        let mut keys: Vec<&str> = WORDS.iter().map(|(k, _, _)| *k).collect();
        keys.sort_unstable();
        let n = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), n, "a word listed twice");
    }
}
