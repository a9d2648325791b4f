//! pawaPay v2 wire formats ⇄ adapter types. Initiation answers `ACCEPTED`,
//! `REJECTED` or `DUPLICATE_IGNORED`; afterwards only `COMPLETED` and
//! `FAILED` are final (`SUBMITTED`, `ENQUEUED`, `PROCESSING`,
//! `IN_RECONCILIATION`… and anything new are pending).

use serde::{Deserialize, Serialize};

use crate::mmc::adapter::types::{Failure, PspStatus};

/// The failure code our aggregator answers when a PREAUTH code is wrong
/// (unconfirmed for pawaPay itself: its public list does not name one).
pub const WRONG_CODE: &str = "INVALID_PRE_AUTHORISATION_CODE";

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AccountDetails {
    /// MSISDN without `+`.
    pub phone_number: String,
    pub provider: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Party {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub account_details: AccountDetails,
}

impl Party {
    pub fn mmo(e164: &str, provider: &str) -> Party {
        Party {
            kind: "MMO",
            account_details: AccountDetails {
                phone_number: e164.chars().filter(char::is_ascii_digit).collect(),
                provider: provider.into(),
            },
        }
    }
}

/// `POST /v2/deposits`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Deposit {
    pub deposit_id: String,
    /// A string: decimals depend on the provider, XOF has none.
    pub amount: String,
    pub currency: String,
    pub payer: Party,
    /// PREAUTH providers: the code the customer generated (our OTP).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pre_authorisation_code: Option<String>,
    pub client_reference_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub customer_message: Option<String>,
}

/// `POST /v2/payouts`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Payout {
    pub payout_id: String,
    pub amount: String,
    pub currency: String,
    pub recipient: Party,
    pub client_reference_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub customer_message: Option<String>,
}

/// `POST /v2/refunds`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refund {
    pub refund_id: String,
    pub deposit_id: String,
    pub amount: String,
    pub currency: String,
}

#[derive(Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct FailureReason {
    pub failure_code: String,
    #[serde(default)]
    pub failure_message: Option<String>,
}

/// The answer to an initiation (deposit, payout, refund).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Initiation {
    pub status: String,
    #[serde(default)]
    pub failure_reason: Option<FailureReason>,
}

pub enum Initiated {
    Accepted,
    /// Already accepted under this id: an earlier attempt got through.
    Duplicate,
    Rejected(FailureReason),
}

/// `GET /v2/{deposits|payouts|refunds}/{id}`: `{status: FOUND|NOT_FOUND, data}`.
#[derive(Deserialize)]
pub struct Check {
    pub status: String,
    #[serde(default)]
    pub data: Option<Record>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub status: String,
    #[serde(default)]
    pub failure_reason: Option<FailureReason>,
}

/// A final-state callback: one of the three ids names its subject.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Callback {
    #[serde(default)]
    pub deposit_id: Option<String>,
    #[serde(default)]
    pub payout_id: Option<String>,
    #[serde(default)]
    pub refund_id: Option<String>,
}

pub fn parse<T: serde::de::DeserializeOwned>(what: &str, body: &[u8]) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("unreadable pawaPay {what}: {e}"))
}

pub fn initiation(i: Initiation) -> Result<Initiated, String> {
    match i.status.as_str() {
        "ACCEPTED" => Ok(Initiated::Accepted),
        "DUPLICATE_IGNORED" => Ok(Initiated::Duplicate),
        "REJECTED" => Ok(Initiated::Rejected(i.failure_reason.unwrap_or(
            FailureReason {
                failure_code: "UNKNOWN_ERROR".into(),
                failure_message: None,
            },
        ))),
        other => Err(format!("unknown initiation status {other}")),
    }
}

/// What a status check says. Not found: the initiation may still be in flight.
pub fn check_status(c: &Check) -> Result<PspStatus, String> {
    match (c.status.as_str(), &c.data) {
        ("FOUND", Some(r)) => Ok(record_status(r)),
        // Not (yet) known under our id: the caller decides when this is final.
        ("NOT_FOUND", _) => Ok(PspStatus::NotFound),
        (other, _) => Err(format!("unknown status check answer {other}")),
    }
}

pub fn record_status(r: &Record) -> PspStatus {
    match r.status.as_str() {
        "COMPLETED" => PspStatus::Completed,
        "FAILED" => PspStatus::Failed(match &r.failure_reason {
            Some(f) => failure_for(f),
            None => Failure {
                code: "operator_error".into(),
                message: "pawaPay reported a failure without a reason.".into(),
            },
        }),
        _ => PspStatus::Pending,
    }
}

/// pawaPay's failure codes → ours (shared with the other adapters).
pub fn failure_for(f: &FailureReason) -> Failure {
    let code = match f.failure_code.as_str() {
        "PAYER_NOT_FOUND" => "payer_not_found",
        "RECIPIENT_NOT_FOUND" => "recipient_not_found",
        "PAYMENT_NOT_APPROVED" => "declined_by_customer",
        "INSUFFICIENT_BALANCE" => "insufficient_funds",
        "PAYER_LIMIT_REACHED" | "RECIPIENT_LIMIT_REACHED" | "WALLET_LIMIT_REACHED" => {
            "limit_reached"
        }
        "PAYMENT_IN_PROGRESS" => "payment_in_progress",
        "INVALID_PHONE_NUMBER" => "phone_invalid",
        "AMOUNT_OUT_OF_BOUNDS" | "INVALID_AMOUNT" => "amount_out_of_range",
        WRONG_CODE => "invalid_otp",
        "PROVIDER_TEMPORARILY_UNAVAILABLE" => "operator_unavailable",
        _ => "operator_error",
    };
    Failure {
        code: code.into(),
        message: match &f.failure_message {
            Some(m) => format!("pawaPay: {m} ({})", f.failure_code),
            None => format!("pawaPay failure: {}.", f.failure_code),
        },
    }
}

/// `customerMessage` allows 4 to 22 letters, digits and spaces.
pub fn customer_message(text: Option<&str>) -> Option<String> {
    let cleaned: String = text?
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == ' ')
        .take(22)
        .collect();
    let cleaned = cleaned.trim().to_string();
    (cleaned.len() >= 4).then_some(cleaned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_completed_and_failed_are_final() {
        let check = |json: &str| check_status(&parse::<Check>("check", json.as_bytes()).unwrap());
        assert!(matches!(
            check(r#"{"status":"FOUND","data":{"status":"COMPLETED"}}"#),
            Ok(PspStatus::Completed)
        ));
        assert!(matches!(
            check(r#"{"status":"FOUND","data":{"status":"IN_RECONCILIATION"}}"#),
            Ok(PspStatus::Pending)
        ));
        // Not found is not final by itself: the caller weighs it against the request's window.
        assert!(matches!(
            check(r#"{"status":"NOT_FOUND"}"#),
            Ok(PspStatus::NotFound)
        ));
        match check(
            r#"{"status":"FOUND","data":{"status":"FAILED","failureReason":{"failureCode":"INSUFFICIENT_BALANCE"}}}"#,
        ) {
            Ok(PspStatus::Failed(f)) => assert_eq!(f.code, "insufficient_funds"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn customer_message_fits_the_rules() {
        assert_eq!(
            customer_message(Some("Order #42 — thanks!")).unwrap(),
            "Order 42  thanks"
        );
        assert_eq!(customer_message(Some("é")), None);
        assert_eq!(customer_message(None), None);
    }
}
