//! Acme's wire formats ⇄ adapter types. Only an explicit `SUCCESSFUL`
//! or `FAILED` is final; anything else is pending.

use serde::{Deserialize, Serialize};

use mmc_adapter_kit::reasons::{OUR_WORDS, Reasons};
use mmc_adapter_kit::types::{Failure, PspStatus, Settled};

/// `POST /v1/collections`: a request to pay, created under our id.
#[derive(Serialize)]
pub struct CreateCollection {
    /// Our payment id: Acme refuses a second collection under it.
    pub reference: String,
    /// A string of digits, in major units.
    pub amount: String,
    pub currency: String,
    /// The customer's number, digits only (`22901…`).
    pub msisdn: String,
    /// Where Acme posts the collection once it is final.
    pub callback_url: String,
}

/// A collection as Acme reports it (answers and callbacks' `data`).
#[derive(Deserialize)]
pub struct Collection {
    pub id: String,
    pub reference: String,
    /// `PENDING`, `SUCCESSFUL`, `FAILED`.
    pub status: String,
    /// What was asked (and, successful, taken), as Acme states it.
    pub amount: String,
    pub currency: String,
    #[serde(default)]
    pub msisdn: Option<String>,
    /// `FAILED` only: why (`PAYER_DECLINED`, `INSUFFICIENT_FUNDS`, `EXPIRED`).
    #[serde(default)]
    pub failure_reason: Option<String>,
}

/// `GET /v1/collections?reference=`: the collections under one of our ids.
#[derive(Deserialize)]
pub struct List {
    pub data: Vec<Collection>,
}

/// A callback: `{event, data}`, signed (`X-Signature`).
#[derive(Deserialize)]
pub struct Event {
    pub event: String,
    pub data: Collection,
}

/// Acme's error body: `{code, message}`.
#[derive(Deserialize)]
pub struct ApiError {
    #[serde(default)]
    pub code: Option<String>,
    #[serde(default)]
    pub message: Option<String>,
}

pub fn status(c: &Collection) -> PspStatus {
    match c.status.as_str() {
        "SUCCESSFUL" => PspStatus::Completed(Settled {
            amount: c.amount.clone(),
            currency: c.currency.clone(),
            party: c.msisdn.clone(),
        }),
        "FAILED" => PspStatus::Failed(failure_for(c.failure_reason.as_deref())),
        _ => PspStatus::Pending,
    }
}

/// Acme's reasons in the service's failure codes, worded in ours (Acme
/// gives no message); a reason not listed is `operator_error` with Acme's.
pub const REASONS: Reasons = Reasons {
    provider: "Acme",
    codes: Reasons::table(
        "
        declined_by_customer: PAYER_DECLINED
        insufficient_funds:   INSUFFICIENT_FUNDS
        approval_expired:     EXPIRED
        ",
    ),
    words: OUR_WORDS,
};

pub fn failure_for(reason: Option<&str>) -> Failure {
    REASONS.failure(reason, None)
}

/// A 4xx answer as a refusal: Acme's `code` and `message`.
pub fn refusal(status: u16, body: &[u8]) -> Failure {
    mmc_adapter_kit::exchange::coded_refusal("Acme", status, body)
}
