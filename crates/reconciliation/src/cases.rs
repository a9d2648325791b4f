//! Cases: every difference the books find, in front of a person until it is
//! settled. A case opens when a run finds a mismatch, is resolved by a
//! person with a note, or closes by itself when a later run matches it.
//! One case per account and subject (our record, or the provider's movement
//! we have no record of), so running a day again opens nothing new.

use serde::{Deserialize, Serialize};
use serde_json::json;
use sha2::{Digest, Sha256};

use mmc_books::{Category, Line, Ours};

use mmc_db::{OutboxEvent, StorageError, Transaction};
use mmc_storage::Write;

pub(super) const NS: &str = "books";
const CASES: &str = "cases";
/// `{status}/{id}`: the cases of one status, for lists.
const BY_STATUS: &str = "cases_by_status";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CaseStatus {
    Open,
    /// Settled by a person, with a note.
    Resolved,
    /// A later run found both books agreeing.
    Closed,
}

impl CaseStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CaseStatus::Open => "open",
            CaseStatus::Resolved => "resolved",
            CaseStatus::Closed => "closed",
        }
    }

    pub fn parse(s: &str) -> Option<CaseStatus> {
        [CaseStatus::Open, CaseStatus::Resolved, CaseStatus::Closed]
            .into_iter()
            .find(|c| c.as_str() == s)
    }
}

/// How a case ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    /// The person (console user id or `admin`), or `reconciliation` for a
    /// run that matched it.
    pub by: String,
    pub note: String,
    pub at: String,
}

/// What the books found of one subject on one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Judged {
    /// Our id, or `provider:<the provider's id>` for money we have no record of.
    pub subject: String,
    pub category: Category,
    pub ours: Option<Ours>,
    pub theirs: Vec<Line>,
    /// What the rate card says the provider's fee should be.
    pub expected_fee: Option<u64>,
    /// What else the run learnt (a record read back by status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Our record as it stood before this run set it right: the provider
    /// said it moved, its owner asked the provider again by our id and
    /// recorded the answer (a late success).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub set_right_from: Option<Ours>,
    /// The run that wrote it (a later run's sweep drops the lines of earlier
    /// ones it no longer found).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Case {
    pub id: String,
    pub object: String,
    pub account: String,
    pub subject: String,
    pub category: Category,
    pub status: CaseStatus,
    pub merchant_id: Option<String>,
    pub environment: Option<String>,
    /// The day whose run found it first, and the latest that still did.
    pub date: String,
    pub last_seen: String,
    pub opened_at: String,
    pub updated_at: String,
    pub ours: Option<Ours>,
    pub theirs: Vec<Line>,
    pub expected_fee: Option<u64>,
    pub resolution: Option<Resolution>,
    /// A `balance_drift` case's wallet day: opening, closing, net, drift.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wallet: Option<mmc_books::wallet::WalletDay>,
}

/// A case's id: the same for the same account and subject, whichever run
/// finds it.
pub fn case_id(account: &str, subject: &str) -> String {
    let digest = Sha256::digest(format!("{account}/{subject}").as_bytes());
    format!("case_{}", &hex::encode(digest)[..24])
}

pub(super) fn read(tx: &mut dyn Transaction, id: &str) -> Result<Option<Case>, StorageError> {
    tx.get(CASES, id)?.map(|v| decode(id, &v)).transpose()
}

/// A stored case.
pub(super) fn decode(id: &str, stored: &[u8]) -> Result<Case, StorageError> {
    serde_json::from_slice(stored).map_err(|e| StorageError::Invalid(format!("case {id}: {e}")))
}

/// The writes that store `case` (`was`: its status before, if it existed).
pub(super) fn writes(case: &Case, was: Option<CaseStatus>) -> Vec<Write> {
    let mut out = Vec::with_capacity(3);
    if let Some(was) = was.filter(|w| *w != case.status) {
        out.push(Write::Delete {
            table: BY_STATUS.into(),
            key: format!("{}/{}", was.as_str(), case.id),
        });
    }
    out.push(Write::Put {
        table: BY_STATUS.into(),
        key: format!("{}/{}", case.status.as_str(), case.id),
        value: Vec::new(),
    });
    out.push(Write::Put {
        table: CASES.into(),
        key: case.id.clone(),
        value: serde_json::to_vec(case).expect("cases serialise"),
    });
    out
}

/// Applies `writes` in `tx`.
pub(super) fn write_in(tx: &mut dyn Transaction, writes: &[Write]) -> Result<(), StorageError> {
    for w in writes {
        match w {
            Write::Put { table, key, value } => tx.put(table, key, value)?,
            Write::Delete { table, key } => tx.delete(table, key)?,
            Write::Emit(event) => tx.emit(event)?,
        }
    }
    Ok(())
}

/// `reconciliation.case.opened` or `.resolved`, to the merchant whose
/// record it is (a case about money we have no record of has no merchant
/// to tell: it is shown to the people who run the service).
pub(super) fn event(case: &Case, now_s: u64) -> Option<Write> {
    let merchant = case.merchant_id.clone()?;
    let event_type = match case.status {
        CaseStatus::Open => "reconciliation.case.opened",
        _ => "reconciliation.case.resolved",
    };
    let id = format!("evt_{}", uuid::Uuid::new_v4().simple());
    let environment = case.environment.clone().unwrap_or_else(|| "live".into());
    let body = json!({
        "id": id,
        "object": "event",
        "type": event_type,
        "created": now_s,
        "environment": environment,
        "merchant_id": merchant,
        "data": {"object": case},
    });
    Some(Write::Emit(OutboxEvent {
        id,
        event_type: event_type.into(),
        merchant_id: merchant,
        environment,
        subject_id: case.id.clone(),
        extra_url: None,
        payload: serde_json::to_vec(&body).expect("JSON values serialise"),
    }))
}

pub(super) fn list_key_range(status: CaseStatus) -> (String, String) {
    (
        format!("{}/", status.as_str()),
        format!("{}/~", status.as_str()),
    )
}

pub(super) const TABLE: &str = CASES;
pub(super) const STATUS_TABLE: &str = BY_STATUS;
