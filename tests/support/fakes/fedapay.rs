//! A fake FedaPay v1 API, written from FedaPay's documentation
//! (docs.fedapay.com: collects, no-redirect payments, payouts, webhooks) and
//! its official libraries (fedapay-node, fedapay-php):
//!
//! - `POST /v1/transactions` `{description, amount (whole number), currency:
//!   {iso}, callback_url?, customer?, custom_metadata?}` → `{"v1/transaction":
//!   {id, reference, status: "pending", …}}`; `POST /v1/transactions/{id}/token`
//!   → `{token, url}` (the payment page); `POST /v1/{mode}` `{token,
//!   phone_number?: {number, country}}` pushes the payment to the phone in one
//!   of the documented no-redirect modes (the API reference writes the path
//!   `/v1/transactions/{mode}`: both are served). The customer approves or
//!   declines by phone digits (the kit's [`Outcomes`](super::Outcomes)), or pays on the page on command.
//! - `GET /v1/transactions/{id}`, `GET /v1/transactions` (`per_page`,
//!   `page`), `GET /v1/transactions/search?search=` (how FedaPay matches is
//!   not documented: here a substring of the reference, description, id or a
//!   `custom_metadata` value).
//! - Payouts: `POST /v1/payouts` (pending, nothing sent), `PUT
//!   /v1/payouts/start` `{payouts: [{id, send_now}]}` sends it (at most 3 to
//!   one number in 24 h, as FedaPay's dashboard docs say), `GET
//!   /v1/payouts/{id}`, `GET /v1/payouts`, `GET /v1/payouts/search?search=`.
//! - Webhooks to the one URL set "in the dashboard": `{id, name:
//!   "transaction.created|approved|declined|canceled", object, object_id,
//!   entity}` signed `X-FEDAPAY-SIGNATURE: t=<ts>,s=<hex HMAC-SHA256(secret,
//!   "<ts>.<body>")>`. No refund or cancel endpoint: FedaPay documents none.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use mmc_config::ComponentConfig;
use parking_lot::Mutex;
use serde_json::{Value, json};
use sha2::Sha256;

use futures::future::BoxFuture;

use super::{
    Delivery, FakeServer, Fault, Outcome, Plumbing, Received, Reply, Wire, now_rfc3339,
    with_fault_for,
};

pub const SECRET_KEY: &str = "sk_live_FAKEfedapay0123456789abcdef";
pub const WEBHOOK_SECRET: &str = "wh_live_FAKEfedapaySecret0123456789";
/// Where the token's payment page lives (as in FedaPay's library tests).
pub const PAGE_BASE: &str = "https://process.fedapay.com/";
/// The no-redirect modes FedaPay documents (payment methods page, and the
/// lists in its libraries).
pub const MODES: &[&str] = &[
    "mtn_open",
    "moov",
    "sbin",
    "moov_tg",
    "togocel",
    "mtn_ci",
    "airtel_ne",
    "free_sn",
    "mtn_open_gn",
    "mtn",
    "mtn_ecw",
    "mtn_open_ci",
    "wave_direct_ci",
];
const PAID: &[&str] = &[
    "approved",
    "transferred",
    "refunded",
    "approved_partially_refunded",
    "transferred_partially_refunded",
];
/// FedaPay: no more than 3 payouts to one Mobile Money number in 24 hours.
const PAYOUTS_PER_NUMBER: usize = 3;

#[derive(Clone, Debug)]
pub struct Transaction {
    pub id: u64,
    pub reference: String,
    pub amount: u64,
    pub description: String,
    pub callback_url: Option<String>,
    /// `pending`, `approved`, `declined`, `canceled` (…).
    pub status: String,
    pub custom_metadata: Value,
    /// Digits of the customer's number, once known.
    pub phone: Option<String>,
    /// The mode it was pushed (or paid) in.
    pub mode: Option<String>,
    pub tokens: Vec<String>,
    /// Pushes accepted for it (a second one re-prompts the same transaction).
    pub pushes: u32,
    pub last_error_code: Option<String>,
    pub created_at: String,
}

impl Transaction {
    /// Money moved: the customer paid this transaction.
    pub fn paid(&self) -> bool {
        PAID.contains(&self.status.as_str())
    }

    /// The id the merchant put in `custom_metadata.mmc_id`.
    pub fn our_id(&self) -> Option<String> {
        self.custom_metadata["mmc_id"].as_str().map(str::to_string)
    }
}

#[derive(Clone, Debug)]
pub struct Payout {
    pub id: u64,
    pub reference: String,
    pub amount: u64,
    pub mode: String,
    /// Digits of the recipient's number.
    pub phone: String,
    pub firstname: Option<String>,
    pub lastname: Option<String>,
    /// `pending` (created), `started`, `sent`, `failed`.
    pub status: String,
    pub custom_metadata: Value,
    pub last_error_code: Option<String>,
    pub started_at: Option<SystemTime>,
    pub created_at: String,
}

