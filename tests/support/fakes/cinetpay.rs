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
//! Endpoints (for `inject`): `payment_init`, `payment_check`. `inject_for`
//! matches our `transaction_id` or the customer's number
//! (`customer_phone_number`, also on the checks of its transaction);
//! `ids_for` counts the `transaction_id`s links were opened under.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use hmac::{Hmac, Mac};
use mmc_domain::http::encode_component;
use mmc_host::config::ComponentConfig;
use parking_lot::Mutex;
use serde_json::{Value, json};
use sha2::Sha256;

use super::{
    Delivery, FakeServer, Fault, Plumbing, Received, Reply, Wire, now_rfc3339, with_fault_for,
};

pub const API_KEY: &str = "12912847765bc0db748fdd44.fakekey";
pub const SITE_ID: &str = "445160";
pub const SECRET_KEY: &str = "cinetpay_fake_secret_key_0123456789";

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

/// CinetPay's state: its payment links by `transaction_id`.
pub struct CinetPay {
    plumbing: Plumbing,
    transactions: Mutex<HashMap<String, Transaction>>,
}

/// A fake CinetPay server (the kit's [`FakeServer`] over [`CinetPay`]). Its
/// notifications go to the `notify_url` each payment names.
pub type FakeCinetPay = FakeServer<CinetPay>;

impl Wire for CinetPay {
    fn new() -> CinetPay {
        CinetPay {
            plumbing: Plumbing::default(),
            transactions: Mutex::new(HashMap::new()),
        }
    }

    fn plumbing(&self) -> &Plumbing {
        &self.plumbing
    }

    fn handle(self: Arc<Self>, req: Received) -> BoxFuture<'static, Reply> {
        Box::pin(handle(self, req))
    }

    /// The `cinetpay` adapter's site, API key and Secret Key.
    fn configure(&self, c: &mut ComponentConfig) {
        c.settings.insert("site_id".into(), SITE_ID.into());
        c.secrets.insert("api_key".into(), API_KEY.into());
        c.secrets.insert("secret_key".into(), SECRET_KEY.into());
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
        _ => return coded(404, "404", "NOT_FOUND", "No such endpoint.", Value::Null),
    };
    identify(&inner, endpoint, &mut req);
    inner.plumbing.record(endpoint, &req);
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
