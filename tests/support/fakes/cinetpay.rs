//! A fake CinetPay Payment API v2 on the fake-operator kit (`kit.rs`),
//! from CinetPay's documentation (docs.cinetpay.com, API 1.0, "Payment
//! API": initialisation, notification, transaction verification, X-TOKEN
//! HMAC, code table): the wire format below, its documented behaviours in
//! the table, and the kit's faults, callback modes and plumbing.
//!
//! | documented behaviour | here |
//! |---|---|
//! | `POST /v2/payment`, JSON: `apikey`, `site_id`, `transaction_id` (unique), `amount` (an integer, a multiple of 5), `currency`, `description`, `notify_url`, `return_url`, `channels`; optional `lang`, `metadata`, `customer_phone_number` with `lock_phone_number` | `{code: "201", message: "CREATED", data: {payment_token, payment_url}}`; a field missing, or an amount not a multiple of 5: `608 MINIMUM_REQUIRED_FIELDS`, nothing created |
//! | the link moves no money: the customer pays on CinetPay's page | on command: `customer_pays`, `customer_refused` |
//! | `POST /v2/payment/check`, JSON `apikey`, `site_id`, `transaction_id` | `{code, message, data: {amount, currency, status, payment_method, description, metadata, operator_id, payment_date, fund_availability_date}, api_response_id}`, the amount a string: `00 SUCCES` with `ACCEPTED`; a refusal's code (`600 PAYMENT_FAILED`, `627 TRANSACTION_CANCEL`…) with `REFUSED`; `662 WAITING_CUSTOMER_PAYMENT` with `WAITING_FOR_CUSTOMER` |
//! | the notification: a form POST to the payment's `notify_url` after every change of status (a `WAITING_FOR_CUSTOMER` one first for operators that confirm by a push), the `cpm_*` fields | `notify`, honouring the kit's callback mode ([`super::Callbacks`]) |
//! | its `x-token` header: the hex HMAC-SHA256, with the merchant's Secret Key, of `cpm_site_id`, `cpm_trans_id`, `cpm_trans_date`, `cpm_amount`, `cpm_currency`, `signature`, `payment_method`, `cel_phone_num`, `cpm_phone_prefixe`, `cpm_language`, `cpm_version`, `cpm_payment_config`, `cpm_page_action`, `cpm_custom`, `cpm_designation`, `cpm_error_message` concatenated | [`x_token`] |
//! | the notify URL must answer `200 OK` | only a 200 counts as delivered ([`DELIVERY`]) |
//! | codes `609 AUTH_NOT_FOUND` (the API key), `613 SITE_ID_NOTVALID`, `429 TOO_MANY_REQUEST` | a wrong `apikey` or `site_id`: 403 with 609 or 613 |
//!
//! Where the documentation is silent this fake says what it chose: the HTTP
//! status of a refusal (403 for 609 and 613, 400 for 608 and 805; CinetPay
//! documents the codes, not the statuses); a `transaction_id` used twice is
//! refused with `805 CLIENT_TRANSACTION_ID_EXIST` (the name CinetPay's
//! transfer API gives it); a check of an unknown `transaction_id` is
//! answered 404; notifications are tried 3 times, 5 s each (no schedule is
//! documented). CinetPay also pings the notify URL with a GET to see that
//! it is up; this fake does not.
//!
//! CinetPay's transfer API (payouts; "Transfer API": using the API, steps
//! to transfer money, notification URL, statuses, code annex), on its own
//! host (`client.cinetpay.com`), here on the same server:
//!
//! | documented behaviour | here |
//! |---|---|
//! | `POST /v1/auth/login?lang=`, form `apikey`, `password` (the API password) | `{code: 0, message: "OPERATION_SUCCES", data: {token}}`; wrong: `701 INVALID_CREDENTIALS` |
//! | the token goes in `?token=` of every other call; it lives 5 minutes | an unknown token: `706 INVALID_TOKEN` (tokens do not expire here) |
//! | money goes only to contacts: `POST /v1/transfer/contact?token=`, form `data`, a JSON list of `{prefix, phone, name, surname, email}` | `{code: 0, data: [[{…, code: 0, status: "success", lot}]]}`; one already there: its item `726 ERROR_PHONE_ALREADY_MY_CONTACT`, still a success |
//! | `POST /v1/transfer/money/send/contact?token=`, form `data`, a JSON list of `{prefix, phone, amount, client_transaction_id, notify_url}` | each transfer `NEW`, then done (`VAL`) or rejected (`REJ`, its reason in `comment`) by the kit's outcome for the number, after `settle_after`; answered `{code: 0, data: [[{…, code: 0, status: "success", treatment_status: "NEW", transaction_id, lot}]]}` |
//! | codes `724 ERROR_PHONE_NOT_MY_CONTACT`, `725 MISSING_NOTIFY_URL`, `801 INVALID_AMOUNT`, `805 CLIENT_TRANSACTION_ID_EXIST` (a `client_transaction_id` seen before), `602 INSUFFICIENT_BALANCE` | the whole request refused with that code, nothing sent; the balance is `set_transfer_balance` (plenty unless set) |
//! | `GET /v1/transfer/check/balance?token=` | `{code: 0, data: {amount, inUsing, available}}`: the balance set (else [`PLENTY`]) available, transfers not yet final in use |
//! | `GET /v1/transfer/check/money?token=&client_transaction_id=` | `{code: 0, data: [{transaction_id, client_transaction_id, lot, amount, receiver, sending_status, comment, treatment_status, operator_transaction_id, validated_at}]}`; none: `723 NOT_FOUND` |
//! | statuses `NEW`, `REC`, `NOS` (on their way), `VAL`, `REJ` (final) | `NEW`, then `VAL` or `REJ` |
//! | the notification: a form POST of the check's fields to the transfer's `notify_url` at each step, unsigned ("always ask for the real values by querying CinetPay") | one when it becomes final, as the kit's callback mode says, under [`DELIVERY`] |
//!
//! Where silent: the shape of the send and check answers (the contact
//! answer's, a list per request), the HTTP status of an error (401 for
//! `701`, `705`, `706`; 400 for the others), that a refused request sends
//! none of its transfers, `receiver` as the digits of prefix and phone.
//!
//! Endpoints (for `inject`): `payment_init`, `payment_check`, `auth_login`,
//! `transfer_contact`, `transfer_send`, `transfer_check`, `transfer_balance`. `inject_for`
//! matches our `transaction_id` or the customer's number
//! (`customer_phone_number`, also on the checks of its transaction), and for
//! transfers our `client_transaction_id` or the beneficiary's number
//! (prefix and phone); `ids_for` counts the `transaction_id`s links were
//! opened under and the `client_transaction_id`s transfers were sent under.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use hmac::{Hmac, Mac};
use mmc_config::ComponentConfig;
use mmc_domain::http::encode_component;
use parking_lot::Mutex;
use serde_json::{Value, json};
use sha2::Sha256;