impl Payout {
    /// Money moved: the recipient was paid.
    pub fn sent(&self) -> bool {
        self.status == "sent"
    }

    pub fn our_id(&self) -> Option<String> {
        self.custom_metadata["mmc_id"].as_str().map(str::to_string)
    }
}

/// FedaPay's state: transactions, payouts, the search's behaviour and the
/// account's modes.
pub struct FedaPay {
    plumbing: Plumbing,
    transactions: Mutex<BTreeMap<u64, Transaction>>,
    payouts: Mutex<BTreeMap<u64, Payout>>,
    next_id: AtomicU64,
    /// Whether the search looks into `custom_metadata` (FedaPay does not say).
    search_metadata: AtomicBool,
    /// What `GET /v1/currencies` lists for XOF: the modes this account can use.
    xof_modes: Mutex<Vec<String>>,
    /// Money put on the account other than by its collections (a merchant's
    /// top-up), per mode: added to what `GET /v1/balances` says.
    top_ups: Mutex<BTreeMap<String, u64>>,
}

/// The no-redirect modes FedaPay's payment-methods page documents for
/// Benin, Togo and Côte d'Ivoire
/// (https://docs.fedapay.com/payment-methods/en/payment-methods-en).
const DOCUMENTED_MODES: &[&str] = &["mtn_open", "moov", "sbin", "togocel", "moov_tg", "mtn_ci"];

/// A fake FedaPay v1 server (the kit's [`FakeServer`] over [`FedaPay`]).
/// Its webhooks go to the URL set with `set_callback_url` (the dashboard).
pub type FakeFedaPay = FakeServer<FedaPay>;

impl Wire for FedaPay {
    fn new() -> FedaPay {
        FedaPay {
            plumbing: Plumbing::default(),
            transactions: Mutex::new(BTreeMap::new()),
            payouts: Mutex::new(BTreeMap::new()),
            next_id: AtomicU64::new(104_000),
            search_metadata: AtomicBool::new(true),
            xof_modes: Mutex::new(DOCUMENTED_MODES.iter().map(|m| m.to_string()).collect()),
            top_ups: Mutex::new(BTreeMap::new()),
        }
    }

    fn plumbing(&self) -> &Plumbing {
        &self.plumbing
    }

    fn handle(self: Arc<Self>, req: Received) -> BoxFuture<'static, Reply> {
        Box::pin(handle(self, req))
    }

    /// The `fedapay` adapter's secret key and webhook secret.
    fn configure(&self, c: &mut ComponentConfig) {
        c.secrets.insert("secret_key".into(), SECRET_KEY.into());
        c.secrets
            .insert("webhook_secret".into(), WEBHOOK_SECRET.into());
    }
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

pub fn now() -> u64 {
    now_s()
}

fn random(n: usize) -> String {
    uuid::Uuid::new_v4().simple().to_string()[..n].to_string()
}

