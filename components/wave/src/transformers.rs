//! Wave Checkout and Payout wire formats ⇄ adapter types. Only an explicit
//! `succeeded` payment, an expired session, or a failed/reversed payout is
//! final; everything else is pending (a failed attempt inside an open
//! checkout session is not final: the customer may try again).

use serde::{Deserialize, Serialize};

use mmc_adapter_kit::books::{Movement, MovementKind};
use mmc_adapter_kit::failure;
use mmc_adapter_kit::reasons::Reasons;
use mmc_adapter_kit::types::{PspStatus, Settled};
use mmc_adapter_kit::wire;

/// `POST /v1/checkout/sessions`.
#[derive(Serialize)]
pub struct CreateSession {
    /// A string: Wave refuses JSON numbers for amounts.
    pub amount: String,
    pub currency: String,
    pub success_url: String,
    pub error_url: String,
    pub client_reference: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub restrict_payer_mobile: Option<String>,
}

/// A checkout session as Wave reports it (answers and webhook `data`).
#[derive(Deserialize)]
pub struct Session {
    pub id: String,
    pub wave_launch_url: Option<String>,
    /// `open`, `complete`, `expired`.
    pub checkout_status: String,
    /// `processing`, `cancelled`, `succeeded`.
    pub payment_status: Option<String>,
    pub client_reference: Option<String>,
    pub last_payment_error: Option<WaveError>,
    /// What the session asks (and, paid, took), as Wave states it: a
    /// success is believed only for what we asked (the service compares).
    pub amount: Option<String>,
    pub currency: Option<String>,
}

impl Session {
    pub fn paid(&self) -> bool {
        self.payment_status.as_deref() == Some("succeeded")
    }

    /// What a paid session says was moved (also what a whole refund of it gives back).
    pub fn settled(&self) -> Result<Settled, String> {
        let what = format!("Wave session {}", self.id);
        wire::settled(what, &self.amount, &self.currency, None)
    }
}

#[derive(Deserialize)]
pub struct WaveError {
    pub code: String,
    pub message: Option<String>,
}

/// `POST /v1/payout`.
#[derive(Serialize)]
pub struct CreatePayout {
    pub currency: String,
    pub receive_amount: String,
    /// E.164 with the `+`.
    pub mobile: String,
    pub name: String,
    pub client_reference: String,
    pub payment_reason: String,
}

#[derive(Deserialize)]
pub struct Payout {
    pub id: String,
    /// `processing`, `succeeded`, `failed`, `reversed`.
    pub status: String,
    pub payout_error: Option<PayoutError>,
    /// What the beneficiary receives, to whom, as Wave states it.
    pub receive_amount: Option<String>,
    pub currency: Option<String>,
    pub mobile: Option<String>,
}

#[derive(Deserialize)]
pub struct PayoutError {
    pub error_code: String,
    pub error_message: Option<String>,
}

/// `GET …/search?client_reference=`.
#[derive(Deserialize)]
pub struct Search<T> {
    pub result: Vec<T>,
}

/// A webhook: `{id, type, data}`.
#[derive(Deserialize)]
pub struct Event {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default)]
    pub data: serde_json::Value,
}

pub fn session_status(s: &Session) -> Result<PspStatus, String> {
    if s.paid() {
        return s.settled().map(PspStatus::Completed);
    }
    if s.checkout_status == "expired" || s.payment_status.as_deref() == Some("cancelled") {
        return Ok(PspStatus::Failed(match &s.last_payment_error {
            // The customer tried and failed, then the session ran out: their failure says more.
            Some(e) => REASONS.failure(Some(&e.code), e.message.as_deref()),
            None => failure(
                "approval_expired",
                "The Wave checkout session ended without a payment.",
            ),
        }));
    }
    Ok(PspStatus::Pending)
}