use super::{
    Delivery, FakeServer, Fault, Outcome, Plumbing, Received, Reply, Wire, now_rfc3339,
    with_fault_for,
};

pub const API_KEY: &str = "12912847765bc0db748fdd44.fakekey";
pub const SITE_ID: &str = "445160";
pub const SECRET_KEY: &str = "cinetpay_fake_secret_key_0123456789";
/// The transfer API's password, set in CinetPay's back office.
pub const TRANSFER_PASSWORD: &str = "cinetpay_fake_transfer_password";
/// Where the adapter tells CinetPay to notify transfers unless a test says
/// otherwise: nothing listens there.
pub const TRANSFER_NOTIFY_URL: &str = "http://127.0.0.1:9/cinetpay/transfers";

/// CinetPay's notification delivery: its documentation says the notify URL
/// must answer `200 OK`, and gives no timeout or retry schedule.
/// Conservative rule: 5 s to answer `200`, 3 attempts in all.
pub const DELIVERY: Delivery = Delivery {
    patience: Duration::from_secs(5),
    attempts: 3,
    pause: Duration::from_millis(200),
    only_200: true,
};

/// A payment link and what became of it.
#[derive(Clone, Debug)]
pub struct Transaction {
    pub transaction_id: String,
    pub payment_token: String,
    /// What CinetPay's books say (a string, as its check answers it).
    pub amount: String,
    pub currency: String,
    pub notify_url: String,
    pub customer_phone_number: Option<String>,
    pub description: String,
    pub metadata: Option<String>,
    /// `WAITING_FOR_CUSTOMER`, `ACCEPTED`, `REFUSED`.
    pub status: String,
    /// The code-table message of the last attempt (`SUCCES`, `PAYMENT_FAILED`…).
    pub message: String,
    pub operator_id: Option<String>,
    pub payment_method: Option<String>,
}

impl Transaction {
    /// Money moved: the customer paid this link.
    pub fn paid(&self) -> bool {
        self.status == "ACCEPTED"
    }
}

/// A transfer (a payout) and what became of it.
#[derive(Clone, Debug)]
pub struct Transfer {
    /// CinetPay's id.
    pub transaction_id: String,
    /// Ours.
    pub client_transaction_id: String,
    pub lot: String,
    pub prefix: String,
    pub phone: String,
    pub amount: u64,
    pub notify_url: String,
    /// `NEW`, `VAL`, `REJ`.
    pub treatment_status: String,
    pub comment: String,
    pub operator_transaction_id: Option<String>,
}