/// `X-FEDAPAY-SIGNATURE` for `body` signed at `timestamp` with `secret`.
pub fn signature(secret: &str, timestamp: u64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{timestamp}.").as_bytes());
    mac.update(body);
    format!(
        "t={timestamp},s={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

fn digits(s: &str) -> String {
    s.chars().filter(char::is_ascii_digit).collect()
}

/// FedaPay's webhook delivery. Its webhook pages
/// (https://docs.fedapay.com/integration-api/en/webhooks-en,
/// https://docs.fedapay.com/development/webhooks) say the Event is POSTed to
/// every endpoint URL set in the dashboard, and how to check its signature,
/// but nothing findable about how long FedaPay waits for the answer or
/// whether it tries again. Conservative rule: 3 s to answer with a 2xx, 3
/// attempts in all, each signed when it is sent.
pub const DELIVERY: Delivery = Delivery {
    patience: Duration::from_secs(3),
    attempts: 3,
    pause: Duration::from_millis(200),
    only_200: false,
};

/// FedaPay refusing a partner for the partner's own doing, before doing
/// anything, in its `{message, errors}` shape (401's message as this fake
/// answers a wrong key; the others are this fake's wording).
pub fn refusal(status: u16) -> Fault {
    let message = match status {
        401 => "Unauthenticated. Check your API key.",
        403 => "This action is unauthorized for this account.",
        404 => "Not Found",
        429 => "Too Many Attempts.",
        _ => "Refused.",
    };
    Fault::Reply(error(status, message, Value::Null))
}

fn error(status: u16, message: &str, errors: Value) -> Reply {
    Reply::json(status, &json!({"message": message, "errors": errors}))
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
                continue;
            }
            (b'+', _) => out.push(b' '),
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn transaction_json(t: &Transaction) -> Value {
    let at = |s: &str| (t.status == s).then(now_rfc3339);
    json!({
        "klass": "v1/transaction",
        "id": t.id,
        "reference": t.reference,
        "amount": t.amount,
        "description": t.description,
        "callback_url": t.callback_url,
        "status": t.status,
        "customer_id": 1,
        "currency_id": 1,
        "mode": t.mode,
        "metadata": {},
        "custom_metadata": t.custom_metadata,
        "commission": 0,
        "fees": 0,
        "amount_transferred": if t.paid() { json!(t.amount) } else { Value::Null },
        "amount_debited": if t.paid() { json!(t.amount) } else { Value::Null },
        "last_error_code": t.last_error_code,
        "transaction_key": format!("{}{}", t.id, t.reference),
        "merchant_reference": Value::Null,
        "created_at": t.created_at,
        "updated_at": now_rfc3339(),
        "approved_at": at("approved"),
        "declined_at": at("declined"),
        "canceled_at": at("canceled"),
    })
}

fn payout_json(p: &Payout) -> Value {
    json!({
        "klass": "v1/payout",
        "id": p.id,
        "reference": p.reference,
        "amount": p.amount,
        "status": p.status,
        "mode": p.mode,
        "currency_id": 1,
        "customer": {"firstname": p.firstname, "lastname": p.lastname,
                     "phone_number": {"number": format!("+{}", p.phone)}},
        "custom_metadata": p.custom_metadata,
        "last_error_code": p.last_error_code,
        "last_error_message": p.last_error_code.as_ref().map(|c| format!("The payout failed: {c}")),
        "scheduled_at": p.started_at.map(|_| now_rfc3339()),
        "sent_at": (p.status == "sent").then(now_rfc3339),
        "failed_at": (p.status == "failed").then(now_rfc3339),
        "created_at": p.created_at,
    })
}

/// FedaPay's own: modes, transactions, payouts, the customer on the phone
/// or the page, webhooks on demand. Endpoints (for `inject`):
/// `transaction_create`, `token`, `push`, `transaction_get`,
/// `transaction_list`, `transaction_search`, `payout_create`,
/// `payout_start`, `payout_get`, `payout_list`, `payout_search`. Faults by
/// `inject_for` match our id (`custom_metadata.mmc_id`), FedaPay's id of the
/// transaction or payout, the customer's MSISDN, or a search term;
/// `ids_for` counts our id for `transaction_create` / `payout_create`,
/// FedaPay's transaction id for `push` (more than one: two transactions
/// pushed for one payment), the payout id for `payout_start`.
impl FakeFedaPay {
    /// The modes `GET /v1/currencies` lists for XOF from now on.
    pub fn set_xof_modes(&self, modes: &[&str]) {
        *self.wire().xof_modes.lock() = modes.iter().map(|m| m.to_string()).collect();
    }

    /// The merchant tops up every documented mode's balance by `amount` XOF.
    pub fn top_up(&self, amount: u64) {
        let mut top_ups = self.wire().top_ups.lock();
        for mode in DOCUMENTED_MODES {
            *top_ups.entry(mode.to_string()).or_default() += amount;
        }
    }

    /// How FedaPay's search matches is not documented: from now on it does
    /// not look into `custom_metadata` (only the list can find our id).
    pub fn search_ignores_custom_metadata(&self) {
        self.wire().search_metadata.store(false, Ordering::SeqCst);
    }

    /// The operator's books say another amount for this operation (a
    /// customer who paid another sum on a USSD menu, a provider's bug):
    /// every later answer and callback about it carries that amount.
    pub fn set_amount(&self, id: &str, amount: u64) {
        let Ok(id) = id.parse::<u64>() else { return };
        if let Some(t) = self.wire().transactions.lock().get_mut(&id) {
            t.amount = amount;
        }
    }

    pub fn transaction(&self, id: &str) -> Option<Transaction> {
        let id: u64 = id.parse().ok()?;
        self.wire().transactions.lock().get(&id).cloned()
    }

    pub fn transactions(&self) -> Vec<Transaction> {
        self.wire().transactions.lock().values().cloned().collect()
    }

    /// Every transaction created with our id in `custom_metadata`.
    pub fn transactions_for(&self, our_id: &str) -> Vec<Transaction> {
        self.transactions()
            .into_iter()
            .filter(|t| t.our_id().as_deref() == Some(our_id))
            .collect()
    }

    pub fn payout(&self, id: &str) -> Option<Payout> {
        let id: u64 = id.parse().ok()?;
        self.wire().payouts.lock().get(&id).cloned()
    }

    pub fn payouts(&self) -> Vec<Payout> {
        self.wire().payouts.lock().values().cloned().collect()
    }

    /// The customer pays on FedaPay's page (or approves a push) now: the
    /// transaction is approved and `transaction.approved` sent. Returns our
    /// answers; none if it was no longer pending.
    pub async fn customer_pays(&self, id: &str) -> Vec<u16> {
        self.customer_acts(id, Outcome::Succeed).await
    }

    /// The customer acts now on a pending transaction, whatever its script.
    pub async fn customer_acts(&self, id: &str, outcome: Outcome) -> Vec<u16> {
        let Ok(id) = id.parse() else {
            return Vec::new();
        };
        decide(self.wire(), id, outcome).await
    }

    /// FedaPay changes a transaction (no webhook).
    pub fn set_status(&self, id: &str, status: &str, code: Option<&str>) {
        let Ok(id) = id.parse::<u64>() else { return };
        if let Some(t) = self.wire().transactions.lock().get_mut(&id) {
            t.status = status.into();
            t.last_error_code = code.map(str::to_string);
        }
    }

    /// Sends the event `name` about transaction `id` as it stands, signed
    /// with `secret` at `timestamp`. Returns our answer.
    pub async fn notify_signed_with(
        &self,
        name: &str,
        id: &str,
        secret: &str,
        timestamp: u64,
    ) -> u16 {
        let body = self.event(name, id);
        let header = signature(secret, timestamp, &body);
        self.send_webhook(body, Some(header)).await
    }

    /// The event body FedaPay would send about transaction `id`.
    pub fn event(&self, name: &str, id: &str) -> Vec<u8> {
        let t = self.transaction(id).expect("known transaction");
        event_body(name, "transaction", t.id, transaction_json(&t))
    }

    /// POSTs `body` to the dashboard URL with this `X-FEDAPAY-SIGNATURE`.
    pub async fn send_webhook(&self, body: Vec<u8>, signature: Option<String>) -> u16 {
        let url = self
            .plumbing()
            .dashboard_url()
            .expect("webhook URL configured");
        let headers = signature
            .map(|s| vec![("X-FEDAPAY-SIGNATURE".to_string(), s)])
            .unwrap_or_default();
        self.plumbing().call_back("POST", &url, headers, body).await
    }
}

fn event_body(name: &str, object: &str, object_id: u64, entity: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "id": now_s() * 1000 + u64::from(rand_u16()),
        "name": name,
        "object": object,
        "object_id": object_id,
        "entity": entity,
        "created_at": now_rfc3339(),
    }))
    .unwrap()
}

