//! A fake CinetPay Payment API v2, from CinetPay's documentation
//! (docs.cinetpay.com, "Payment API": initialisation, notification,
//! transaction verification, X-TOKEN HMAC, code table):
//!
//! - `POST /v2/payment`: JSON with `apikey`, `site_id`, `transaction_id`
//!   (unique), `amount` (an integer, a multiple of 5), `currency`,
//!   `description`, `notify_url`, `return_url`, `channels`; answers
//!   `{code: "201", message: "CREATED", data: {payment_token, payment_url}}`.
//! - `POST /v2/payment/check`: JSON with `apikey`, `site_id`,
//!   `transaction_id`; answers `{code, message, data: {amount, currency,
//!   status, payment_method, operator_id, payment_date, …}}`, the amount a
//!   string, `status` `ACCEPTED`, `REFUSED` or `WAITING_FOR_CUSTOMER`.
//! - The notification: a form POST to the payment's `notify_url` with the
//!   `cpm_*` fields and `x-token`, the hex HMAC-SHA256 with the merchant's
//!   Secret Key of these fields concatenated in this order: `cpm_site_id`,
//!   `cpm_trans_id`, `cpm_trans_date`, `cpm_amount`, `cpm_currency`,
//!   `signature`, `payment_method`, `cel_phone_num`, `cpm_phone_prefixe`,
//!   `cpm_language`, `cpm_version`, `cpm_payment_config`, `cpm_page_action`,
//!   `cpm_custom`, `cpm_designation`, `cpm_error_message`.
//!
//! Where the documentation is silent this fake says what it chose: a wrong
//! `apikey` or `site_id` is answered 403 with code `609 AUTH_NOT_FOUND` or
//! `613 SITE_ID_NOTVALID` (the codes are CinetPay's, the HTTP status this
//! fake's); a `transaction_id` used twice is refused 400 with
//! `CLIENT_TRANSACTION_ID_EXIST` (the name CinetPay's transfer API gives it);
//! a check of an unknown `transaction_id` is answered 404.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use mmc_domain::http::encode_component;
use mmc_host::config::ComponentConfig;
use parking_lot::Mutex;
use serde_json::{Value, json};
use sha2::Sha256;

use super::{Delivery, Fault, Plumbing, Received, Reply, now_rfc3339, with_fault_for};

pub const API_KEY: &str = "12912847765bc0db748fdd44.fakekey";
pub const SITE_ID: &str = "445160";
pub const SECRET_KEY: &str = "cinetpay_fake_secret_key_0123456789";

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

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Notifications {
    Send,
    /// Lost on the way.
    Lost,
    /// Delivered twice.
    Duplicate,
    /// Delivered after this delay (after a poll may have settled it).
    Late(Duration),
}

struct Inner {
    plumbing: Plumbing,
    transactions: Mutex<HashMap<String, Transaction>>,
    notifications: Mutex<Notifications>,
}

pub struct FakeCinetPay {
    pub addr: std::net::SocketAddr,
    inner: Arc<Inner>,
}

/// CinetPay's notification delivery: its documentation says the
/// notification URL must answer `200 OK` and is called after every change
/// of a transaction's status, but gives no timeout or retry schedule.
/// Conservative rule: 5 s to answer `200`, 3 attempts in all.
pub const DELIVERY: Delivery = Delivery {
    patience: Duration::from_secs(5),
    attempts: 3,
    pause: Duration::from_millis(200),
    only_200: true,
};

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

