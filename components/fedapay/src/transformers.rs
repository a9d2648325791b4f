//! FedaPay v1 wire formats ⇄ adapter types.
//!
//! Transactions are `pending` until FedaPay reports `approved` (or
//! `transferred`, `refunded`, `*_partially_refunded`: paid, then moved on),
//! `declined` or `canceled`; payouts are final once `sent` or `failed`.
//! Anything else, or anything new, is pending: only an explicit answer is
//! final.
//!
//! FedaPay answers objects wrapped under their class (`{"v1/transaction":
//! {…}}`, lists under `{"v1/transactions": […], "meta": …}`, as its official
//! libraries' tests show), while its API reference shows them bare: both are
//! read.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use mmc_adapter_kit::failure;
use mmc_adapter_kit::reasons::{OPERATOR_ERROR, Reasons};
use mmc_adapter_kit::types::{Failure, PspStatus};
use mmc_adapter_kit::wire::{self, text_or_number};

/// The `custom_metadata` key that carries our id (payment or payout id):
/// FedaPay has no documented lookup by a merchant reference, so this is how
/// a transaction is recognised in a search.
pub const OUR_ID: &str = "mmc_id";

#[derive(Serialize)]
pub struct Currency {
    pub iso: String,
}

#[derive(Serialize, Clone)]
pub struct PhoneNumber {
    /// E.164 with its `+`, as FedaPay's API reference writes it.
    pub number: String,
    /// ISO 3166 alpha-2, lower case as in FedaPay's library examples.
    pub country: String,
}

impl PhoneNumber {
    pub fn new(e164: &str, country: &str) -> PhoneNumber {
        PhoneNumber {
            number: format!("+{}", wire::digits(e164)),
            country: country.to_ascii_lowercase(),
        }
    }
}

#[derive(Serialize, Default)]
pub struct Customer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub firstname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lastname: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phone_number: Option<PhoneNumber>,
}

/// `POST /v1/transactions`. Moves no money: nothing can be paid before a
/// token is issued and either pushed or handed to the customer.
#[derive(Serialize)]
pub struct CreateTransaction {
    pub description: String,
    /// Whole units (XOF has no subunit).
    pub amount: u64,
    pub currency: Currency,
    /// Where FedaPay sends the *customer* back after its payment page (not a
    /// server notification: those are webhooks set in the dashboard).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub callback_url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub customer: Option<Customer>,
    pub custom_metadata: Value,
}

/// `POST /v1/{mode}`: the no-redirect push, the call that moves money.
#[derive(Serialize)]
pub struct Push {
    /// Sent back as FedaPay issued it (its docs show a string and a number).
    pub token: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub phone_number: Option<PhoneNumber>,
}

/// `POST /v1/payouts`. Moves no money until started.
#[derive(Serialize)]
pub struct CreatePayout {
    pub amount: u64,
    pub currency: Currency,
    pub mode: String,
    pub customer: Customer,
    pub description: String,
    pub custom_metadata: Value,
}

/// `PUT /v1/payouts/start`, as FedaPay's PHP library sends it.
#[derive(Serialize)]
pub struct StartPayouts {
    pub payouts: Vec<StartItem>,
}

#[derive(Serialize)]
pub struct StartItem {
    pub id: u64,
    pub send_now: bool,
}

/// A transaction or a payout as FedaPay reports it (answers, lists, webhook
/// entities): what both carry, and `K`'s own fields.
#[derive(Deserialize, Clone, Debug, Default)]
pub struct Record<K> {
    pub id: u64,
    pub status: String,
    /// Where our id is ([`OUR_ID`]).
    pub custom_metadata: Option<Value>,
    /// A string or a number: FedaPay's SDKs read it as an integer.
    #[serde(default, deserialize_with = "text_or_number")]
    pub last_error_code: Option<String>,
    pub created_at: Option<String>,
    /// What was moved, as FedaPay states it (whole units; its currency by
    /// id, resolved with `GET /v1/currencies`): a success is believed only
    /// for what we asked (the service compares).
    #[serde(default, deserialize_with = "text_or_number")]
    pub amount: Option<String>,
    pub currency_id: Option<u64>,
    #[serde(flatten)]
    pub own: K,
}

pub type Transaction = Record<TransactionFields>;
pub type Payout = Record<PayoutFields>;

/// A transaction reads nothing more.
#[derive(Deserialize, Clone, Debug, Default)]
pub struct TransactionFields {}

#[derive(Deserialize, Clone, Debug, Default)]
pub struct PayoutFields {
    pub last_error_message: Option<String>,
    /// The beneficiary, as FedaPay states it.
    pub customer: Option<PayoutCustomer>,
}