impl Transfer {
    /// Money moved: the beneficiary was paid.
    pub fn paid(&self) -> bool {
        self.treatment_status == "VAL"
    }

    /// The beneficiary's number, digits with the country prefix.
    pub fn receiver(&self) -> String {
        format!("{}{}", self.prefix, self.phone)
    }
}

/// CinetPay's state: its payment links by `transaction_id`; its transfer
/// API's tokens, contacts (prefix and phone) and transfers by CinetPay's id.
pub struct CinetPay {
    plumbing: Plumbing,
    transactions: Mutex<HashMap<String, Transaction>>,
    tokens: Mutex<HashSet<String>>,
    contacts: Mutex<HashSet<String>>,
    transfers: Mutex<HashMap<String, Transfer>>,
    /// The transfer balance (None: plenty).
    balance: Mutex<Option<u64>>,
}

/// A fake CinetPay server (the kit's [`FakeServer`] over [`CinetPay`]). Its
/// notifications go to the `notify_url` each payment names.
pub type FakeCinetPay = FakeServer<CinetPay>;

impl Wire for CinetPay {
    fn new() -> CinetPay {
        CinetPay {
            plumbing: Plumbing::default(),
            transactions: Mutex::new(HashMap::new()),
            tokens: Mutex::new(HashSet::new()),
            contacts: Mutex::new(HashSet::new()),
            transfers: Mutex::new(HashMap::new()),
            balance: Mutex::new(None),
        }
    }

    fn plumbing(&self) -> &Plumbing {
        &self.plumbing
    }

    fn handle(self: Arc<Self>, req: Received) -> BoxFuture<'static, Reply> {
        Box::pin(handle(self, req))
    }

    /// The `cinetpay` adapter's site, API key and Secret Key, and its
    /// transfer API here too, with its password and notify URL.
    fn configure(&self, c: &mut ComponentConfig) {
        c.settings.insert("site_id".into(), SITE_ID.into());
        c.secrets.insert("api_key".into(), API_KEY.into());
        c.secrets.insert("secret_key".into(), SECRET_KEY.into());
        if let Some(base_url) = c.settings.get("base_url").cloned() {
            c.settings.insert("transfer_base_url".into(), base_url);
        }
        c.settings
            .insert("transfer_notify_url".into(), TRANSFER_NOTIFY_URL.into());
        c.secrets
            .insert("transfer_password".into(), TRANSFER_PASSWORD.into());
    }
}

/// CinetPay's envelope.
fn coded(status: u16, code: &str, message: &str, description: &str, data: Value) -> Reply {
    Reply::json(
        status,
        &json!({"code": code, "message": message, "description": description,
                "data": data, "api_response_id": format!("{}", uuid::Uuid::new_v4().simple())}),
    )
}

/// CinetPay refusing a partner for the partner's own doing, before doing
/// anything (401, 403, 404, 429; the codes 609 and 429 are CinetPay's).
pub fn refusal(status: u16) -> Fault {
    let (code, message) = match status {
        401 | 403 => ("609", "AUTH_NOT_FOUND"),
        429 => ("429", "TOO_MANY_REQUEST"),
        _ => ("404", "NOT_FOUND"),
    };
    Fault::Reply(coded(status, code, message, "refused", Value::Null))
}

/// The notification's fields in the order the `x-token` signs them.
const SIGNED: [&str; 16] = [
    "cpm_site_id",
    "cpm_trans_id",
    "cpm_trans_date",
    "cpm_amount",
    "cpm_currency",
    "signature",
    "payment_method",
    "cel_phone_num",
    "cpm_phone_prefixe",
    "cpm_language",
    "cpm_version",
    "cpm_payment_config",
    "cpm_page_action",
    "cpm_custom",
    "cpm_designation",
    "cpm_error_message",
];

/// The `x-token` of a notification's fields, signed with `secret`.
pub fn x_token(secret: &str, fields: &[(&str, String)]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    for name in SIGNED {
        if let Some((_, v)) = fields.iter().find(|(k, _)| *k == name) {
            mac.update(v.as_bytes());
        }
    }
    hex::encode(mac.finalize().into_bytes())
}

/// A form body (`application/x-www-form-urlencoded`).
pub fn form(fields: &[(&str, String)]) -> Vec<u8> {
    fields
        .iter()
        .map(|(k, v)| format!("{}={}", encode_component(k), encode_component(v)))
        .collect::<Vec<_>>()
        .join("&")
        .into_bytes()
}

