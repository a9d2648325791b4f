//! pawaPay v2 wire formats ⇄ adapter types. Initiation answers `ACCEPTED`,
//! `REJECTED` or `DUPLICATE_IGNORED`; afterwards only `COMPLETED` and
//! `FAILED` are final (`SUBMITTED`, `ENQUEUED`, `PROCESSING`,
//! `IN_RECONCILIATION`… and anything new are pending).

use serde::{Deserialize, Serialize};

use mmc_adapter_kit::books::{Movement, MovementKind};
use mmc_adapter_kit::reasons::Reasons;
use mmc_adapter_kit::types::{Failure, PspStatus};
use mmc_adapter_kit::wire;
use mmc_domain::settlement::whole_units;

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
                phone_number: wire::digits(e164),
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
    pub failure_message: Option<String>,
}

/// The failure pawaPay reports with `reason` (none: an operator error).
pub fn failure(reason: Option<&FailureReason>) -> Failure {
    let code = reason.map(|r| r.failure_code.as_str());
    REASONS.failure(code, reason.and_then(|r| r.failure_message.as_deref()))
}

/// The answer to an initiation (deposit, payout, refund).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Initiation {
    pub status: String,
    pub failure_reason: Option<FailureReason>,
}

pub enum Initiated {
    Accepted,
    /// Already accepted under this id: an earlier attempt got through.
    Duplicate,
    Rejected(Failure),
}

/// `GET /v2/{deposits|payouts|refunds}/{id}`: `{status: FOUND|NOT_FOUND, data}`.
#[derive(Deserialize)]
pub struct Check {
    pub status: String,
    pub data: Option<Record>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub status: String,
    pub failure_reason: Option<FailureReason>,
    /// What was moved, as pawaPay states it: a success is believed only for
    /// what we asked (the service compares).
    pub amount: Option<String>,
    pub currency: Option<String>,
    /// A deposit's payer.
    pub payer: Option<PartyIn>,
    /// A payout's recipient.
    pub recipient: Option<PartyIn>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct PartyIn {
    pub account_details: Option<AccountIn>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct AccountIn {
    pub phone_number: Option<String>,
}

/// A final-state callback: one of the three ids names its subject.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Callback {
    pub deposit_id: Option<String>,
    pub payout_id: Option<String>,
    pub refund_id: Option<String>,
}

/// `GET /v2/active-conf` (https://docs.pawapay.io/v2/api-reference/toolkit/active-configuration):
/// the account's `countries[].providers[].currencies[].operationTypes`, each
/// operation with its `minTransactionLimit` / `maxTransactionLimit`
/// (decimal strings) and availability `status`. Only what the catalogue needs
/// is read; `countries` is required, so an answer without it is unreadable.
#[derive(Deserialize)]
pub struct ActiveConf {
    pub countries: Vec<ConfCountry>,
}

#[derive(Deserialize)]
pub struct ConfCountry {
    #[serde(default)]
    pub providers: Vec<ConfProvider>,
}

#[derive(Deserialize)]
pub struct ConfProvider {
    pub provider: String,
    #[serde(default)]
    pub currencies: Vec<ConfCurrency>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfCurrency {
    pub currency: String,
    /// Kept loose: the documented example lists the deposit entry keyed by its
    /// type (`{"DEPOSIT": {...}}`) and the others with an `operationType`
    /// field; both forms, and an object keyed by type, are read.
    #[serde(default)]
    pub operation_types: serde_json::Value,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct ConfOperation {
    operation_type: Option<String>,
    min_transaction_limit: Option<String>,
    max_transaction_limit: Option<String>,
    status: Option<String>,
    /// Deposits: `PROVIDER_AUTH` (PIN prompt on the phone), `PREAUTH` (a
    /// code the customer generated travels with the deposit), `REDIRECT_AUTH`.
    auth_type: Option<String>,
}

/// `POST /v2/predict-provider` (https://docs.pawapay.io/v2/api-reference/toolkit/predict-provider).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PredictRequest {
    pub phone_number: String,
}

#[derive(Deserialize)]
pub struct Prediction {
    pub provider: String,
}

/// What the catalogue keeps of a provider's XOF deposits (cached between calls).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct DepositConf {
    pub min: Option<u64>,
    pub max: Option<u64>,
    pub status: Option<String>,
    pub auth_type: Option<String>,
}

impl DepositConf {
    /// The customer's code must travel with the deposit (our OTP step).
    pub fn preauth(&self) -> bool {
        self.auth_type.as_deref() == Some("PREAUTH")
    }
}

/// The providers configured for XOF deposits, by provider code. A provider
/// missing here cannot collect on this account.
pub fn deposit_conf(conf: &ActiveConf) -> std::collections::BTreeMap<String, DepositConf> {
    let mut out = std::collections::BTreeMap::new();
    for provider in conf.countries.iter().flat_map(|c| &c.providers) {
        let deposit = provider
            .currencies
            .iter()
            .filter(|c| c.currency == "XOF")
            .find_map(|c| deposit_of(&c.operation_types));
        // Whole francs inside the limits: round the minimum up, the maximum down.
        let limit = |v: &Option<String>, up| v.as_deref().and_then(|v| whole_units(v, up));
        if let Some(d) = deposit {
            let conf = DepositConf {
                min: limit(&d.min_transaction_limit, true),
                max: limit(&d.max_transaction_limit, false),
                status: d.status,
                auth_type: d.auth_type,
            };
            out.insert(provider.provider.clone(), conf);
        }
    }
    out
}

fn deposit_of(ops: &serde_json::Value) -> Option<ConfOperation> {
    let read = |v: &serde_json::Value| serde_json::from_value::<ConfOperation>(v.clone()).ok();
    match ops {
        serde_json::Value::Array(items) => items.iter().find_map(|item| {
            if let Some(keyed) = item.get("DEPOSIT") {
                return read(keyed);
            }
            read(item).filter(|o| o.operation_type.as_deref() == Some("DEPOSIT"))
        }),
        serde_json::Value::Object(map) => map.get("DEPOSIT").and_then(read),
        _ => None,
    }
}

/// pawaPay's availability → our operator status. Unknown: not claimed closed.
pub fn availability(status: Option<&str>) -> &'static str {
    match status {
        Some("DELAYED") => "delayed",
        Some("CLOSED") => "closed",
        _ => "operational",
    }
}