#[derive(Deserialize, Clone, Debug, Default)]
pub struct PayoutCustomer {
    pub phone_number: Option<PhoneIn>,
}

#[derive(Deserialize, Clone, Debug, Default)]
pub struct PhoneIn {
    pub number: Option<String>,
}

/// What tells transactions from payouts: their class in FedaPay's paths and
/// wrappers, and what their state says.
pub trait Kind: DeserializeOwned {
    /// `transaction`, `payout`.
    const CLASS: &'static str;
    /// Whether FedaPay's answer on it is final.
    fn is_final(status: &str) -> bool;
    /// `iso`: FedaPay's currency ids to ISO codes.
    fn status(r: &Record<Self>, iso: &dyn Fn(u64) -> Option<String>) -> Result<PspStatus, String>;
}

impl Kind for TransactionFields {
    const CLASS: &'static str = "transaction";
    /// Paid, declined or cancelled.
    fn is_final(status: &str) -> bool {
        PAID.contains(&status) || matches!(status, "declined" | "canceled" | "cancelled")
    }
    fn status(t: &Transaction, iso: &dyn Fn(u64) -> Option<String>) -> Result<PspStatus, String> {
        Ok(match t.status.as_str() {
            s if PAID.contains(&s) => {
                let currency = t.currency_id.and_then(iso);
                PspStatus::Completed(wire::settled(
                    "a FedaPay transaction",
                    &t.amount,
                    &currency,
                    None,
                )?)
            }
            s @ ("declined" | "canceled" | "cancelled") => {
                PspStatus::Failed(failure_for(t.last_error_code.as_deref(), None, s))
            }
            _ => PspStatus::Pending,
        })
    }
}

impl Kind for PayoutFields {
    const CLASS: &'static str = "payout";
    /// `pending` (created, not started), `started`, `scheduled`,
    /// `processing`: not final; `sent` and `failed` are.
    fn is_final(status: &str) -> bool {
        matches!(status, "sent" | "failed")
    }
    fn status(p: &Payout, iso: &dyn Fn(u64) -> Option<String>) -> Result<PspStatus, String> {
        Ok(match p.status.as_str() {
            "sent" => {
                let to = p
                    .own
                    .customer
                    .as_ref()
                    .and_then(|c| c.phone_number.as_ref())
                    .and_then(|n| n.number.clone());
                let currency = p.currency_id.and_then(iso);
                PspStatus::Completed(wire::settled("a FedaPay payout", &p.amount, &currency, to)?)
            }
            "failed" => PspStatus::Failed(failure_for(
                p.last_error_code.as_deref(),
                p.own.last_error_message.as_deref(),
                "failed",
            )),
            _ => PspStatus::Pending,
        })
    }
}

impl<K: Kind> Record<K> {
    pub fn is_final(&self) -> bool {
        K::is_final(&self.status)
    }
    pub fn status(&self, iso: &dyn Fn(u64) -> Option<String>) -> Result<PspStatus, String> {
        K::status(self, iso)
    }
    /// Our id, from `custom_metadata`.
    pub fn ours(&self) -> Option<String> {
        our_id(&self.custom_metadata)
    }
}

/// `POST /v1/transactions/{id}/token` → the token and FedaPay's payment page.
#[derive(Deserialize)]
pub struct Token {
    pub token: Value,
    pub url: String,
}

/// A webhook: `{name: "transaction.approved", entity: {…}, …}`.
#[derive(Deserialize)]
pub struct Event {
    pub name: Option<String>,
    /// Older payloads and FedaPay's `Event` class call it `type`.
    #[serde(rename = "type")]
    pub kind: Option<String>,
    pub entity: Option<Value>,
}

pub fn parse<T: DeserializeOwned>(what: &str, body: &[u8]) -> Result<T, String> {
    wire::parse(&format!("FedaPay {what}"), body)
}

/// One object of class `klass` (`transaction`, `payout`), wrapped or bare.
pub fn one<T: DeserializeOwned>(klass: &str, body: &[u8]) -> Result<T, String> {
    let mut value: Value = parse(klass, body)?;
    let inner = match value.get_mut(format!("v1/{klass}")) {
        Some(v) => v.take(),
        None => value,
    };
    serde_json::from_value(inner).map_err(|e| format!("unreadable FedaPay {klass}: {e}"))
}

/// A currency as `GET /v1/currencies` lists it
/// (https://docs.fedapay.com/api-reference/currencies/get-all): its id (how
/// transactions and payouts name their currency), its ISO code (`iso`, as
/// FedaPay's SDKs name it) and the modes available in it, when listed.
#[derive(Debug, Deserialize, Serialize, Clone)]
pub struct CurrencyModes {
    pub id: Option<u64>,
    pub iso: Option<String>,
    /// Absent is not "no mode": an answer that does not list modes says
    /// nothing of them (the operator table then stands).
    pub modes: Option<Vec<String>>,
}