/// CinetPay's own: its links, the customer on its page, notifications on
/// demand.
impl FakeCinetPay {
    pub fn transaction(&self, transaction_id: &str) -> Option<Transaction> {
        self.wire().transactions.lock().get(transaction_id).cloned()
    }

    pub fn transactions(&self) -> Vec<Transaction> {
        self.wire().transactions.lock().values().cloned().collect()
    }

    /// CinetPay's books say another amount for this transaction: every
    /// later check and notification about it carries that amount.
    pub fn set_amount(&self, transaction_id: &str, amount: &str) {
        if let Some(t) = self.wire().transactions.lock().get_mut(transaction_id) {
            t.amount = amount.into();
        }
    }

    /// The customer pays on CinetPay's page; CinetPay then notifies.
    /// Returns our answers to the notification(s); none when the link is
    /// no longer payable.
    pub async fn customer_pays(&self, transaction_id: &str) -> Vec<u16> {
        if !self.mark_paid(transaction_id) {
            return Vec::new();
        }
        self.notify(transaction_id).await
    }

    /// The link is paid, if it still waits; no notification (yet).
    pub fn mark_paid(&self, transaction_id: &str) -> bool {
        let mut transactions = self.wire().transactions.lock();
        let Some(t) = transactions.get_mut(transaction_id) else {
            return false;
        };
        if t.status != "WAITING_FOR_CUSTOMER" {
            return false;
        }
        t.status = "ACCEPTED".into();
        t.message = "SUCCES".into();
        t.payment_method = Some("OM".into());
        t.operator_id = Some(format!(
            "MP{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        ));
        true
    }

    /// The customer's payment is refused (`PAYMENT_FAILED`,
    /// `INSUFFICIENT_BALANCE`…); CinetPay notifies.
    pub async fn customer_refused(&self, transaction_id: &str, message: &str) -> Vec<u16> {
        if let Some(t) = self.wire().transactions.lock().get_mut(transaction_id) {
            t.status = "REFUSED".into();
            t.message = message.into();
        }
        self.notify(transaction_id).await
    }

    /// The notification's fields for the transaction as it stands.
    pub fn fields(&self, transaction_id: &str) -> Vec<(&'static str, String)> {
        let t = self.transaction(transaction_id).expect("known transaction");
        let phone: String = t
            .customer_phone_number
            .unwrap_or_default()
            .chars()
            .filter(char::is_ascii_digit)
            .collect();
        let (prefix, number) = phone.split_at(phone.len().min(3));
        vec![
            ("cpm_site_id", SITE_ID.to_string()),
            ("cpm_trans_id", t.transaction_id.clone()),
            ("cpm_trans_date", now_rfc3339()),
            ("cpm_amount", t.amount.clone()),
            ("cpm_currency", t.currency.clone()),
            ("signature", t.payment_token.clone()),
            ("payment_method", t.payment_method.unwrap_or_default()),
            ("cel_phone_num", number.to_string()),
            ("cpm_phone_prefixe", prefix.to_string()),
            ("cpm_language", "fr".into()),
            ("cpm_version", "V4".into()),
            ("cpm_payment_config", "Single".into()),
            ("cpm_page_action", "Payment".into()),
            ("cpm_custom", t.metadata.unwrap_or_default()),
            ("cpm_designation", t.description),
            ("cpm_error_message", t.message),
        ]
    }

    /// Sends the transaction's notification as it stands, as the kit's
    /// callback mode says, each delivery under [`DELIVERY`]. Returns our
    /// answers to every attempt.
    pub async fn notify(&self, transaction_id: &str) -> Vec<u16> {
        let fields = self.fields(transaction_id);
        let url = self.transaction(transaction_id).unwrap().notify_url;
        let token = x_token(SECRET_KEY, &fields);
        let headers = || {
            vec![
                ("x-token".to_string(), token.clone()),
                (
                    "content-type".to_string(),
                    "application/x-www-form-urlencoded".to_string(),
                ),
            ]
        };
        self.plumbing()
            .dispatch("POST", &url, headers, form(&fields), DELIVERY)
            .await
    }

    /// POSTs these fields to the transaction's notify URL with this
    /// `x-token` (none: no header), once.
    pub async fn send_notification(
        &self,
        transaction_id: &str,
        fields: &[(&str, String)],
        token: Option<String>,
    ) -> u16 {
        let url = self.transaction(transaction_id).unwrap().notify_url;
        let headers = token
            .map(|t| vec![("x-token".to_string(), t)])
            .unwrap_or_default();
        self.plumbing()
            .call_back("POST", &url, headers, form(fields))
            .await
    }
}

/// CinetPay's transfers.
impl FakeCinetPay {
    pub fn transfers(&self) -> Vec<Transfer> {
        self.wire().transfers.lock().values().cloned().collect()
    }

    /// The transfers to `msisdn` (any form).
    pub fn transfers_to(&self, msisdn: &str) -> Vec<Transfer> {
        let digits: String = msisdn.chars().filter(char::is_ascii_digit).collect();
        self.transfers()
            .into_iter()
            .filter(|t| t.receiver() == digits)
            .collect()
    }

    /// The transfers sent under our id.
    pub fn transfers_under(&self, client_transaction_id: &str) -> Vec<Transfer> {
        self.transfers()
            .into_iter()
            .filter(|t| t.client_transaction_id == client_transaction_id)
            .collect()
    }

    /// The transfer balance from now on.
    pub fn set_transfer_balance(&self, amount: u64) {
        *self.wire().balance.lock() = Some(amount);
    }

    /// The fields of a transfer's notification, as it stands.
    pub fn transfer_fields(&self, transaction_id: &str) -> Vec<(&'static str, String)> {
        let t = self.wire().transfers.lock()[transaction_id].clone();
        transfer_fields(&t)
    }
}

fn transfer_fields(t: &Transfer) -> Vec<(&'static str, String)> {
    vec![
        ("transaction_id", t.transaction_id.clone()),
        ("client_transaction_id", t.client_transaction_id.clone()),
        ("lot", t.lot.clone()),
        ("amount", t.amount.to_string()),
        ("receiver", t.receiver()),
        ("sending_status", sending_status(t).into()),
        ("comment", t.comment.clone()),
        ("treatment_status", t.treatment_status.clone()),
        (
            "operator_transaction_id",
            t.operator_transaction_id.clone().unwrap_or_default(),
        ),
        (
            "validated_at",
            if t.paid() {
                now_rfc3339()
            } else {
                String::new()
            },
        ),
    ]
}

fn sending_status(t: &Transfer) -> &'static str {
    match t.treatment_status.as_str() {
        "VAL" => "CONFIRM",
        "REJ" => "REJECT",
        _ => "PENDING",
    }
}

fn transfer_json(t: &Transfer) -> Value {
    let mut record = serde_json::Map::new();
    for (k, v) in transfer_fields(t) {
        record.insert(k.into(), json!(v));
    }
    record.insert("amount".into(), json!(t.amount));
    Value::Object(record)
}

fn check_data(t: &Transaction) -> Value {
    json!({
        "amount": t.amount,
        "currency": t.currency,
        "status": t.status,
        "payment_method": t.payment_method,
        "description": t.description,
        "metadata": t.metadata,
        "operator_id": t.operator_id,
        "payment_date": if t.paid() { json!(now_rfc3339()) } else { json!(" ") },
        "fund_availability_date": Value::Null,
    })
}

/// The code-table code of a refusal's message (`600` when not listed).
fn refusal_code(message: &str) -> &'static str {
    match message {
        "INSUFFICIENT_BALANCE" => "602",
        "OTP_CODE_ERROR" => "604",
        "TRANSACTION_CANCEL" => "627",
        _ => "600",
    }
}

