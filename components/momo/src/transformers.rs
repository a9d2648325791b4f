//! MTN MoMo Open API wire formats ⇄ adapter types. Only an explicit
//! `SUCCESSFUL` or `FAILED` (and the final `REJECTED`/`TIMEOUT` some markets
//! answer) is final; anything else is pending.

use serde::{Deserialize, Serialize};

use mmc_adapter_kit::reasons::{OUR_WORDS, Reasons};
use mmc_adapter_kit::types::{Failure, InitiateRequest, PayoutRequest, PspStatus, RefundRequest};
use mmc_adapter_kit::wire;

/// MTN's free-text fields are short; longer text is refused with a 400.
pub const NOTE_MAX: usize = 160;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Party {
    pub party_id_type: &'static str,
    pub party_id: String,
}

/// A party by phone number.
fn msisdn(phone: &str) -> Party {
    Party {
        party_id_type: "MSISDN",
        party_id: wire::digits(phone),
    }
}

/// The body of MTN's three money movements: `POST
/// /collection/v1_0/requesttopay` names the `payer`, `POST
/// /disbursement/v1_0/transfer` the `payee`, `POST
/// /disbursement/v2_0/refund` the `referenceIdToRefund`.
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct Movement {
    pub amount: String,
    pub currency: String,
    /// Our id: MTN echoes it in callbacks, which carry no reference id.
    pub external_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payer: Option<Party>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payee: Option<Party>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_id_to_refund: Option<String>,
    pub payer_message: String,
    pub payee_note: String,
}

/// A request to pay, transfer or refund as MTN reports it (status queries
/// and callbacks share this shape).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Transaction {
    pub status: String,
    pub reason: Option<Reason>,
    pub external_id: Option<String>,
    /// What was moved, as MTN states it: a success is believed only for what
    /// we asked (the service compares).
    pub amount: Option<String>,
    pub currency: Option<String>,
    /// A request to pay's payer.
    pub payer: Option<PartyIn>,
    /// A transfer's (or refund's) payee.
    pub payee: Option<PartyIn>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PartyIn {
    pub party_id: Option<String>,
}

/// Newer markets answer `"reason": "NOT_ENOUGH_FUNDS"`, older ones an object.
#[derive(Deserialize)]
#[serde(untagged)]
pub enum Reason {
    Code(String),
    Detailed { code: String },
}

impl Reason {
    fn code(&self) -> &str {
        match self {
            Reason::Code(c) => c,
            Reason::Detailed { code } => code,
        }
    }
}

/// What MTN accepts in `payerMessage`/`payeeNote`: it answers 400 to some
/// characters (apostrophes among them), so a note keeps letters (accents
/// folded to their base letter), digits, spaces and `. , - _ : /`, and is cut
/// to MTN's length.
pub fn note(text: &str) -> String {
    let accepted =
        |c: char| c.is_ascii_alphanumeric() || matches!(c, ' ' | '.' | ',' | '-' | '_' | ':' | '/');
    wire::clean(text.chars().map(wire::fold_accent), accepted, NOTE_MAX)
}

pub fn request_to_pay(req: &InitiateRequest, phone: &str) -> Movement {
    let text = req.description.as_deref().unwrap_or(&req.reference);
    Movement {
        amount: req.amount.to_string(),
        currency: req.currency.clone(),
        external_id: req.payment_id.clone(),
        payer: Some(msisdn(phone)),
        payer_message: note(text),
        payee_note: note(&req.reference),
        ..Movement::default()
    }
}

pub fn transfer(req: &PayoutRequest) -> Movement {
    Movement {
        amount: req.amount.to_string(),
        currency: req.currency.clone(),
        external_id: req.payout_id.clone(),
        payee: Some(msisdn(&req.phone)),
        payer_message: note(&req.reference),
        payee_note: note(&req.beneficiary_name),
        ..Movement::default()
    }
}

/// A refund of the request to pay MTN knows by `reference`.
pub fn refund(req: &RefundRequest, reference: String) -> Movement {
    let text = note(&format!("Refund: {}", req.reason));
    Movement {
        amount: req.amount.to_string(),
        currency: req.payment.currency.clone(),
        external_id: req.refund_id.clone(),
        reference_id_to_refund: Some(reference),
        payer_message: text.clone(),
        payee_note: text,
        ..Movement::default()
    }
}

pub fn parse_transaction(body: &[u8]) -> Result<Transaction, String> {
    wire::parse("transaction", body)
}

pub fn status_of(t: &Transaction) -> Result<PspStatus, String> {
    Ok(match t.status.as_str() {
        "SUCCESSFUL" => {
            let party = t.payee.as_ref().or(t.payer.as_ref());
            let party = party.and_then(|p| p.party_id.clone());
            let what = "a SUCCESSFUL transaction";
            PspStatus::Completed(wire::settled(what, &t.amount, &t.currency, party)?)
        }
        "FAILED" => PspStatus::Failed(failure_for(t.reason.as_ref().map(Reason::code))),
        // Final states some markets report instead of FAILED + reason.
        "REJECTED" => PspStatus::Failed(failure_for(Some("APPROVAL_REJECTED"))),
        "TIMEOUT" => PspStatus::Failed(failure_for(Some("EXPIRED"))),
        // PENDING, CREATED, ONGOING and anything new: not final.
        _ => PspStatus::Pending,
    })
}

/// MTN's reasons → ours. MTN gives no message of its own: the customer's
/// own doing is said in our words; our configuration or MTN's service
/// (NOT_ALLOWED, NOT_ALLOWED_TARGET_ENVIRONMENT, INVALID_CALLBACK_URL_HOST,
/// INVALID_CURRENCY, RESOURCE_NOT_FOUND, RESOURCE_ALREADY_EXIST,
/// SERVICE_UNAVAILABLE, INTERNAL_PROCESSING_ERROR), and anything new, is
/// `operator_error` with MTN's reason. `COULD_NOT_PERFORM_TRANSACTION` is
/// MTN's "the customer did not act": the prompt timed out on the phone.
pub const REASONS: Reasons = Reasons {
    provider: "MTN MoMo",
    codes: Reasons::table(
        "
        declined_by_customer:  APPROVAL_REJECTED PAYMENT_NOT_APPROVED
        approval_expired:      EXPIRED COULD_NOT_PERFORM_TRANSACTION
        insufficient_funds:    NOT_ENOUGH_FUNDS
        payer_not_found:       PAYER_NOT_FOUND
        recipient_not_found:   PAYEE_NOT_FOUND
        limit_reached:         PAYER_LIMIT_REACHED
        recipient_not_allowed: PAYEE_NOT_ALLOWED_TO_RECEIVE
        account_blocked:       SENDER_ACCOUNT_NOT_ACTIVE
        cancelled:             TRANSACTION_CANCELED
        ",
    ),
    words: OUR_WORDS,
};

/// The failure MTN reports with `reason`.
pub fn failure_for(reason: Option<&str>) -> Failure {
    REASONS.failure(reason, None)
}

/// `GET /{product}/v1_0/account/balance`: one product's account in one market.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Balance {
    pub available_balance: String,
    pub currency: String,
}