fn rand_u16() -> u16 {
    uuid::Uuid::new_v4().as_bytes()[0] as u16 * 256 + uuid::Uuid::new_v4().as_bytes()[1] as u16
}

/// Sends `name` about the transaction as it stands, honouring the webhook
/// mode. Returns our answers.
async fn notify(inner: &Arc<FedaPay>, name: &str, id: u64) -> Vec<u16> {
    let Some(url) = inner.plumbing.dashboard_url() else {
        return Vec::new();
    };
    let Some(t) = inner.transactions.lock().get(&id).cloned() else {
        return Vec::new();
    };
    let body = event_body(name, "transaction", id, transaction_json(&t));
    let sign = || {
        vec![(
            "X-FEDAPAY-SIGNATURE".to_string(),
            signature(WEBHOOK_SECRET, now_s(), &body),
        )]
    };
    inner
        .plumbing
        .dispatch("POST", &url, sign, body.clone(), DELIVERY)
        .await
}

/// A pending transaction becomes final with `outcome` (`Stay`: it does
/// not), then its webhook.
async fn decide(inner: &Arc<FedaPay>, id: u64, outcome: Outcome) -> Vec<u16> {
    let name = {
        let mut transactions = inner.transactions.lock();
        let Some(t) = transactions.get_mut(&id) else {
            return Vec::new();
        };
        if t.status != "pending" {
            return Vec::new();
        }
        match outcome {
            Outcome::Succeed => {
                t.status = "approved".into();
                t.last_error_code = Some("NO_ERROR".into());
                t.mode.get_or_insert_with(|| "page".into());
                "transaction.approved"
            }
            Outcome::Fail(code) => {
                t.status = "declined".into();
                t.last_error_code = Some(code.into());
                "transaction.declined"
            }
            Outcome::Stay => return Vec::new(),
        }
    };
    notify(inner, name, id).await
}

