//! A fake Wave Business API: checkout sessions (the customer pays on Wave's
//! page, here on command), expiry, whole-session refunds, payouts with
//! `idempotency-key`, and webhooks to the URL configured "in the portal",
//! signed `Wave-Signature: t=<ts>,v1=<hex HMAC-SHA256(secret, ts + body)>`.
//! The wallet keeps its books as Wave's Balance & Reconciliation API shows
//! them (https://docs.wave.com/balance-api): `GET /v1/balance` and
//! `GET /v1/transactions?date=YYYY-MM-DD[&after=cursor]`, one day a call, a
//! page at a time, each transaction with its signed `amount` (what it did
//! to the wallet, the fee apart), `fee`, `balance` after it,
//! `client_reference` and `checkout_api_session_id`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hmac::{Hmac, Mac};
use mmc_config::ComponentConfig;
use parking_lot::Mutex;
use serde_json::{Value, json};
use sha2::Sha256;

use futures::future::BoxFuture;

use super::{
    Delivery, FakeServer, Fault, Outcome, Plumbing, Received, Reply, Wire, is_amount, now_rfc3339,
    with_fault_for,
};

pub const API_KEY: &str = "wave_ci_prod_FAKEKEYa1b2c3d4e5f6";
pub const WEBHOOK_SECRET: &str = "wave_ci_WHS_fakesecret0123456789";

#[derive(Clone, Debug)]
pub struct Session {
    pub id: String,
    pub amount: String,
    pub client_reference: Option<String>,
    pub success_url: String,
    pub error_url: String,
    /// `open`, `complete`, `expired`.
    pub checkout_status: String,
    /// `processing`, `cancelled`, `succeeded`.
    pub payment_status: String,
    pub last_payment_error: Option<(String, String)>,
    pub transaction_id: Option<String>,
    pub refunded: bool,
    pub when_created: String,
    /// Only this Wave account may pay (E.164), if set.
    pub restrict_payer_mobile: Option<String>,
    /// The `idempotency-key` it was created with, if any.
    pub idempotency_key: Option<String>,
}

impl Session {
    /// Money moved: the customer paid this checkout session.
    pub fn paid(&self) -> bool {
        self.payment_status == "succeeded"
    }
}

#[derive(Clone, Debug)]
pub struct Payout {
    pub id: String,
    pub idempotency_key: Option<String>,
    pub client_reference: Option<String>,
    pub receive_amount: String,
    pub mobile: String,
    pub name: String,
    /// `processing`, `succeeded`, `failed`, `reversed`.
    pub status: String,
    pub error: Option<String>,
}

impl Payout {
    /// Money moved: the recipient was paid.
    pub fn succeeded(&self) -> bool {
        self.status == "succeeded"
    }
}

/// A transaction of the wallet, as the transaction list shows it.
#[derive(Clone, Debug)]
pub struct Transaction {
    pub transaction_id: String,
    /// `api_checkout`, `api_checkout_refund`, `api_payout`, `api_payout_reversal`, `merchant_sweep`…
    pub transaction_type: String,
    /// Signed: what it did to the wallet, without the fee.
    pub amount: i64,
    pub fee: i64,
    pub currency: String,
    pub is_reversal: bool,
    pub client_reference: Option<String>,
    pub checkout_api_session_id: Option<String>,
    pub at_ms: u64,
    /// The wallet after it.
    pub balance: i64,
}

/// The wallet: its transactions in the order executed, its balance, and
/// what Wave charges (basis points of the amount, rounded half up).
struct Wallet {
    transactions: Vec<Transaction>,
    balance: i64,
    checkout_fee_bp: i64,
    payout_fee_bp: i64,
    page_size: usize,
}

/// Wave's state: checkout sessions, payouts and the wallet's books.
pub struct Wave {
    plumbing: Plumbing,
    sessions: Mutex<HashMap<String, Session>>,
    payouts: Mutex<HashMap<String, Payout>>,
    wallet: Mutex<Wallet>,
}