/// The code and message a check answers with for a transaction's status.
fn check_code(t: &Transaction) -> (&'static str, String) {
    match t.status.as_str() {
        "ACCEPTED" => ("00", "SUCCES".into()),
        "REFUSED" => (refusal_code(&t.message), t.message.clone()),
        _ => ("662", "WAITING_CUSTOMER_PAYMENT".into()),
    }
}

async fn handle(inner: Arc<CinetPay>, mut req: Received) -> Reply {
    let endpoint: &'static str = match (req.method.as_str(), req.path.trim_end_matches('/')) {
        ("POST", "/v2/payment") => "payment_init",
        ("POST", "/v2/payment/check") => "payment_check",
        ("POST", "/v1/auth/login") => "auth_login",
        ("POST", "/v1/transfer/contact") => "transfer_contact",
        ("POST", "/v1/transfer/money/send/contact") => "transfer_send",
        ("GET", "/v1/transfer/check/money") => "transfer_check",
        ("GET", "/v1/transfer/check/balance") => "transfer_balance",
        _ => return coded(404, "404", "NOT_FOUND", "No such endpoint.", Value::Null),
    };
    if endpoint.starts_with("payment_") {
        identify(&inner, endpoint, &mut req);
    } else {
        identify_transfer(&inner, endpoint, &mut req);
    }
    inner.plumbing.record(endpoint, &req);
    if !endpoint.starts_with("payment_") {
        let work = transfers(inner.clone(), endpoint, req.clone());
        return with_fault_for(&inner.plumbing, endpoint, &req, work).await;
    }
    let work = async {
        let body = req.json().unwrap_or(Value::Null);
        if body["apikey"] != API_KEY {
            return coded(403, "609", "AUTH_NOT_FOUND", "Invalid apikey.", Value::Null);
        }
        if body["site_id"] != SITE_ID {
            return coded(
                403,
                "613",
                "SITE_ID_NOTVALID",
                "Invalid site_id.",
                Value::Null,
            );
        }
        match endpoint {
            "payment_init" => init(&inner, &body),
            _ => {
                let id = body["transaction_id"].as_str().unwrap_or_default();
                match inner.transactions.lock().get(id) {
                    Some(t) => {
                        let (code, message) = check_code(t);
                        coded(200, code, &message, "", check_data(t))
                    }
                    None => coded(404, "404", "NOT_FOUND", "No such transaction.", Value::Null),
                }
            }
        }
    };
    with_fault_for(&inner.plumbing, endpoint, &req, work).await
}