pub fn initiation(i: Initiation) -> Result<Initiated, String> {
    match i.status.as_str() {
        "ACCEPTED" => Ok(Initiated::Accepted),
        "DUPLICATE_IGNORED" => Ok(Initiated::Duplicate),
        "REJECTED" => Ok(Initiated::Rejected(failure(i.failure_reason.as_ref()))),
        other => Err(format!("unknown initiation status {other}")),
    }
}

/// What a status check says. Not found: the initiation may still be in flight.
pub fn check_status(c: &Check) -> Result<PspStatus, String> {
    match (c.status.as_str(), &c.data) {
        ("FOUND", Some(r)) => record_status(r),
        // Not (yet) known under our id: the caller decides when this is final.
        ("NOT_FOUND", _) => Ok(PspStatus::NotFound),
        (other, _) => Err(format!("unknown status check answer {other}")),
    }
}

pub fn record_status(r: &Record) -> Result<PspStatus, String> {
    Ok(match r.status.as_str() {
        "COMPLETED" => {
            let party = r.recipient.as_ref().or(r.payer.as_ref());
            let party = party.and_then(|p| p.account_details.as_ref());
            let party = party.and_then(|a| a.phone_number.clone());
            let what = "a COMPLETED record";
            PspStatus::Completed(wire::settled(what, &r.amount, &r.currency, party)?)
        }
        "FAILED" => PspStatus::Failed(failure(r.failure_reason.as_ref())),
        _ => PspStatus::Pending,
    })
}

/// pawaPay's failure codes → ours, its message kept.
pub const REASONS: Reasons = Reasons {
    provider: "pawaPay",
    codes: Reasons::table(
        "
        payer_not_found:      PAYER_NOT_FOUND
        recipient_not_found:  RECIPIENT_NOT_FOUND
        declined_by_customer: PAYMENT_NOT_APPROVED
        insufficient_funds:   INSUFFICIENT_BALANCE
        limit_reached:        PAYER_LIMIT_REACHED RECIPIENT_LIMIT_REACHED WALLET_LIMIT_REACHED
        payment_in_progress:  PAYMENT_IN_PROGRESS
        phone_invalid:        INVALID_PHONE_NUMBER
        amount_out_of_range:  AMOUNT_OUT_OF_BOUNDS INVALID_AMOUNT
        operator_unavailable: PROVIDER_TEMPORARILY_UNAVAILABLE
        ",
    ),
    words: &[],
};

/// `customerMessage` allows 4 to 22 letters, digits and spaces.
pub fn customer_message(text: Option<&str>) -> Option<String> {
    let cleaned = wire::clean(text?.chars(), |c| c.is_ascii_alphanumeric() || c == ' ', 22);
    (cleaned.len() >= 4).then_some(cleaned)
}

/// A wallet: pawaPay keeps one per country and currency.
#[derive(Serialize, Clone)]
pub struct Wallet {
    pub country: String,
    pub currency: String,
}

/// pawaPay's name for a country (ISO 3166-1 alpha-3).
pub fn alpha3(country: mmc_domain::Country) -> &'static str {
    match country {
        mmc_domain::Country::Bj => "BEN",
        mmc_domain::Country::Tg => "TGO",
        mmc_domain::Country::Ci => "CIV",
    }
}

/// `POST /v2/statements`: a wallet's statement of a period (31 days at most).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatementRequest {
    pub wallet: Wallet,
    pub start_date: String,
    pub end_date: String,
    pub compressed: bool,
}

/// Its answer: `ACCEPTED` (a callback will follow; its status can be
/// checked) or `REJECTED` with the reason.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatementAccepted {
    pub statement_id: Option<String>,
    pub status: String,
    pub failure_reason: Option<FailureReason>,
}