/// The modes FedaPay lists for XOF, or `None` when it lists no XOF or no
/// modes for it.
pub fn xof_modes(currencies: &[CurrencyModes]) -> Option<Vec<String>> {
    let xof = |c: &&CurrencyModes| {
        c.iso
            .as_deref()
            .is_some_and(|i| i.eq_ignore_ascii_case("XOF"))
    };
    let modes = currencies.iter().find(xof)?.modes.as_ref()?;
    let lowered = |m: &String| m.trim().to_ascii_lowercase();
    Some(modes.iter().map(lowered).collect())
}

/// The ISO code of FedaPay's currency `id`.
pub fn iso_of(currencies: &[CurrencyModes], id: u64) -> Option<String> {
    currencies
        .iter()
        .find(|c| c.id == Some(id))
        .and_then(|c| c.iso.clone())
}

/// A list of class `klass` (`transactions`, `payouts`), wrapped or bare.
pub fn many<T: DeserializeOwned>(klass: &str, body: &[u8]) -> Result<Vec<T>, String> {
    let mut value: Value = parse(klass, body)?;
    let key = format!("v1/{klass}");
    let list = match value.get_mut(&key).map(Value::take) {
        Some(wrapped) => wrapped,
        None if value.is_array() => value,
        None => return Err(format!("FedaPay {klass} list without {key}")),
    };
    serde_json::from_value(list).map_err(|e| format!("unreadable FedaPay {klass}: {e}"))
}

/// Our id, as we wrote it into `custom_metadata`.
pub fn our_id(custom_metadata: &Option<Value>) -> Option<String> {
    custom_metadata
        .as_ref()?
        .get(OUR_ID)?
        .as_str()
        .map(str::to_string)
}

pub fn metadata(id: &str) -> Value {
    serde_json::json!({ OUR_ID: id })
}

const PAID: &[&str] = &[
    "approved",
    "transferred",
    "refunded",
    "approved_partially_refunded",
    "transferred_partially_refunded",
];

/// FedaPay's `last_error_code` → ours. FedaPay publishes no list of these
/// codes: the ones below were seen in integrators' payloads (unconfirmed),
/// so every message keeps FedaPay's code.
pub const REASONS: Reasons = Reasons {
    provider: "FedaPay",
    codes: Reasons::table(
        "
        insufficient_funds:   INSUFFICIENT_FUND_ERROR INSUFFICIENT_FUNDS
        declined_by_customer: DECLINED_BY_CUSTOMER CUSTOMER_DECLINED TRANSACTION_DECLINED
        approval_expired:     TIMEOUT_ERROR EXPIRED TRANSACTION_EXPIRED
        phone_invalid:        INVALID_PHONE_NUMBER PHONE_NUMBER_INVALID
        payer_not_found:      ACCOUNT_NOT_FOUND UNKNOWN_ACCOUNT PAYER_NOT_FOUND
        limit_reached:        LIMIT_REACHED LIMIT_EXCEEDED AMOUNT_LIMIT_EXCEEDED
        ",
    ),
    words: &[],
};

/// The failure FedaPay reports for an operation left `status` (`declined`,
/// `canceled`, `failed`) with `code` and `message`.
pub fn failure_for(code: Option<&str>, message: Option<&str>, status: &str) -> Failure {
    let Some(code) = code.filter(|c| !c.is_empty() && *c != "NO_ERROR") else {
        let ours = match status {
            "canceled" | "cancelled" => "cancelled",
            "declined" => "operator_refused",
            _ => OPERATOR_ERROR,
        };
        let said = message.map_or_else(
            || format!("FedaPay reported the operation {status} without a reason."),
            |m| format!("FedaPay: {m}"),
        );
        return failure(ours, &said);
    };
    let ours = match REASONS.code(code) {
        // The account FedaPay did not find is a payout's recipient.
        "payer_not_found" if status == "failed" => "recipient_not_found",
        ours => ours,
    };
    REASONS.worded(ours, code, message)
}

/// The customer's first and last names from one `beneficiary_name`.
pub fn split_name(full: &str) -> (String, String) {
    let full = full.trim();
    match full.split_once(char::is_whitespace) {
        Some((first, last)) => (first.to_string(), last.trim().to_string()),
        None => (full.to_string(), full.to_string()),
    }
}

/// A balance as `GET /v1/balances` lists it
/// (https://docs.fedapay.com/api-reference/balances/get-all): one per
/// payment mode and currency, its amount in major units.
#[derive(Deserialize)]
pub struct Balance {
    pub amount: i64,
    pub mode: String,
    pub currency_id: Option<u64>,
}