/// What identifies a request: our `transaction_id` and the customer's
/// number (a check's, from its transaction); a link is opened under our id.
fn identify(inner: &CinetPay, endpoint: &str, req: &mut Received) {
    let body = req.json().unwrap_or(Value::Null);
    let text = |k: &str| body[k].as_str().map(str::to_string);
    let id = text("transaction_id");
    if endpoint == "payment_init" {
        req.op_id = id.clone();
    }
    let known_phone = id
        .as_deref()
        .and_then(|i| inner.transactions.lock().get(i).cloned())
        .and_then(|t| t.customer_phone_number);
    req.add_keys(
        [id, text("customer_phone_number"), known_phone]
            .iter()
            .flatten()
            .map(String::as_str),
    );
}

fn required_missing(description: &str) -> Reply {
    coded(
        400,
        "608",
        "MINIMUM_REQUIRED_FIELDS",
        description,
        Value::Null,
    )
}

fn init(inner: &CinetPay, body: &Value) -> Reply {
    let text = |k: &str| body[k].as_str().filter(|s| !s.is_empty());
    let Some(amount) = body["amount"].as_u64() else {
        return required_missing("amount must be an integer");
    };
    if amount % 5 != 0 || amount < 100 {
        return required_missing("amount must be a multiple of 5, at least 100");
    }
    for field in [
        "transaction_id",
        "currency",
        "description",
        "notify_url",
        "return_url",
        "channels",
    ] {
        if text(field).is_none() {
            return required_missing(&format!("{field} is required"));
        }
    }
    let id = text("transaction_id").unwrap().to_string();
    let mut transactions = inner.transactions.lock();
    if transactions.contains_key(&id) {
        return coded(
            400,
            "805",
            "CLIENT_TRANSACTION_ID_EXIST",
            "This transaction_id is already used.",
            Value::Null,
        );
    }
    let token = uuid::Uuid::new_v4().simple().to_string();
    let t = Transaction {
        transaction_id: id.clone(),
        payment_token: token.clone(),
        amount: amount.to_string(),
        currency: text("currency").unwrap().into(),
        notify_url: text("notify_url").unwrap().into(),
        customer_phone_number: text("customer_phone_number").map(str::to_string),
        description: text("description").unwrap().into(),
        metadata: text("metadata").map(str::to_string),
        status: "WAITING_FOR_CUSTOMER".into(),
        message: "WAITING_CUSTOMER_PAYMENT".into(),
        operator_id: None,
        payment_method: None,
    };
    transactions.insert(id, t);
    coded(
        200,
        "201",
        "CREATED",
        "Transaction created with success",
        json!({"payment_token": token,
               "payment_url": format!("https://checkout.cinetpay.com/payment/{token}")}),
    )
}

/// A transfer API envelope.
fn transfer_envelope(
    status: u16,
    code: &str,
    message: &str,
    description: &str,
    data: Value,
) -> Reply {
    let code = if code == "0" { json!(0) } else { json!(code) };
    Reply::json(
        status,
        &json!({"code": code, "message": message, "description": description, "data": data}),
    )
}

/// A transfer API refusal, nothing done: 401 for credentials and tokens, 400 otherwise.
fn transfer_refused(code: &str, message: &str, description: &str) -> Reply {
    let status = if matches!(code, "701" | "705" | "706") {
        401
    } else {
        400
    };
    transfer_envelope(status, code, message, description, json!([]))
}

/// The form fields of a request's body.
fn form_fields(req: &Received) -> HashMap<String, String> {
    url::form_urlencoded::parse(&req.body)
        .into_owned()
        .collect()
}