fn endpoint_of(method: &str, segments: &[&str]) -> Option<&'static str> {
    let numeric = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    Some(match (method, segments) {
        ("POST", ["v1", "transactions"]) => "transaction_create",
        ("GET", ["v1", "transactions"]) => "transaction_list",
        ("GET", ["v1", "transactions", "search"]) => "transaction_search",
        ("GET", ["v1", "transactions", id]) if numeric(id) => "transaction_get",
        ("POST", ["v1", "transactions", id, "token"]) if numeric(id) => "token",
        ("POST", ["v1", "transactions", mode]) if !numeric(mode) => "push",
        ("GET", ["v1", "currencies"]) => "currencies",
        ("GET", ["v1", "balances"]) => "balances",
        ("POST", ["v1", "payouts"]) => "payout_create",
        ("PUT", ["v1", "payouts", "start"]) => "payout_start",
        ("GET", ["v1", "payouts"]) => "payout_list",
        ("GET", ["v1", "payouts", "search"]) => "payout_search",
        ("GET", ["v1", "payouts", id]) if numeric(id) => "payout_get",
        ("POST", ["v1", mode]) if !["payouts", "customers", "webhooks"].contains(mode) => "push",
        _ => return None,
    })
}

async fn handle(inner: Arc<FedaPay>, mut req: Received) -> Reply {
    let path = req.path.trim_matches('/').to_string();
    let segments: Vec<&str> = path.split('/').collect();
    let Some(endpoint) = endpoint_of(&req.method, &segments) else {
        return error(404, "Not Found", Value::Null);
    };
    identify(&inner, endpoint, &segments, &mut req);
    inner.plumbing.record(endpoint, &req);
    let work = async {
        if req.header("Authorization") != Some(format!("Bearer {SECRET_KEY}").as_str()) {
            return error(401, "Unauthenticated. Check your API key.", Value::Null);
        }
        let id = |i: usize| -> u64 { segments.get(i).and_then(|s| s.parse().ok()).unwrap_or(0) };
        match endpoint {
            // A bare array, as the API reference shows it; XOF with its modes.
            "currencies" => Reply::json(
                200,
                &json!([
                    {"id": 1, "name": "FCFA", "iso": "XOF", "code": 952, "prefix": null,
                     "suffix": "FCFA", "div": 1, "modes": *inner.xof_modes.lock()},
                    {"id": 2, "name": "GNF", "iso": "GNF", "code": 324, "prefix": null,
                     "suffix": "GNF", "div": 1, "modes": ["mtn_open"]}
                ]),
            ),
            "balances" => Reply::json(200, &json!({"v1/balances": balances(&inner)})),
            "transaction_create" => create_transaction(&inner, &req),
            "token" => token(&inner, id(2)),
            "push" => push(&inner, segments.last().copied().unwrap_or_default(), &req),
            "transaction_get" => match inner.transactions.lock().get(&id(2)) {
                Some(t) => Reply::json(200, &json!({"v1/transaction": transaction_json(t)})),
                None => error(404, "Transaction not found", Value::Null),
            },
            "transaction_list" | "transaction_search" => {
                let wanted = search_term(&req);
                let (per_page, page) = paging(&req);
                let found: Vec<Value> = inner
                    .transactions
                    .lock()
                    .values()
                    .rev()
                    .filter(|t| {
                        wanted
                            .as_deref()
                            .is_none_or(|q| matches_transaction(&inner, t, q))
                    })
                    .skip((page - 1) * per_page)
                    .take(per_page)
                    .map(transaction_json)
                    .collect();
                Reply::json(
                    200,
                    &json!({"v1/transactions": found, "meta": {"current_page": page, "per_page": per_page}}),
                )
            }
            "payout_create" => create_payout(&inner, &req),
            "payout_start" => start_payouts(&inner, &req),
            "payout_get" => match inner.payouts.lock().get(&id(2)) {
                Some(p) => Reply::json(200, &json!({"v1/payout": payout_json(p)})),
                None => error(404, "Payout not found", Value::Null),
            },
            "payout_list" | "payout_search" => {
                let wanted = search_term(&req);
                if endpoint == "payout_search" && wanted.is_none() {
                    return Reply::json(200, &json!({"v1/payouts": [], "meta": {}}));
                }
                let (per_page, page) = paging(&req);
                let found: Vec<Value> = inner
                    .payouts
                    .lock()
                    .values()
                    .rev()
                    .filter(|p| {
                        wanted
                            .as_deref()
                            .is_none_or(|q| matches_payout(&inner, p, q))
                    })
                    .skip((page - 1) * per_page)
                    .take(per_page)
                    .map(payout_json)
                    .collect();
                Reply::json(
                    200,
                    &json!({"v1/payouts": found, "meta": {"current_page": page, "per_page": per_page}}),
                )
            }
            _ => unreachable!("endpoints listed above"),
        }
    };
    with_fault_for(&inner.plumbing, endpoint, &req, work).await
}