impl Wave {
    /// Books a movement of the wallet now, its fee at the wallet's rate for it.
    fn book(
        &self,
        kind: &str,
        amount: i64,
        client_reference: Option<String>,
        session: Option<String>,
    ) {
        let mut w = self.wallet.lock();
        let bp = match kind {
            "api_checkout" => w.checkout_fee_bp,
            "api_payout" => w.payout_fee_bp,
            _ => 0,
        };
        let fee = (amount.abs() * bp + 5_000) / 10_000;
        w.balance += amount - fee;
        let t = Transaction {
            transaction_id: format!("T_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]),
            transaction_type: kind.into(),
            amount,
            fee,
            currency: "XOF".into(),
            is_reversal: kind.ends_with("_reversal"),
            client_reference,
            checkout_api_session_id: session,
            at_ms: now_ms(),
            balance: w.balance,
        };
        w.transactions.push(t);
    }
}

/// A fake Wave Business API server (the kit's [`FakeServer`] over [`Wave`]).
/// Its webhooks go to the URL set with `set_callback_url` (Wave's portal).
pub type FakeWave = FakeServer<Wave>;

impl Wire for Wave {
    fn new() -> Wave {
        Wave {
            plumbing: Plumbing::default(),
            sessions: Mutex::new(HashMap::new()),
            payouts: Mutex::new(HashMap::new()),
            wallet: Mutex::new(Wallet {
                transactions: Vec::new(),
                balance: 1_000_000,
                checkout_fee_bp: 100,
                payout_fee_bp: 100,
                page_size: 5,
            }),
        }
    }

    fn plumbing(&self) -> &Plumbing {
        &self.plumbing
    }

    fn handle(self: Arc<Self>, req: Received) -> BoxFuture<'static, Reply> {
        Box::pin(handle(self, req))
    }

    /// The `wave` adapter's API key and webhook secret.
    fn configure(&self, c: &mut ComponentConfig) {
        c.secrets.insert("api_key".into(), API_KEY.into());
        c.secrets
            .insert("webhook_secret".into(), WEBHOOK_SECRET.into());
    }
}