pub fn payout_status(p: &Payout) -> Result<PspStatus, String> {
    Ok(match p.status.as_str() {
        "succeeded" => {
            let what = format!("Wave payout {}", p.id);
            let to = p.mobile.clone();
            PspStatus::Completed(wire::settled(what, &p.receive_amount, &p.currency, to)?)
        }
        "failed" => {
            let e = p.payout_error.as_ref();
            let message = e.and_then(|e| e.error_message.as_deref());
            PspStatus::Failed(REASONS.failure(e.map(|e| e.error_code.as_str()), message))
        }
        "reversed" => PspStatus::Failed(failure("reversed", "The Wave payout was reversed.")),
        _ => PspStatus::Pending,
    })
}

/// Wave's error codes (kebab-case) → ours, its message kept.
pub const REASONS: Reasons = Reasons {
    provider: "Wave",
    codes: Reasons::table(
        "
        insufficient_funds:  insufficient-funds
        payer_mismatch:      payer-mobile-mismatch
        account_blocked:     blocked-account recipient-account-blocked
        limit_reached:       kyc-limit-exceeded recipient-limit-exceeded payout-limit-exceeded
        recipient_not_found: no-recipient-account recipient-not-found
        ",
    ),
    words: &[],
};

/// `GET /v1/balance`: the wallet the API key is bound to.
#[derive(Deserialize)]
pub struct Balance {
    pub amount: String,
    pub currency: String,
}

/// `GET /v1/transactions?date=…[&after=…]`: one day of the wallet, a page
/// at a time.
#[derive(Deserialize)]
pub struct TransactionList {
    pub page_info: PageInfo,
    pub items: Vec<Transaction>,
}

#[derive(Deserialize)]
pub struct PageInfo {
    pub end_cursor: Option<String>,
    pub has_next_page: bool,
}

/// A transaction of the wallet: Wave lists only what it executed.
#[derive(Deserialize)]
pub struct Transaction {
    pub timestamp: String,
    pub transaction_id: String,
    /// `api_checkout`, `api_payout`, `merchant_sweep`…; can be empty.
    pub transaction_type: Option<String>,
    /// Signed: what it did to the wallet, without the fee.
    pub amount: String,
    pub fee: String,
    pub currency: String,
    #[serde(default)]
    pub is_reversal: bool,
    pub client_reference: Option<String>,
    pub checkout_api_session_id: Option<String>,
    /// The wallet after it.
    pub balance: Option<String>,
}

/// A listed transaction as a movement of the wallet `wallet`.
pub fn movement(t: Transaction, wallet: &str) -> Result<Movement, String> {
    let at_ms = mmc_adapter_kit::mmc_domain::time::ms_of(&t.timestamp).ok_or_else(|| {
        format!(
            "Wave transaction {}: timestamp {:?}",
            t.transaction_id, t.timestamp
        )
    })?;
    let kind = match t.transaction_type.as_deref().unwrap_or_default() {
        "api_checkout" | "merchant_payment" => MovementKind::Collection,
        "api_checkout_refund" | "merchant_payment_refund" => MovementKind::Refund,
        "api_payout" | "api_payout_reversal" | "bulk_payment" | "bulk_payment_reversal" => {
            MovementKind::Payout
        }
        "merchant_sweep" => MovementKind::Settlement,
        _ => MovementKind::Other,
    };
    let unsigned = |v: &str| v.trim().trim_start_matches(['-', '+']).to_string();
    Ok(Movement {
        provider_id: t.transaction_id,
        our_id: t.client_reference.filter(|r| !r.is_empty()),
        psp_reference: t.checkout_api_session_id,
        kind,
        amount: unsigned(&t.amount),
        fee: Some(unsigned(&t.fee)),
        currency: t.currency,
        // A reversal is a movement of its own that undoes the one it names.
        status: if t.is_reversal {
            "reversed"
        } else {
            "completed"
        }
        .into(),
        operator_transaction_id: None,
        at_ms,
        wallet: Some(wallet.to_string()),
        balance_after: t.balance,
    })
}