/// `per_page` (default 25) and `page` (from 1).
fn paging(req: &Received) -> (usize, usize) {
    let per_page = req
        .query_param("per_page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    let page = req
        .query_param("page")
        .and_then(|v| v.parse().ok())
        .unwrap_or(1usize)
        .max(1);
    (per_page, page)
}

fn search_term(req: &Received) -> Option<String> {
    req.query_param("search")
        .or_else(|| req.query_param("q"))
        .map(|q| percent_decode(&q))
        .filter(|q| !q.is_empty())
}

fn metadata_contains(metadata: &Value, q: &str) -> bool {
    match metadata {
        Value::Object(m) => m.values().any(|v| metadata_contains(v, q)),
        Value::Array(a) => a.iter().any(|v| metadata_contains(v, q)),
        Value::String(s) => s.contains(q),
        Value::Number(n) => n.to_string() == q,
        _ => false,
    }
}

fn matches_transaction(inner: &FedaPay, t: &Transaction, q: &str) -> bool {
    t.id.to_string() == q
        || t.reference.contains(q)
        || t.description.contains(q)
        || (inner.search_metadata.load(Ordering::SeqCst)
            && metadata_contains(&t.custom_metadata, q))
}

fn matches_payout(inner: &FedaPay, p: &Payout, q: &str) -> bool {
    p.id.to_string() == q
        || p.reference.contains(q)
        || (inner.search_metadata.load(Ordering::SeqCst)
            && metadata_contains(&p.custom_metadata, q))
}

/// What identifies a request's operation (see [`FakeFedaPay::inject_for`]).
fn identify(inner: &FedaPay, endpoint: &str, segments: &[&str], req: &mut Received) {
    let body = req.json().unwrap_or(Value::Null);
    let text = |v: &Value| v.as_str().map(str::to_string);
    let transaction_keys = |t: &Transaction| -> Vec<Option<String>> {
        vec![Some(t.id.to_string()), t.our_id(), t.phone.clone()]
    };
    let payout_keys = |p: &Payout| -> Vec<Option<String>> {
        vec![Some(p.id.to_string()), p.our_id(), Some(p.phone.clone())]
    };
    let by_id = |i: usize| segments.get(i).and_then(|s| s.parse::<u64>().ok());
    let (op_id, keys): (Option<String>, Vec<Option<String>>) = match endpoint {
        "transaction_create" | "payout_create" => (
            text(&body["custom_metadata"]["mmc_id"]),
            vec![
                text(&body["custom_metadata"]["mmc_id"]),
                text(&body["customer"]["phone_number"]["number"]),
            ],
        ),
        "token" | "transaction_get" => (
            None,
            by_id(2)
                .and_then(|id| inner.transactions.lock().get(&id).map(transaction_keys))
                .unwrap_or_default(),
        ),
        "push" => {
            let token = match &body["token"] {
                Value::Number(n) => Some(n.to_string()),
                v => text(v),
            };
            let t = token.and_then(|tok| {
                inner
                    .transactions
                    .lock()
                    .values()
                    .find(|t| t.tokens.contains(&tok))
                    .cloned()
            });
            let mut keys = t.as_ref().map(transaction_keys).unwrap_or_default();
            keys.push(text(&body["phone_number"]["number"]));
            (t.map(|t| t.id.to_string()), keys)
        }
        "transaction_search" | "payout_search" | "transaction_list" | "payout_list" => {
            (None, vec![search_term(req)])
        }
        "payout_start" => {
            let items = body.get("payouts").cloned().unwrap_or(body.clone());
            let ids: Vec<u64> = items
                .as_array()
                .map(|a| a.iter().filter_map(|i| i["id"].as_u64()).collect())
                .unwrap_or_default();
            let payouts = inner.payouts.lock();
            let keys = ids
                .iter()
                .filter_map(|id| payouts.get(id))
                .flat_map(payout_keys)
                .collect();
            (ids.first().map(u64::to_string), keys)
        }
        "payout_get" => (
            None,
            by_id(2)
                .and_then(|id| inner.payouts.lock().get(&id).map(payout_keys))
                .unwrap_or_default(),
        ),
        _ => (None, Vec::new()),
    };
    req.op_id = op_id;
    req.add_keys(keys.iter().flatten().map(String::as_str));
}

/// A whole number of XOF, or the reason it is not.
fn amount_of(body: &Value) -> Result<u64, Reply> {
    match body["amount"].as_u64() {
        Some(a) if a > 0 => Ok(a),
        _ => Err(error(
            400,
            "The amount must be a whole number greater than 0.",
            json!({"amount": ["invalid"]}),
        )),
    }
}

fn currency_ok(body: &Value) -> Result<(), Reply> {
    if body["currency"]["iso"] == "XOF" {
        Ok(())
    } else {
        Err(error(
            400,
            "Currency not supported.",
            json!({"currency": ["must be XOF"]}),
        ))
    }
}

/// `{number: "+229…", country: "bj"}` → the number's digits.
fn phone_of(v: &Value) -> Result<Option<String>, Reply> {
    if v.is_null() {
        return Ok(None);
    }
    let number = v["number"].as_str().unwrap_or_default();
    let country = v["country"].as_str().unwrap_or_default();
    let well_formed = number.starts_with('+')
        && number.len() > 8
        && number[1..].bytes().all(|b| b.is_ascii_digit())
        && country.len() == 2;
    if well_formed {
        Ok(Some(digits(number)))
    } else {
        Err(error(
            400,
            "The phone number is invalid.",
            json!({"phone_number": ["invalid"]}),
        ))
    }
}

fn create_transaction(inner: &Arc<FedaPay>, req: &Received) -> Reply {
    let Some(body) = req.json().filter(Value::is_object) else {
        return error(400, "The request body must be JSON.", Value::Null);
    };
    let description = body["description"].as_str().unwrap_or_default();
    if description.trim().is_empty() {
        return error(
            400,
            "The description is required.",
            json!({"description": ["required"]}),
        );
    }
    let amount = match amount_of(&body) {
        Ok(a) => a,
        Err(r) => return r,
    };
    if let Err(r) = currency_ok(&body) {
        return r;
    }
    let phone = match phone_of(&body["customer"]["phone_number"]) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let t = Transaction {
        id: inner.next_id.fetch_add(1, Ordering::SeqCst),
        reference: format!("trx_{}", random(10)),
        amount,
        description: description.into(),
        callback_url: body["callback_url"].as_str().map(str::to_string),
        status: "pending".into(),
        custom_metadata: body
            .get("custom_metadata")
            .cloned()
            .unwrap_or_else(|| json!({})),
        phone,
        mode: None,
        tokens: Vec::new(),
        pushes: 0,
        last_error_code: None,
        created_at: now_rfc3339(),
    };
    let reply = Reply::json(200, &json!({"v1/transaction": transaction_json(&t)}));
    let id = t.id;
    inner.transactions.lock().insert(id, t);
    let inner = inner.clone();
    tokio::spawn(async move {
        notify(&inner, "transaction.created", id).await;
    });
    reply
}

fn token(inner: &FedaPay, id: u64) -> Reply {
    let mut transactions = inner.transactions.lock();
    let Some(t) = transactions.get_mut(&id) else {
        return error(404, "Transaction not found", Value::Null);
    };
    if t.status != "pending" {
        return error(
            400,
            "This transaction can no longer be paid.",
            json!({"status": [t.status.clone()]}),
        );
    }
    let token = random(24);
    t.tokens.push(token.clone());
    Reply::json(
        200,
        &json!({"token": token, "url": format!("{PAGE_BASE}{token}")}),
    )
}

fn push(inner: &Arc<FedaPay>, mode: &str, req: &Received) -> Reply {
    let Some(body) = req.json().filter(Value::is_object) else {
        return error(400, "The request body must be JSON.", Value::Null);
    };
    if !MODES.contains(&mode) {
        return error(
            400,
            &format!("Invalid payment method '{mode}' supplied."),
            json!({"mode": ["invalid"]}),
        );
    }
    let token = match &body["token"] {
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        _ => {
            return error(
                400,
                "The token is required.",
                json!({"token": ["required"]}),
            );
        }
    };
    let phone = match phone_of(&body["phone_number"]) {
        Ok(p) => p,
        Err(r) => return r,
    };
    let (id, amount) = {
        let mut transactions = inner.transactions.lock();
        let Some(t) = transactions
            .values_mut()
            .find(|t| t.tokens.contains(&token))
        else {
            return error(400, "Invalid token.", json!({"token": ["invalid"]}));
        };
        if t.status != "pending" {
            return error(
                400,
                "This transaction can no longer be paid.",
                json!({"status": [t.status.clone()]}),
            );
        }
        if let Some(p) = phone {
            t.phone = Some(p);
        }
        if t.phone.is_none() {
            return error(
                400,
                "A phone number is required for this payment method.",
                json!({"phone_number": ["required"]}),
            );
        }
        t.mode = Some(mode.into());
        t.pushes += 1;
        (t.id, t.amount)
    };
    let delay = inner.plumbing.settle_delay();
    let settle = inner.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let outcome = match settle.transactions.lock().get(&id) {
            Some(t) => settle
                .plumbing
                .outcomes
                .of(t.phone.as_deref().unwrap_or_default()),
            None => return,
        };
        decide(&settle, id, outcome).await;
    });
    Reply::json(
        200,
        &json!({"v1/payment_intent": {
            "reference": format!("pi_{}", random(12)),
            "amount": amount,
            "status": "pending",
            "mode": mode,
            "last_error_code": "NO_ERROR",
            "created_at": now_rfc3339(),
        }}),
    )
}