fn new_id(prefix: &str) -> String {
    format!(
        "{prefix}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..20]
    )
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

fn now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Wave's webhook delivery. Wave's own webhook page
/// (https://docs.wave.com/webhook) could not be found in a readable copy;
/// what could be found (a summary of it, https://apis.io/apis/wave-mobile-money/wave-webhooks/)
/// says deliveries are at least once, identified by the event `id`, and
/// must be refused when older than five minutes, but gives no timeout or
/// retry schedule. Conservative rule: 3 s to answer with a 2xx, 3 attempts
/// in all, each signed when it is sent (same event, same `id`).
pub const DELIVERY: Delivery = Delivery {
    patience: Duration::from_secs(3),
    attempts: 3,
    pause: Duration::from_millis(200),
    only_200: false,
};

/// Wave refusing a partner for the partner's own doing, before doing
/// anything, in its `{code, message}` error shape (401 as this fake answers
/// a wrong key; the other codes are this fake's, not taken from Wave's docs).
pub fn refusal(status: u16) -> Fault {
    let (code, message) = match status {
        401 => ("invalid-auth", "The API key is missing or invalid."),
        403 => (
            "api-key-wrong-scope",
            "This API key may not use the Checkout API.",
        ),
        404 => ("not-found", "No such endpoint."),
        429 => ("rate-limit-exceeded", "Too many requests: slow down."),
        _ => ("request-refused", "Refused."),
    };
    Fault::Reply(error(status, code, message))
}

/// `Wave-Signature` for `body` signed at `timestamp` with `secret`.
pub fn signature(secret: &str, timestamp: u64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(timestamp.to_string().as_bytes());
    mac.update(body);
    format!(
        "t={timestamp},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

/// Wave's own: sessions, payouts, the customer on Wave's page, webhooks
/// on demand. Endpoints (for `inject`): `session_create`, `session_get`,
/// `session_search`, `session_expire`, `session_refund`, `payout_create`,
/// `payout_get`, `payout_search`, `balance`, `transactions`. Faults by `inject_for` match a session's
/// `client_reference`, its `restrict_payer_mobile`, its id (expire, refund,
/// get), a payout's `mobile`, `client_reference` or `idempotency-key`;
/// `ids_for` counts `client_reference` of `session_create`,
/// `idempotency-key` (else `client_reference`) of `payout_create`, the
/// session of `session_expire` / `session_refund`.
impl FakeWave {
    /// The operator's books say another amount for this operation (a
    /// customer who paid another sum on a USSD menu, a provider's bug):
    /// every later answer and callback about it carries that amount.
    pub fn set_amount(&self, id: &str, amount: &str) {
        if let Some(s) = self.wire().sessions.lock().get_mut(id) {
            s.amount = amount.into();
        }
    }

    pub fn session(&self, id: &str) -> Option<Session> {
        self.wire().sessions.lock().get(id).cloned()
    }

    /// Every session opened with this `client_reference` (Wave does not
    /// stop a second one: each could be paid).
    pub fn sessions_for(&self, client_reference: &str) -> Vec<Session> {
        self.wire()
            .sessions
            .lock()
            .values()
            .filter(|s| s.client_reference.as_deref() == Some(client_reference))
            .cloned()
            .collect()
    }

    pub fn payout(&self, id: &str) -> Option<Payout> {
        self.wire().payouts.lock().get(id).cloned()
    }

    pub fn payouts(&self) -> Vec<Payout> {
        self.wire().payouts.lock().values().cloned().collect()
    }

    /// The customer pays on Wave's page; Wave then sends
    /// `checkout.session.completed`. Returns our answers to the webhook(s);
    /// none if the session is no longer open (expired or paid: Wave's page
    /// does not take the payment).
    pub async fn customer_pays(&self, session_id: &str) -> Vec<u16> {
        if !self.mark_paid(session_id) {
            return Vec::new();
        }
        self.notify("checkout.session.completed", session_id).await
    }

    /// The session is paid, if it is still open; no webhook is sent (yet).
    /// Returns whether the payment went through.
    pub fn mark_paid(&self, session_id: &str) -> bool {
        let mut paid = None;
        self.update(session_id, |s| {
            if s.checkout_status == "open" {
                s.checkout_status = "complete".into();
                s.payment_status = "succeeded".into();
                s.transaction_id = Some(new_id("TCN"));
                paid = Some((
                    s.amount.parse::<i64>().unwrap_or(0),
                    s.client_reference.clone(),
                ));
            }
        });
        if let Some((amount, reference)) = &paid {
            let session = Some(session_id.to_string());
            self.wire()
                .book("api_checkout", *amount, reference.clone(), session);
        }
        paid.is_some()
    }

    /// The wallet's transactions, as executed.
    pub fn transactions(&self) -> Vec<Transaction> {
        self.wire().wallet.lock().transactions.clone()
    }

    /// Wave's books carry one more transaction (money we have no record
    /// of, a copy of one, a fee or a sweep): booked now, at its own fee.
    pub fn book(&self, kind: &str, amount: i64, client_reference: Option<&str>) {
        self.wire()
            .book(kind, amount, client_reference.map(str::to_string), None);
    }

    /// Changes the transactions of `client_reference` in Wave's books (its
    /// amount or fee said otherwise than what was asked, say).
    pub fn edit_transactions(&self, client_reference: &str, f: impl Fn(&mut Transaction)) {
        let mut w = self.wire().wallet.lock();
        w.transactions
            .iter_mut()
            .filter(|t| t.client_reference.as_deref() == Some(client_reference))
            .for_each(f);
    }

    /// A copy of `client_reference`'s transaction under a new id: the money moved twice.
    pub fn duplicate_transaction(&self, client_reference: &str) {
        let mut w = self.wire().wallet.lock();
        let Some(mut copy) = w
            .transactions
            .iter()
            .find(|t| t.client_reference.as_deref() == Some(client_reference))
            .cloned()
        else {
            panic!("no transaction of {client_reference}");
        };
        copy.transaction_id = format!("T_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
        w.balance += copy.amount - copy.fee;
        copy.balance = w.balance;
        w.transactions.push(copy);
    }

    /// Wave forgets a checkout session and its transactions (its books
    /// never had it).
    pub fn forget_session(&self, session_id: &str) {
        self.wire().sessions.lock().remove(session_id);
        let mut w = self.wire().wallet.lock();
        w.transactions
            .retain(|t| t.checkout_api_session_id.as_deref() != Some(session_id));
    }

    /// How many transactions a page of the list holds.
    pub fn set_page_size(&self, n: usize) {
        self.wire().wallet.lock().page_size = n.max(1);
    }

    /// What Wave charges on a checkout payment, in basis points.
    pub fn set_checkout_fee_bp(&self, bp: i64) {
        self.wire().wallet.lock().checkout_fee_bp = bp;
    }

    /// The session opened for our payment id, if any.
    pub fn session_by_reference(&self, client_reference: &str) -> Option<String> {
        self.wire()
            .sessions
            .lock()
            .values()
            .find(|s| s.client_reference.as_deref() == Some(client_reference))
            .map(|s| s.id.clone())
    }

    /// A payment attempt fails; the session stays open for another try.
    pub async fn customer_attempt_fails(&self, session_id: &str, code: &str) -> Vec<u16> {
        self.update(session_id, |s| {
            s.last_payment_error = Some((code.into(), format!("Payment failed: {code}")));
        });
        self.notify("checkout.session.payment_failed", session_id)
            .await
    }

    /// The session runs out (30 minutes at Wave); no webhook.
    pub fn session_expires(&self, session_id: &str) {
        self.update(session_id, |s| {
            s.checkout_status = "expired".into();
            s.payment_status = "cancelled".into();
        });
    }

    fn update(&self, session_id: &str, f: impl FnOnce(&mut Session)) {
        f(self
            .wire()
            .sessions
            .lock()
            .get_mut(session_id)
            .expect("known session"));
    }

    fn event(&self, kind: &str, session_id: &str) -> Vec<u8> {
        let s = self.session(session_id).expect("known session");
        serde_json::to_vec(&json!({
            "id": format!("AE_{}", uuid::Uuid::new_v4().simple()),
            "type": kind,
            "data": session_json(&s),
        }))
        .unwrap()
    }

    /// Sends one event of `kind` about the session as it stands, honouring
    /// the webhook mode, each delivery under [`DELIVERY`]. Returns our
    /// answers to every attempt.
    pub async fn notify(&self, kind: &str, session_id: &str) -> Vec<u16> {
        // No URL set in the portal: Wave has nowhere to send it.
        let Some(url) = self.plumbing().dashboard_url() else {
            return Vec::new();
        };
        let body = self.event(kind, session_id);
        let sign = || {
            vec![(
                "Wave-Signature".to_string(),
                signature(WEBHOOK_SECRET, now_s(), &body),
            )]
        };
        self.plumbing()
            .dispatch("POST", &url, sign, body.clone(), DELIVERY)
            .await
    }

    /// Sends an event signed with `secret` at `timestamp` (to test refusals).
    pub async fn notify_signed_with(
        &self,
        kind: &str,
        session_id: &str,
        secret: &str,
        timestamp: u64,
    ) -> u16 {
        let body = self.event(kind, session_id);
        let header = signature(secret, timestamp, &body);
        self.send_webhook(body, Some(header)).await
    }

    /// POSTs `body` to the configured webhook URL with this `Wave-Signature`.
    pub async fn send_webhook(&self, body: Vec<u8>, signature: Option<String>) -> u16 {
        let url = self
            .plumbing()
            .dashboard_url()
            .expect("webhook URL configured");
        let headers = signature
            .map(|s| vec![("Wave-Signature".to_string(), s)])
            .unwrap_or_default();
        self.plumbing().call_back("POST", &url, headers, body).await
    }
}

pub fn now() -> u64 {
    now_s()
}

fn session_json(s: &Session) -> Value {
    json!({
        "id": s.id,
        "amount": s.amount,
        "currency": "XOF",
        "business_name": "Fake Shop CI",
        "checkout_status": s.checkout_status,
        "client_reference": s.client_reference,
        "restrict_payer_mobile": s.restrict_payer_mobile,
        "error_url": s.error_url,
        "success_url": s.success_url,
        "last_payment_error": s.last_payment_error.as_ref().map(|(c, m)| json!({"code": c, "message": m})),
        "payment_status": s.payment_status,
        "transaction_id": s.transaction_id,
        "wave_launch_url": format!("https://pay.wave.com/c/{}", s.id),
        "when_created": s.when_created,
        "when_expires": s.when_created,
        "when_completed": if s.checkout_status == "complete" { json!(now_rfc3339()) } else { Value::Null },
    })
}

fn payout_json(p: &Payout) -> Value {
    json!({
        "id": p.id,
        "currency": "XOF",
        "receive_amount": p.receive_amount,
        "fee": "0",
        "mobile": p.mobile,
        "name": p.name,
        "client_reference": p.client_reference,
        "status": p.status,
        "timestamp": now_rfc3339(),
        "payout_error": p.error.as_ref().map(|c| json!({"error_code": c, "error_message": format!("Payout failed: {c}")})),
    })
}

fn transaction_json(t: &Transaction) -> Value {
    json!({
        "timestamp": mmc_domain::time::rfc3339(t.at_ms),
        "transaction_id": t.transaction_id,
        "transaction_type": t.transaction_type,
        "amount": t.amount.to_string(),
        "fee": t.fee.to_string(),
        "balance": t.balance.to_string(),
        "currency": t.currency,
        "is_reversal": t.is_reversal,
        "client_reference": t.client_reference,
        "checkout_api_session_id": t.checkout_api_session_id,
    })
}

/// One page of one day's transactions (today's without `date`), oldest
/// first; `after` is the `end_cursor` of the page before.
fn transaction_list(inner: &Wave, req: &Received) -> Reply {
    let today = mmc_domain::time::date(now_ms());
    let date = req.query_param("date").unwrap_or(today);
    let Some(day) = mmc_domain::time::day_of(&date).filter(|_| date.len() == 10) else {
        return validation_error("date", "must be YYYY-MM-DD");
    };
    let w = inner.wallet.lock();
    let of_day: Vec<&Transaction> = w
        .transactions
        .iter()
        .filter(|t| (t.at_ms / 86_400_000) as i64 == day)
        .collect();
    let start = match req.query_param("after") {
        None => 0,
        Some(c) => match c.strip_prefix("c").and_then(|n| n.parse::<usize>().ok()) {
            Some(n) if n <= of_day.len() => n,
            _ => return validation_error("after", "unknown cursor"),
        },
    };
    let end = (start + w.page_size).min(of_day.len());
    let items: Vec<Value> = of_day[start..end]
        .iter()
        .map(|t| transaction_json(t))
        .collect();
    Reply::json(
        200,
        &json!({
            "page_info": {
                "start_cursor": (start > 0).then(|| format!("c{start}")),
                "end_cursor": format!("c{end}"),
                "has_next_page": end < of_day.len(),
            },
            "date": date,
            "items": items,
        }),
    )
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(status, &json!({"code": code, "message": message}))
}

async fn handle(inner: Arc<Wave>, mut req: Received) -> Reply {
    let path = req.path.trim_matches('/').to_string();
    let segments: Vec<&str> = path.split('/').collect();
    let endpoint: &'static str = match (req.method.as_str(), segments.as_slice()) {
        ("POST", ["v1", "checkout", "sessions"]) => "session_create",
        ("GET", ["v1", "checkout", "sessions", "search"]) => "session_search",
        ("GET", ["v1", "checkout", "sessions", _]) => "session_get",
        ("POST", ["v1", "checkout", "sessions", _, "expire"]) => "session_expire",
        ("POST", ["v1", "checkout", "sessions", _, "refund"]) => "session_refund",
        ("POST", ["v1", "payout"]) => "payout_create",
        ("GET", ["v1", "payouts", "search"]) => "payout_search",
        ("GET", ["v1", "payout", _]) => "payout_get",
        ("GET", ["v1", "balance"]) => "balance",
        ("GET", ["v1", "transactions"]) => "transactions",
        _ => return error(404, "not-found", "No such endpoint."),
    };
    // /v1/checkout/sessions/{id}[/…] and /v1/payout/{id}
    let id = match endpoint {
        "payout_get" => segments[2].to_string(),
        _ => segments.get(3).map(|s| s.to_string()).unwrap_or_default(),
    };
    identify(&inner, endpoint, &id, &mut req);
    inner.plumbing.record(endpoint, &req);
    let work = async {
        let expected = format!("Bearer {API_KEY}");
        if req.header("Authorization") != Some(expected.as_str()) {
            return error(401, "invalid-auth", "The API key is missing or invalid.");
        }
        match endpoint {
            "session_create" => create_session(&inner, &req),
            "session_search" => {
                let wanted = req.query_param("client_reference");
                let result: Vec<Value> = inner
                    .sessions
                    .lock()
                    .values()
                    .filter(|s| s.client_reference.is_some() && s.client_reference == wanted)
                    .map(session_json)
                    .collect();
                Reply::json(200, &json!({"result": result}))
            }
            "session_get" => match inner.sessions.lock().get(&id) {
                Some(s) => Reply::json(200, &session_json(s)),
                None => error(
                    404,
                    "checkout-session-not-found",
                    "No such checkout session.",
                ),
            },
            "session_expire" => match inner.sessions.lock().get_mut(&id) {
                Some(s) if s.checkout_status == "open" => {
                    s.checkout_status = "expired".into();
                    s.payment_status = "cancelled".into();
                    Reply::empty(200)
                }
                Some(_) => error(
                    409,
                    "checkout-session-not-open",
                    "The checkout session is not open.",
                ),
                None => error(
                    404,
                    "checkout-session-not-found",
                    "No such checkout session.",
                ),
            },
            "session_refund" => match inner.sessions.lock().get_mut(&id) {
                Some(s) if s.payment_status == "succeeded" && !s.refunded => {
                    s.refunded = true;
                    let amount = -s.amount.parse::<i64>().unwrap_or(0);
                    let (reference, session) = (s.client_reference.clone(), Some(s.id.clone()));
                    inner.book("api_checkout_refund", amount, reference, session);
                    Reply::empty(200)
                }
                Some(_) => error(
                    409,
                    "checkout-refund-failed",
                    "This checkout session cannot be refunded.",
                ),
                None => error(
                    404,
                    "checkout-session-not-found",
                    "No such checkout session.",
                ),
            },
            "payout_create" => create_payout(inner.clone(), &req),
            "payout_search" => {
                let wanted = req.query_param("client_reference");
                let result: Vec<Value> = inner
                    .payouts
                    .lock()
                    .values()
                    .filter(|p| p.client_reference.is_some() && p.client_reference == wanted)
                    .map(payout_json)
                    .collect();
                Reply::json(200, &json!({"result": result}))
            }
            "payout_get" => match inner.payouts.lock().get(&id) {
                Some(p) => Reply::json(200, &payout_json(p)),
                None => error(404, "payout-not-found", "No such payout."),
            },
            "balance" => {
                let balance = inner.wallet.lock().balance;
                Reply::json(
                    200,
                    &json!({"amount": balance.to_string(), "currency": "XOF"}),
                )
            }
            "transactions" => transaction_list(&inner, &req),
            _ => unreachable!("endpoints listed above"),
        }
    };
    with_fault_for(&inner.plumbing, endpoint, &req, work).await
}

/// What identifies a request's operation. Sessions: `client_reference`,
/// `restrict_payer_mobile`, `idempotency-key`, and the session id for calls
/// on one session; payouts: `mobile`, `client_reference`, `idempotency-key`
/// and the payout id. `op_id`: the id a creating request acts under.
fn identify(inner: &Wave, endpoint: &str, id: &str, req: &mut Received) {
    let body = req.json().unwrap_or(Value::Null);
    let idempotency = req.header("idempotency-key").map(str::to_string);
    let text = |v: &Value| v.as_str().map(str::to_string);
    let (op_id, keys): (Option<String>, Vec<Option<String>>) = match endpoint {
        "session_create" => (
            text(&body["client_reference"]).or(idempotency.clone()),
            vec![
                text(&body["client_reference"]),
                text(&body["restrict_payer_mobile"]),
                idempotency,
            ],
        ),
        "session_search" | "payout_search" => (None, vec![req.query_param("client_reference")]),
        "session_get" | "session_expire" | "session_refund" => {
            let session = inner.sessions.lock().get(id).cloned();
            let acts = endpoint != "session_get";
            (
                acts.then(|| id.to_string()),
                vec![
                    Some(id.to_string()),
                    session.as_ref().and_then(|s| s.client_reference.clone()),
                    session.and_then(|s| s.restrict_payer_mobile),
                ],
            )
        }
        "payout_create" => (
            idempotency.clone().or(text(&body["client_reference"])),
            vec![
                text(&body["mobile"]),
                text(&body["client_reference"]),
                idempotency,
            ],
        ),
        "payout_get" => {
            let payout = inner.payouts.lock().get(id).cloned();
            (
                None,
                vec![
                    Some(id.to_string()),
                    payout.as_ref().map(|p| p.mobile.clone()),
                    payout.and_then(|p| p.client_reference),
                ],
            )
        }
        _ => (None, Vec::new()),
    };
    req.op_id = op_id;
    req.add_keys(keys.iter().flatten().map(String::as_str));
}

fn validation_error(field: &str, msg: &str) -> Reply {
    Reply::json(
        400,
        &json!({"code": "request-validation-error", "message": "Request invalid",
                "details": [{"loc": [field], "msg": msg}]}),
    )
}

fn create_session(inner: &Wave, req: &Received) -> Reply {
    let Some(body) = req.json() else {
        return validation_error("body", "not JSON");
    };
    if !is_amount(body.get("amount")) {
        return validation_error("amount", "must be a string of digits");
    }
    if body["currency"] != "XOF" {
        return validation_error("currency", "XOF only");
    }
    for url in ["success_url", "error_url"] {
        if body[url].as_str().is_none_or(str::is_empty) {
            return validation_error(url, "required");
        }
    }
    // Wave honours an `idempotency-key` on its POSTs (documented for payouts;
    // assumed here for sessions): the same key answers with the session it opened.
    let key = req.header("idempotency-key").map(str::to_string);
    if let Some(key) = &key {
        let sessions = inner.sessions.lock();
        if let Some(s) = sessions
            .values()
            .find(|s| s.idempotency_key.as_ref() == Some(key))
        {
            return Reply::json(200, &session_json(s));
        }
    }
    let s = Session {
        id: new_id("cos"),
        amount: body["amount"].as_str().unwrap().into(),
        client_reference: body["client_reference"].as_str().map(str::to_string),
        success_url: body["success_url"].as_str().unwrap().into(),
        error_url: body["error_url"].as_str().unwrap().into(),
        checkout_status: "open".into(),
        payment_status: "processing".into(),
        last_payment_error: None,
        transaction_id: None,
        refunded: false,
        when_created: now_rfc3339(),
        restrict_payer_mobile: body["restrict_payer_mobile"].as_str().map(str::to_string),
        idempotency_key: key,
    };
    let reply = Reply::json(200, &session_json(&s));
    inner.sessions.lock().insert(s.id.clone(), s);
    reply
}

fn create_payout(inner: Arc<Wave>, req: &Received) -> Reply {
    let key = req.header("idempotency-key").map(str::to_string);
    if let Some(key) = &key {
        // Same key: the same payout, never a second one.
        if let Some(p) = inner
            .payouts
            .lock()
            .values()
            .find(|p| p.idempotency_key.as_ref() == Some(key))
        {
            return Reply::json(200, &payout_json(p));
        }
    }
    let Some(body) = req.json() else {
        return validation_error("body", "not JSON");
    };
    if !is_amount(body.get("receive_amount")) {
        return validation_error("receive_amount", "must be a string of digits");
    }
    let mobile = body["mobile"].as_str().unwrap_or_default();
    if !mobile.starts_with('+') || !mobile[1..].bytes().all(|b| b.is_ascii_digit()) {
        return validation_error("mobile", "must be E.164");
    }
    if body["currency"] != "XOF" || body["name"].as_str().is_none_or(str::is_empty) {
        return validation_error("name", "currency XOF and a name are required");
    }
    let p = Payout {
        id: new_id("pt"),
        idempotency_key: key,
        client_reference: body["client_reference"].as_str().map(str::to_string),
        receive_amount: body["receive_amount"].as_str().unwrap().into(),
        mobile: mobile.into(),
        name: body["name"].as_str().unwrap().into(),
        status: "processing".into(),
        error: None,
    };
    let reply = Reply::json(200, &payout_json(&p));
    let (id, delay) = (p.id.clone(), inner.plumbing.settle_delay());
    inner.payouts.lock().insert(p.id.clone(), p);
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let mut payouts = inner.payouts.lock();
        let Some(p) = payouts.get_mut(&id) else {
            return;
        };
        match inner.plumbing.outcomes.of(&p.mobile) {
            Outcome::Succeed => {
                p.status = "succeeded".into();
                let amount = -p.receive_amount.parse::<i64>().unwrap_or(0);
                inner.book("api_payout", amount, p.client_reference.clone(), None);
            }
            Outcome::Fail(code) => {
                p.status = "failed".into();
                p.error = Some(code.into());
            }
            Outcome::Stay => {}
        }
    });
    reply
}