/// `GET /v2/statements/{statementId}`.
#[derive(Deserialize)]
pub struct StatementCheck {
    pub status: String,
    pub data: Option<StatementData>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct StatementData {
    /// `PROCESSING`, `COMPLETED`, `FAILED`.
    pub status: String,
    pub download_url: Option<String>,
    pub failure_reason: Option<FailureReason>,
}

/// `GET /v2/wallet-balances`.
#[derive(Deserialize)]
pub struct WalletBalances {
    pub balances: Vec<WalletBalance>,
}

#[derive(Deserialize)]
pub struct WalletBalance {
    pub country: String,
    pub balance: String,
    pub currency: String,
    #[serde(default)]
    pub provider: Option<String>,
}

/// The statement's columns, as pawaPay's dashboard documents them. Any
/// other means its format changed: the statement is not read on a guess.
const COLUMNS: [&str; 8] = [
    "Creation Date",
    "MSISDN",
    "Transaction ID",
    "Amount",
    "Currency",
    "Country",
    "MNO",
    "Type",
];

/// One CSV record's fields (RFC 4180: quoted fields, doubled quotes);
/// `None` for a record cut off inside a quote.
fn fields(line: &str) -> Option<Vec<String>> {
    let (mut out, mut field, mut quoted, mut chars) =
        (Vec::new(), String::new(), false, line.chars().peekable());
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', true) => quoted = false,
            ('"', false) if field.is_empty() => quoted = true,
            (',', false) => out.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    if quoted {
        return None;
    }
    out.push(field);
    Some(out)
}

/// Rows `[offset, offset + limit)` of a statement, as movements of
/// `wallet`, and whether more follow. A statement that does not end with a
/// line break was cut off (truncated): refused, as is an unknown column or
/// a row that is not one.
pub fn statement_rows(
    csv: &[u8],
    wallet: &str,
    (offset, limit): (usize, usize),
) -> Result<(Vec<Movement>, bool), String> {
    let text = std::str::from_utf8(csv).map_err(|_| "the statement is not UTF-8".to_string())?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if !text.is_empty() && !text.ends_with('\n') {
        return Err("the statement is cut off: its last line has no end".into());
    }
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let header = fields(lines.next().ok_or("the statement has no header")?)
        .ok_or("the statement's header is cut off")?;
    let header: Vec<String> = header.iter().map(|h| h.trim().to_string()).collect();
    if let Some(unknown) = header.iter().find(|h| !COLUMNS.contains(&h.as_str())) {
        return Err(format!("the statement has an unknown column {unknown:?}"));
    }
    let at = |name: &str| {
        header
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| format!("the statement has no {name:?} column"))
    };
    let (date, id, amount, currency, kind) = (
        at("Creation Date")?,
        at("Transaction ID")?,
        at("Amount")?,
        at("Currency")?,
        at("Type")?,
    );
    let rows: Vec<&str> = lines.collect();
    let mut out = Vec::new();
    for (n, line) in rows.iter().enumerate().skip(offset).take(limit) {
        let row = fields(line)
            .filter(|r| r.len() == header.len())
            .ok_or_else(|| {
                format!(
                    "statement row {} does not have the header's {} columns",
                    n + 2,
                    header.len()
                )
            })?;
        let created = row[date].trim();
        let at_ms = mmc_domain::time::ms_of(created)
            .or_else(|| mmc_domain::time::ms_of(&format!("{created}Z")))
            .ok_or_else(|| format!("statement row {}: Creation Date {created:?}", n + 2))?;
        let transaction = row[id].trim().to_string();
        let movement_kind = match row[kind].trim() {
            "DEPOSIT" => MovementKind::Collection,
            "PAYOUT" => MovementKind::Payout,
            "REFUND" => MovementKind::Refund,
            "FEE" => MovementKind::Fee,
            "ADJUSTMENT" => MovementKind::Adjustment,
            "TOP_UP" | "TOPUP" => MovementKind::TopUp,
            "WITHDRAWAL" | "SETTLEMENT" => MovementKind::Settlement,
            _ => MovementKind::Other,
        };
        // Our operations are known by the UUIDv4 made from our id.
        let ours = matches!(
            movement_kind,
            MovementKind::Collection | MovementKind::Payout | MovementKind::Refund
        )
        .then(|| mmc_domain::operator_ids::from_operator(&transaction))
        .flatten();
        out.push(Movement {
            provider_id: format!("{}:{transaction}", row[kind].trim()),
            our_id: ours,
            psp_reference: Some(transaction),
            kind: movement_kind,
            amount: row[amount]
                .trim()
                .trim_start_matches(['-', '+'])
                .to_string(),
            // pawaPay lists its fees as movements of their own.
            fee: None,
            currency: row[currency].trim().to_string(),
            status: "completed".into(),
            operator_transaction_id: None,
            at_ms,
            wallet: Some(wallet.to_string()),
            balance_after: None,
        });
    }
    Ok((out, offset + limit < rows.len()))
}
