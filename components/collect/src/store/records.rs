//! The records this component stores besides payments: refunds and the
//! Idempotency-Key records of creates and refunds.

use mmc_domain::record::Failure;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A refund request's Idempotency-Key (table `refund_idem`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefundIdem {
    pub request_hash: String,
    pub refund_id: String,
    pub created_ms: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundStatus {
    Pending,
    Completed,
    Failed,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Refund {
    pub id: String,
    pub payment_id: String,
    pub merchant_id: String,
    pub environment: String,
    pub reference: String,
    pub status: RefundStatus,
    pub amount: u64,
    pub currency: String,
    pub reason: String,
    pub metadata: Option<Value>,
    pub psp_reference: Option<String>,
    pub failure: Option<Failure>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    #[serde(default)]
    pub next_check_ms: Option<u64>,
    #[serde(default)]
    pub checks: u32,
    /// Why the operator's success was not believed (another amount or
    /// currency): the refund stays as it was until someone looks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Failure>,
    /// When its latest request to the operator was stored to be sent (none:
    /// only the first, at `created_at_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at_ms: Option<u64>,
    /// Times its request was sent again under the same id, because the
    /// operator did not know that id once nothing of ours could still be on
    /// its way: the operator takes the id once, so the money moves once.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resent: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdemRecord {
    pub request_hash: String,
    pub payment_id: String,
    pub created_ms: u64,
    /// Records written before [`Payment::initiating_since_ms`] existed said here that
    /// the creating request still ran (false). New ones leave it out (true):
    /// the payment says it, and the key is written once, not again at the end.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub done: bool,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}