/// The JSON list in a form's `data` field.
fn form_data(req: &Received) -> Option<Vec<Value>> {
    let data = form_fields(req).remove("data")?;
    match serde_json::from_str(&data).ok()? {
        Value::Array(items) => Some(items),
        item @ Value::Object(_) => Some(vec![item]),
        _ => None,
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// What identifies a transfer API request: our `client_transaction_id` and
/// the beneficiary's number (prefix and phone); a transfer is sent under our id.
fn identify_transfer(inner: &CinetPay, endpoint: &str, req: &mut Received) {
    let mut keys: Vec<String> = Vec::new();
    for item in form_data(req).unwrap_or_default() {
        keys.push(format!("{}{}", text(&item["prefix"]), text(&item["phone"])));
        let ours = text(&item["client_transaction_id"]);
        if endpoint == "transfer_send" && req.op_id.is_none() && !ours.is_empty() {
            req.op_id = Some(ours.clone());
        }
        keys.push(ours);
    }
    if let Some(ours) = req.query_param("client_transaction_id") {
        let ours = url::form_urlencoded::parse(format!("x={ours}").as_bytes())
            .next()
            .map(|(_, v)| v.into_owned())
            .unwrap_or(ours);
        for t in inner.transfers.lock().values() {
            if t.client_transaction_id == ours {
                keys.push(t.receiver());
            }
        }
        keys.push(ours);
    }
    req.add_keys(keys.iter().map(String::as_str));
}

async fn transfers(inner: Arc<CinetPay>, endpoint: &'static str, req: Received) -> Reply {
    if endpoint == "auth_login" {
        let form = form_fields(&req);
        if form.get("apikey").map(String::as_str) != Some(API_KEY)
            || form.get("password").map(String::as_str) != Some(TRANSFER_PASSWORD)
        {
            return transfer_refused(
                "701",
                "INVALID_CREDENTIALS",
                "Identifiant de connexion incorrect",
            );
        }
        let token = uuid::Uuid::new_v4().simple().to_string();
        inner.tokens.lock().insert(token.clone());
        return transfer_envelope(200, "0", "OPERATION_SUCCES", "", json!({"token": token}));
    }
    let token = req.query_param("token").unwrap_or_default();
    if !inner.tokens.lock().contains(&token) {
        return transfer_refused("706", "INVALID_TOKEN", "Votre token est invalide");
    }
    match endpoint {
        "transfer_contact" => add_contacts(&inner, &req),
        "transfer_send" => send_transfers(&inner, &req),
        "transfer_balance" => balance(&inner),
        _ => check_transfers(&inner, &req),
    }
}

fn add_contacts(inner: &CinetPay, req: &Received) -> Reply {
    let Some(items) = form_data(req) else {
        return transfer_refused(
            "718",
            "JSON_PARSE_ERROR",
            "The emitted JSON contains errors",
        );
    };
    let mut answered = Vec::new();
    for mut item in items {
        let (prefix, phone) = (text(&item["prefix"]), text(&item["phone"]));
        let valid = !prefix.is_empty()
            && phone.len() >= 8
            && (prefix.clone() + &phone)
                .bytes()
                .all(|b| b.is_ascii_digit());
        if !valid {
            return transfer_refused(
                "802",
                "INVALID_PHONE",
                "The telephone number entered is invalid",
            );
        }
        let added = inner.contacts.lock().insert(prefix + &phone);
        let (code, status) = if added {
            (0, "success")
        } else {
            (726, "ERROR_PHONE_ALREADY_MY_CONTACT")
        };
        item["code"] = json!(code);
        item["status"] = json!(status);
        item["lot"] = json!(lot());
        answered.push(item);
    }
    transfer_envelope(200, "0", "OPERATION_SUCCES", "", json!([answered]))
}

fn lot() -> String {
    format!("{}", uuid::Uuid::new_v4().as_u128() % 10u128.pow(22))
}

fn send_transfers(inner: &Arc<CinetPay>, req: &Received) -> Reply {
    let Some(items) = form_data(req) else {
        return transfer_refused(
            "718",
            "JSON_PARSE_ERROR",
            "The emitted JSON contains errors",
        );
    };
    let mut new = Vec::new();
    {
        let transfers = inner.transfers.lock();
        let contacts = inner.contacts.lock();
        for item in &items {
            let (prefix, phone) = (text(&item["prefix"]), text(&item["phone"]));
            let ours = text(&item["client_transaction_id"]);
            let Some(amount) = text(&item["amount"]).parse::<u64>().ok().filter(|a| *a > 0) else {
                return transfer_refused("801", "INVALID_AMOUNT", "The amount entered is invalid");
            };
            if text(&item["notify_url"]).is_empty() {
                return transfer_refused(
                    "725",
                    "MISSING_NOTIFY_URL",
                    "Vous devez mentionner une url de notification valide",
                );
            }
            if !contacts.contains(&format!("{prefix}{phone}")) {
                return transfer_refused(
                    "724",
                    "ERROR_PHONE_NOT_MY_CONTACT",
                    "The phone number does not exist in the list of your CinetPay contacts",
                );
            }
            if ours.is_empty()
                || transfers.values().any(|t| t.client_transaction_id == ours)
                || new
                    .iter()
                    .any(|t: &Transfer| t.client_transaction_id == ours)
            {
                return transfer_refused(
                    "805",
                    "CLIENT_TRANSACTION_ID_EXIST",
                    "Your transaction ID already exists on CinetPay",
                );
            }
            new.push(Transfer {
                transaction_id: format!("TR{}", &uuid::Uuid::new_v4().simple().to_string()[..16]),
                client_transaction_id: ours,
                lot: lot(),
                prefix,
                phone,
                amount,
                notify_url: text(&item["notify_url"]),
                treatment_status: "NEW".into(),
                comment: String::new(),
                operator_transaction_id: None,
            });
        }
    }
    let total: u64 = new.iter().map(|t| t.amount).sum();
    {
        let mut balance = inner.balance.lock();
        if let Some(left) = *balance {
            if left < total {
                return transfer_refused(
                    "602",
                    "INSUFFICIENT_BALANCE",
                    "Your CinetPay transfer balance is insufficient to perform this operation",
                );
            }
            *balance = Some(left - total);
        }
    }
    let mut answered = Vec::new();
    for t in new {
        let mut record = transfer_json(&t);
        record["code"] = json!(0);
        record["status"] = json!("success");
        record["prefix"] = json!(t.prefix);
        record["phone"] = json!(t.phone);
        record["notify_url"] = json!(t.notify_url);
        answered.push(record);
        let id = t.transaction_id.clone();
        let outcome = inner.plumbing.outcomes.of(&t.receiver());
        inner.transfers.lock().insert(id.clone(), t);
        let (settle, delay) = (inner.clone(), inner.plumbing.settle_delay());
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            decide_transfer(&settle, &id, outcome).await;
        });
    }
    transfer_envelope(200, "0", "OPERATION_SUCCES", "", json!([answered]))
}