/// The `x-token` of a notification's fields, signed with `secret`.
pub fn x_token(secret: &str, fields: &[(&str, String)]) -> String {
    const ORDER: [&str; 16] = [
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
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    for name in ORDER {
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

impl FakeCinetPay {
    pub async fn start() -> FakeCinetPay {
        let inner = Arc::new(Inner {
            plumbing: Plumbing::default(),
            transactions: Mutex::new(HashMap::new()),
            notifications: Mutex::new(Notifications::Send),
        });
        let handler_inner = inner.clone();
        let addr = super::serve(Arc::new(move |req| {
            let inner = handler_inner.clone();
            Box::pin(async move { handle(inner, req).await })
        }))
        .await;
        FakeCinetPay { addr, inner }
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The `cinetpay` adapter's configuration for this fake.
    pub fn component_config(&self) -> ComponentConfig {
        let mut c = ComponentConfig {
            allowed_hosts: vec![self.addr.to_string()],
            ..Default::default()
        };
        c.settings.insert("base_url".into(), self.base_url());
        c.settings.insert("site_id".into(), SITE_ID.into());
        c.secrets.insert("api_key".into(), API_KEY.into());
        c.secrets.insert("secret_key".into(), SECRET_KEY.into());
        c
    }

    pub fn notifications(&self, mode: Notifications) {
        *self.inner.notifications.lock() = mode;
    }

    /// Endpoints: `payment_init`, `payment_check`.
    pub fn inject(&self, endpoint: &'static str, fault: Fault, times: usize) {
        self.inner.plumbing.inject(endpoint, fault, times);
    }

    /// The next `times` requests to `endpoint` about `key` (our
    /// `transaction_id`, or the customer's number) get `fault`.
    pub fn inject_for(&self, endpoint: &'static str, key: &str, fault: Fault, times: usize) {
        self.inner.plumbing.inject_for(endpoint, key, fault, times);
    }

    pub fn faults_left(&self, endpoint: &str, key: &str) -> usize {
        self.inner.plumbing.faults_left(endpoint, key)
    }

    pub fn requests(&self, endpoint: &str) -> Vec<Received> {
        self.inner.plumbing.requests(endpoint)
    }

    pub fn requests_for(&self, endpoint: &str, key: &str) -> Vec<Received> {
        self.inner.plumbing.requests_for(endpoint, key)
    }

    /// Distinct `transaction_id`s of the initialisations about `key`.
    pub fn ids_for(&self, endpoint: &str, key: &str) -> std::collections::BTreeSet<String> {
        self.inner.plumbing.ids_for(endpoint, key)
    }

    pub fn transaction(&self, transaction_id: &str) -> Option<Transaction> {
        self.inner.transactions.lock().get(transaction_id).cloned()
    }

    pub fn transactions(&self) -> Vec<Transaction> {
        self.inner.transactions.lock().values().cloned().collect()
    }

    /// Notifications sent so far: (url, status our service answered).
    pub fn notifications_sent(&self) -> Vec<(String, u16)> {
        self.inner.plumbing.callbacks()
    }

    /// CinetPay's books say another amount for this transaction: every
    /// later check and notification about it carries that amount.
    pub fn set_amount(&self, transaction_id: &str, amount: &str) {
        if let Some(t) = self.inner.transactions.lock().get_mut(transaction_id) {
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
        let mut transactions = self.inner.transactions.lock();
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
        if let Some(t) = self.inner.transactions.lock().get_mut(transaction_id) {
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

    /// Sends the transaction's notification as it stands, honouring the
    /// notification mode, each delivery under [`DELIVERY`].
    pub async fn notify(&self, transaction_id: &str) -> Vec<u16> {
        let mode = *self.inner.notifications.lock();
        let times = match mode {
            Notifications::Lost => return Vec::new(),
            Notifications::Duplicate => 2,
            Notifications::Send => 1,
            Notifications::Late(delay) => {
                tokio::time::sleep(delay).await;
                1
            }
        };
        let fields = self.fields(transaction_id);
        let url = self.transaction(transaction_id).unwrap().notify_url;
        let body = form(&fields);
        let token = x_token(SECRET_KEY, &fields);
        let mut answers = Vec::new();
        for _ in 0..times {
            let headers = || {
                vec![
                    ("x-token".to_string(), token.clone()),
                    (
                        "content-type".to_string(),
                        "application/x-www-form-urlencoded".to_string(),
                    ),
                ]
            };
            answers.extend(
                self.inner
                    .plumbing
                    .deliver("POST", &url, headers, body.clone(), DELIVERY)
                    .await,
            );
        }
        answers
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
        self.inner
            .plumbing
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
        "payment_date": if t.paid() { json!(now_rfc3339()) } else { Value::Null },
        "fund_availability_date": Value::Null,
    })
}

/// The code and message a check answers with for a transaction's status.
fn check_code(t: &Transaction) -> (&'static str, String) {
    match t.status.as_str() {
        "ACCEPTED" => ("00", "SUCCES".into()),
        "REFUSED" => ("600", t.message.clone()),
        _ => ("662", "WAITING_CUSTOMER_PAYMENT".into()),
    }
}

async fn handle(inner: Arc<Inner>, mut req: Received) -> Reply {
    let endpoint: &'static str = match (req.method.as_str(), req.path.trim_end_matches('/')) {
        ("POST", "/v2/payment") => "payment_init",
        ("POST", "/v2/payment/check") => "payment_check",
        _ => return coded(404, "404", "NOT_FOUND", "No such endpoint.", Value::Null),
    };
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
        [id.clone(), text("customer_phone_number"), known_phone]
            .iter()
            .flatten()
            .map(String::as_str),
    );
    inner.plumbing.record(endpoint, &req);
    let work = async {
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
            _ => match id.and_then(|i| inner.transactions.lock().get(&i).cloned()) {
                Some(t) => {
                    let (code, message) = check_code(&t);
                    coded(200, code, &message, "", check_data(&t))
                }
                None => coded(404, "404", "NOT_FOUND", "No such transaction.", Value::Null),
            },
        }
    };
    with_fault_for(&inner.plumbing, endpoint, &req, work).await
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

fn init(inner: &Inner, body: &Value) -> Reply {
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