fn create_payout(inner: &FedaPay, req: &Received) -> Reply {
    let Some(body) = req.json().filter(Value::is_object) else {
        return error(400, "The request body must be JSON.", Value::Null);
    };
    let amount = match amount_of(&body) {
        Ok(a) => a,
        Err(r) => return r,
    };
    if let Err(r) = currency_ok(&body) {
        return r;
    }
    let mode = body["mode"].as_str().unwrap_or_default();
    if !MODES.contains(&mode) {
        return error(
            400,
            &format!("Invalid payout mode '{mode}'."),
            json!({"mode": ["invalid"]}),
        );
    }
    let phone = match phone_of(&body["customer"]["phone_number"]) {
        Ok(Some(p)) => p,
        Ok(None) => {
            return error(
                400,
                "The customer's phone number is required.",
                json!({"customer": ["phone_number required"]}),
            );
        }
        Err(r) => return r,
    };
    let p = Payout {
        id: inner.next_id.fetch_add(1, Ordering::SeqCst),
        reference: format!("{}", now_s() * 1000 + u64::from(rand_u16())),
        amount,
        mode: mode.into(),
        phone,
        firstname: body["customer"]["firstname"].as_str().map(str::to_string),
        lastname: body["customer"]["lastname"].as_str().map(str::to_string),
        status: "pending".into(),
        custom_metadata: body
            .get("custom_metadata")
            .cloned()
            .unwrap_or_else(|| json!({})),
        last_error_code: None,
        started_at: None,
        created_at: now_rfc3339(),
    };
    let reply = Reply::json(200, &json!({"v1/payout": payout_json(&p)}));
    inner.payouts.lock().insert(p.id, p);
    reply
}