/// A `NEW` transfer becomes final by `outcome` (`Stay`: it does not);
/// then its notification, as the kit's callback mode says.
async fn decide_transfer(inner: &CinetPay, id: &str, outcome: Outcome) {
    let settled = {
        let mut transfers = inner.transfers.lock();
        let Some(t) = transfers.get_mut(id) else {
            return;
        };
        if t.treatment_status != "NEW" {
            return;
        }
        match outcome {
            Outcome::Succeed => {
                t.treatment_status = "VAL".into();
                t.operator_transaction_id = Some(format!(
                    "MP{}",
                    &uuid::Uuid::new_v4().simple().to_string()[..12]
                ));
            }
            Outcome::Fail(reason) => {
                t.treatment_status = "REJ".into();
                t.comment = reason.into();
            }
            Outcome::Stay => return,
        }
        t.clone()
    };
    inner
        .plumbing
        .dispatch(
            "POST",
            &settled.notify_url,
            || {
                vec![(
                    "content-type".to_string(),
                    "application/x-www-form-urlencoded".to_string(),
                )]
            },
            form(&transfer_fields(&settled)),
            DELIVERY,
        )
        .await;
}

/// The transfer account: what is `available` (the balance set, else
/// [`PLENTY`]), what transfers on their way hold (`inUsing`), and the sum
/// (`amount`).
fn balance(inner: &CinetPay) -> Reply {
    let available = inner.balance.lock().unwrap_or(PLENTY);
    let in_using: u64 = inner
        .transfers
        .lock()
        .values()
        .filter(|t| t.treatment_status == "NEW")
        .map(|t| t.amount)
        .sum();
    transfer_envelope(
        200,
        "0",
        "OPERATION_SUCCES",
        "Traitement effectué avec succès",
        json!({"amount": available + in_using, "inUsing": in_using, "available": available}),
    )
}

/// The transfer balance when no test sets one.
pub const PLENTY: u64 = 100_000_000;

fn check_transfers(inner: &CinetPay, req: &Received) -> Reply {
    let ours = req
        .query_param("client_transaction_id")
        .map(|v| {
            url::form_urlencoded::parse(format!("x={v}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or(v)
        })
        .unwrap_or_default();
    let found: Vec<Value> = inner
        .transfers
        .lock()
        .values()
        .filter(|t| t.client_transaction_id == ours)
        .map(transfer_json)
        .collect();
    if found.is_empty() {
        return transfer_refused("723", "NOT_FOUND", "No results for this search");
    }
    transfer_envelope(200, "0", "OPERATION_SUCCES", "", json!(found))
}