fn start_payouts(inner: &Arc<FedaPay>, req: &Received) -> Reply {
    let Some(body) = req.json() else {
        return error(400, "The request body must be JSON.", Value::Null);
    };
    let items = body.get("payouts").cloned().unwrap_or(body);
    let ids: Vec<u64> = items
        .as_array()
        .map(|a| a.iter().filter_map(|i| i["id"].as_u64()).collect())
        .unwrap_or_default();
    if ids.is_empty() {
        return error(400, "No payout to start.", json!({"payouts": ["required"]}));
    }
    let mut payouts = inner.payouts.lock();
    let day_ago = SystemTime::now() - Duration::from_secs(24 * 3600);
    for id in &ids {
        let Some(p) = payouts.get(id) else {
            return error(404, &format!("Payout {id} not found"), Value::Null);
        };
        if p.status != "pending" {
            return error(
                400,
                &format!("Payout {id} was already started."),
                json!({"status": [p.status.clone()]}),
            );
        }
        let recent = payouts
            .values()
            .filter(|o| o.phone == p.phone && o.started_at.is_some_and(|at| at > day_ago))
            .count();
        if recent >= PAYOUTS_PER_NUMBER {
            return error(
                400,
                "No more than 3 payouts to the same number within 24 hours.",
                json!({"phone_number": ["limit reached"]}),
            );
        }
    }
    let mut started = Vec::new();
    for id in &ids {
        let p = payouts.get_mut(id).expect("checked above");
        p.status = "started".into();
        p.started_at = Some(SystemTime::now());
        started.push(payout_json(p));
    }
    drop(payouts);
    let delay = inner.plumbing.settle_delay();
    let settle = inner.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let mut payouts = settle.payouts.lock();
        for id in ids {
            let Some(p) = payouts.get_mut(&id) else {
                continue;
            };
            match settle.plumbing.outcomes.of(&p.phone) {
                Outcome::Succeed => p.status = "sent".into(),
                Outcome::Fail(code) => {
                    p.status = "failed".into();
                    p.last_error_code = Some(code.into());
                }
                Outcome::Stay => {}
            }
        }
    });
    Reply::json(200, &json!({"v1/payouts": started}))
}

/// `GET /v1/balances` (https://docs.fedapay.com/api-reference/balances/get-all):
/// one balance per mode in XOF (currency 1), what its approved transactions
/// and the merchant's top-ups brought in.
fn balances(inner: &FedaPay) -> Vec<Value> {
    let mut by_mode = inner.top_ups.lock().clone();
    for t in inner.transactions.lock().values() {
        if t.status == "approved" || t.status == "transferred" {
            let mode = t.mode.clone().unwrap_or_else(|| "mtn_open".into());
            *by_mode.entry(mode).or_default() += t.amount;
        }
    }
    by_mode
        .into_iter()
        .enumerate()
        .map(|(i, (mode, amount))| {
            json!({"id": i + 1, "klass": "v1/balance", "currency_id": 1, "account_id": 1,
                   "amount": amount, "mode": mode, "created_at": now_rfc3339(), "updated_at": now_rfc3339()})
        })
        .collect()
}
