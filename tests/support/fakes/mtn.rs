//! A fake MTN MoMo Open API: OAuth tokens per product (Basic apiUser:apiKey
//! plus the product's subscription key), request to pay, transfers and
//! refunds created with `X-Reference-Id` and answered 202 with an empty
//! body, status resources, and one unsigned callback by PUT to
//! `X-Callback-Url` once the customer acts (given 2 s to be answered, tried
//! up to 20 times, as MTN's callback documentation says).
//!
//! Markets (`X-Target-Environment`) as MTN's "common errors" page describes
//! them (https://momodevelopercommunity.mtn.com/errors-46/momo-api-common-errors-82):
//! the currency must be the target environment's (the sandbox takes EUR
//! only, Benin and Côte d'Ivoire XOF), notes longer than 160 characters and
//! some characters (the apostrophe among them) are a 400, and API users are
//! provisioned per market: another market is a 403.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use mmc_config::ComponentConfig;
use parking_lot::Mutex;
use serde_json::{Value, json};

use futures::future::BoxFuture;

use super::{
    Delivery, FakeServer, Fault, Outcome, Plumbing, Received, Reply, Wire, is_amount, is_uuid,
    with_fault, with_fault_for,
};

pub const API_USER: &str = "3f0b9a4e-5a8e-4c1f-9b7e-2d6c8e1a7b90";
pub const API_KEY: &str = "b5c9e0d1f2a34b6c8d7e9f0a1b2c3d4e";
pub const COLLECTION_KEY: &str = "collection-subscription-key-0001";
pub const DISBURSEMENT_KEY: &str = "disbursement-subscription-key-0001";
pub const TARGET_ENVIRONMENT: &str = "mtnbenin";
/// Each target environment and the one currency it takes.
pub const MARKETS: &[(&str, &str)] = &[
    ("sandbox", "EUR"),
    ("mtnbenin", "XOF"),
    ("mtnivorycoast", "XOF"),
];

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    RequestToPay,
    Transfer,
    Refund,
}

#[derive(Clone, Debug)]
pub struct Transaction {
    pub kind: Kind,
    pub reference: String,
    pub external_id: String,
    pub amount: String,
    pub currency: String,
    /// MSISDN of the payer (request to pay, refund) or payee (transfer).
    pub party: String,
    /// `PENDING`, `SUCCESSFUL`, `FAILED`.
    pub status: String,
    pub reason: Option<String>,
    /// The target environment it was created in (and is found in).
    pub market: String,
    pub callback_url: Option<String>,
    pub financial_transaction_id: Option<String>,
    /// Refunds: the request to pay refunded (`referenceIdToRefund`).
    pub refund_of: Option<String>,
}

impl Transaction {
    /// Money moved: the customer approved (or the transfer/refund went through).
    pub fn succeeded(&self) -> bool {
        self.status == "SUCCESSFUL"
    }
}

/// MTN's state: the transactions it holds, the tokens it issued, the
/// markets our API user is provisioned for.
pub struct Mtn {
    plumbing: Plumbing,
    transactions: Mutex<HashMap<String, Transaction>>,
    /// Issued bearer tokens → product.
    tokens: Mutex<HashMap<String, String>>,
    /// Target environments our API user is provisioned for.
    markets: Mutex<Vec<String>>,
    /// `expires_in` of the tokens it issues (an hour, as MTN's).
    token_lifetime_s: std::sync::atomic::AtomicU64,
}

/// A fake MTN MoMo Open API server (the kit's [`FakeServer`] over [`Mtn`]).
pub type FakeMtn = FakeServer<Mtn>;

impl Wire for Mtn {
    fn new() -> Mtn {
        Mtn {
            plumbing: Plumbing::default(),
            transactions: Mutex::new(HashMap::new()),
            tokens: Mutex::new(HashMap::new()),
            token_lifetime_s: std::sync::atomic::AtomicU64::new(3600),
            markets: Mutex::new(vec![TARGET_ENVIRONMENT.into()]),
        }
    }

    fn plumbing(&self) -> &Plumbing {
        &self.plumbing
    }

    fn handle(self: Arc<Self>, req: Received) -> BoxFuture<'static, Reply> {
        Box::pin(handle(self, req))
    }

    /// The `momo` adapter's market and credentials, both products.
    fn configure(&self, c: &mut ComponentConfig) {
        c.settings
            .insert("target_environment".into(), TARGET_ENVIRONMENT.into());
        for product in ["collection", "disbursement"] {
            c.secrets
                .insert(format!("{product}_api_user"), API_USER.into());
            c.secrets
                .insert(format!("{product}_api_key"), API_KEY.into());
        }
        c.secrets
            .insert("collection_subscription_key".into(), COLLECTION_KEY.into());
        c.secrets.insert(
            "disbursement_subscription_key".into(),
            DISBURSEMENT_KEY.into(),
        );
    }
}

/// MTN's own: markets, transactions, tokens, callbacks on demand. Endpoints
/// (for `inject`): `token`, `requesttopay`, `requesttopay_status`,
/// `transfer`, `transfer_status`, `refund`, `refund_status`. Faults by
/// `inject_for` match the payer's or payee's MSISDN, an `X-Reference-Id`,
/// the `referenceIdToRefund` of a refund, or the reference a status query
/// asks about; `ids_for` counts the creating requests' `X-Reference-Id`s.
impl FakeMtn {
    /// Our API user is provisioned for `market` too.
    pub fn provision(&self, market: &str) {
        self.wire().markets.lock().push(market.into());
    }

    pub fn transaction(&self, reference: &str) -> Option<Transaction> {
        self.wire().transactions.lock().get(reference).cloned()
    }

    /// Every transaction MTN holds.
    pub fn transactions(&self) -> Vec<Transaction> {
        self.wire().transactions.lock().values().cloned().collect()
    }

    /// The refunds of a request to pay.
    pub fn refunds_of(&self, reference: &str) -> Vec<Transaction> {
        self.transactions()
            .into_iter()
            .filter(|t| t.refund_of.as_deref() == Some(reference))
            .collect()
    }

    /// The customer (or the payee's side) acts now on a pending transaction,
    /// whatever its script said: it becomes final and MTN calls back once.
    pub async fn customer_acts(&self, reference: &str, outcome: Outcome) {
        decide(self.wire(), reference, outcome).await;
    }

    /// MTN forgets every access token it issued (a restart, a key rotation):
    /// the next call with one is answered 401.
    pub fn revoke_tokens(&self) {
        self.wire().tokens.lock().clear();
    }

    /// The operator's books say another amount for this operation (a
    /// customer who paid another sum on a USSD menu, a provider's bug):
    /// every later answer and callback about it carries that amount.
    pub fn set_amount(&self, reference: &str, amount: &str) {
        if let Some(t) = self.wire().transactions.lock().get_mut(reference) {
            t.amount = amount.into();
        }
    }

    /// The `expires_in` of the tokens issued from now on.
    pub fn set_token_lifetime(&self, seconds: u64) {
        self.wire()
            .token_lifetime_s
            .store(seconds, std::sync::atomic::Ordering::Relaxed);
    }

    /// The operator changes its mind (it happens): the status resource now says this.
    pub fn set_status(&self, reference: &str, status: &str, reason: Option<&str>) {
        if let Some(t) = self.wire().transactions.lock().get_mut(reference) {
            t.status = status.into();
            t.reason = reason.map(str::to_string);
        }
    }

    /// PUTs `body` to the transaction's callback URL, as MTN would; returns our answer.
    pub async fn put_callback(&self, reference: &str, body: Vec<u8>) -> u16 {
        let url = self
            .transaction(reference)
            .and_then(|t| t.callback_url)
            .expect("transaction with a callback URL");
        self.wire()
            .plumbing
            .call_back("PUT", &url, Vec::new(), body)
            .await
    }

    /// PUTs the transaction as it stands now.
    pub async fn send_callback(&self, reference: &str) -> u16 {
        let t = self.transaction(reference).expect("known transaction");
        self.put_callback(reference, serde_json::to_vec(&resource(&t)).unwrap())
            .await
    }
}

fn resource(t: &Transaction) -> Value {
    let party = json!({"partyIdType": "MSISDN", "partyId": t.party});
    let mut v = json!({
        "amount": t.amount,
        "currency": t.currency,
        "externalId": t.external_id,
        "payerMessage": "",
        "payeeNote": "",
        "status": t.status,
    });
    if let Some(id) = &t.financial_transaction_id {
        v["financialTransactionId"] = json!(id);
    }
    match t.kind {
        Kind::Transfer => v["payee"] = party,
        _ => v["payer"] = party,
    }
    if let Some(r) = &t.reason {
        v["reason"] = json!(r);
    }
    v
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(status, &json!({"code": code, "message": message}))
}

async fn handle(inner: Arc<Mtn>, mut req: Received) -> Reply {
    let path = req.path.trim_matches('/').to_string();
    let segments: Vec<&str> = path.split('/').collect();
    let route: Option<(&'static str, Kind)> = match (req.method.as_str(), segments.as_slice()) {
        ("POST", [product, "token"]) => {
            inner.plumbing.record("token", &req);
            let product = product.to_string();
            return with_fault(&inner.plumbing, "token", async {
                token(&inner, &product, &req)
            })
            .await;
        }
        ("POST", ["collection", "v1_0", "requesttopay"]) => {
            Some(("requesttopay", Kind::RequestToPay))
        }
        ("POST", ["disbursement", "v1_0", "transfer"]) => Some(("transfer", Kind::Transfer)),
        ("POST", ["disbursement", "v2_0", "refund"]) => Some(("refund", Kind::Refund)),
        _ => None,
    };
    if let Some((endpoint, kind)) = route {
        identify_creation(&inner, kind, &mut req);
        inner.plumbing.record(endpoint, &req);
        let work = create(inner.clone(), kind, req.clone());
        return with_fault_for(&inner.plumbing, endpoint, &req, work).await;
    }
    if let (
        "GET",
        [
            product @ ("collection" | "disbursement"),
            "v1_0",
            "account",
            "balance",
        ],
    ) = (req.method.as_str(), segments.as_slice())
    {
        inner.plumbing.record("balance", &req);
        let product = product.to_string();
        let work = async {
            if let Err(denied) = authorize(&inner, &product, &req) {
                return denied;
            }
            let market = req
                .header("X-Target-Environment")
                .unwrap_or_default()
                .to_string();
            Reply::json(200, &balance(&inner, &product, &market))
        };
        return with_fault(&inner.plumbing, "balance", work).await;
    }
    let lookup: Option<(&'static str, Kind, &str)> =
        match (req.method.as_str(), segments.as_slice()) {
            ("GET", ["collection", "v1_0", "requesttopay", r]) => {
                Some(("requesttopay_status", Kind::RequestToPay, r))
            }
            ("GET", ["disbursement", "v1_0", "transfer", r]) => {
                Some(("transfer_status", Kind::Transfer, r))
            }
            ("GET", ["disbursement", "v1_0", "refund", r]) => {
                Some(("refund_status", Kind::Refund, r))
            }
            _ => None,
        };
    match lookup {
        Some((endpoint, kind, reference)) => {
            let party = inner
                .transactions
                .lock()
                .get(reference)
                .map(|t| t.party.clone());
            req.add_keys([Some(reference), party.as_deref()].into_iter().flatten());
            inner.plumbing.record(endpoint, &req);
            let product = product_of(kind);
            let work = async {
                if let Err(denied) = authorize(&inner, product, &req) {
                    return denied;
                }
                let market = req.header("X-Target-Environment").unwrap_or_default();
                match inner.transactions.lock().get(reference) {
                    Some(t) if t.kind == kind && t.market == market => {
                        Reply::json(200, &resource(t))
                    }
                    _ => error(
                        404,
                        "RESOURCE_NOT_FOUND",
                        "Requested resource was not found.",
                    ),
                }
            };
            with_fault_for(&inner.plumbing, endpoint, &req, work).await
        }
        None => error(404, "RESOURCE_NOT_FOUND", "No such endpoint."),
    }
}

/// What identifies a creating request: its `X-Reference-Id` (the id it is
/// created under), the party's MSISDN, `externalId`, and for a refund the
/// request to pay it refunds (and that payer).
fn identify_creation(inner: &Mtn, kind: Kind, req: &mut Received) {
    let body = req.json().unwrap_or(Value::Null);
    let reference = req.header("X-Reference-Id").map(str::to_string);
    let refunded = body["referenceIdToRefund"].as_str().map(str::to_string);
    let party = match kind {
        Kind::RequestToPay => body["payer"]["partyId"].as_str().map(str::to_string),
        Kind::Transfer => body["payee"]["partyId"].as_str().map(str::to_string),
        Kind::Refund => refunded
            .as_ref()
            .and_then(|r| inner.transactions.lock().get(r).map(|t| t.party.clone())),
    };
    req.op_id = reference.clone();
    let external = body["externalId"].as_str().map(str::to_string);
    req.add_keys(
        [reference, refunded, party, external]
            .iter()
            .flatten()
            .map(String::as_str),
    );
}

/// What a product's account in `market` holds, as `GetAccountBalance`
/// answers (`availableBalance`, `currency`): the collection account what its
/// customers paid, the disbursement account its float (5,000,000) less what
/// it paid out and refunded.
fn balance(inner: &Mtn, product: &str, market: &str) -> Value {
    let transactions = inner.transactions.lock();
    let moved = |kinds: &[Kind]| -> i64 {
        transactions
            .values()
            .filter(|t| t.market == market && t.succeeded() && kinds.contains(&t.kind))
            .map(|t| t.amount.parse::<i64>().unwrap_or(0))
            .sum()
    };
    let available = match product {
        "collection" => moved(&[Kind::RequestToPay]),
        _ => 5_000_000 - moved(&[Kind::Transfer, Kind::Refund]),
    };
    let currency = if market == "sandbox" { "EUR" } else { "XOF" };
    json!({"availableBalance": available.to_string(), "currency": currency})
}

fn product_of(kind: Kind) -> &'static str {
    match kind {
        Kind::RequestToPay => "collection",
        Kind::Transfer | Kind::Refund => "disbursement",
    }
}

fn subscription_key(product: &str) -> &'static str {
    if product == "collection" {
        COLLECTION_KEY
    } else {
        DISBURSEMENT_KEY
    }
}

fn token(inner: &Mtn, product: &str, req: &Received) -> Reply {
    if !matches!(product, "collection" | "disbursement") {
        return error(404, "RESOURCE_NOT_FOUND", "No such product.");
    }
    if req.header("Ocp-Apim-Subscription-Key") != Some(subscription_key(product)) {
        return Reply::json(
            401,
            &json!({"statusCode": 401, "message": "Access denied due to invalid subscription key."}),
        );
    }
    let expected = format!("Basic {}", base64(&format!("{API_USER}:{API_KEY}")));
    if req.header("Authorization") != Some(expected.as_str()) {
        return Reply::json(401, &json!({"error": "login_failed"}));
    }
    let token = uuid::Uuid::new_v4().simple().to_string();
    inner.tokens.lock().insert(token.clone(), product.into());
    Reply::json(
        200,
        &json!({"access_token": token, "token_type": "access_token",
                "expires_in": inner.token_lifetime_s.load(std::sync::atomic::Ordering::Relaxed)}),
    )
}

/// The checks every API call gets: bearer token of this product, its
/// subscription key, the target environment.
fn authorize(inner: &Mtn, product: &str, req: &Received) -> Result<(), Reply> {
    if req.header("Ocp-Apim-Subscription-Key") != Some(subscription_key(product)) {
        return Err(Reply::json(
            401,
            &json!({"statusCode": 401, "message": "Access denied due to invalid subscription key."}),
        ));
    }
    let token = req
        .header("Authorization")
        .and_then(|h| h.strip_prefix("Bearer "))
        .unwrap_or_default();
    if inner.tokens.lock().get(token).map(String::as_str) != Some(product) {
        return Err(error(
            401,
            "UNAUTHORIZED",
            "Invalid or expired access token.",
        ));
    }
    let market = req.header("X-Target-Environment").unwrap_or_default();
    if !inner.markets.lock().iter().any(|m| m == market) {
        return Err(error(
            403,
            "NOT_ALLOWED_TARGET_ENVIRONMENT",
            "Access to target environment is forbidden.",
        ));
    }
    Ok(())
}

async fn create(inner: Arc<Mtn>, kind: Kind, req: Received) -> Reply {
    if let Err(denied) = authorize(&inner, product_of(kind), &req) {
        return denied;
    }
    let reference = req.header("X-Reference-Id").unwrap_or_default().to_string();
    // MTN's documented 400 causes include "X-Reference-Id is not a UUID version 4".
    if !is_uuid(&reference) || reference.as_bytes()[14] != b'4' {
        return error(
            400,
            "INVALID_REFERENCE_ID",
            "X-Reference-Id must be a UUID version 4.",
        );
    }
    let Some(body) = req.json() else {
        return error(400, "BAD_REQUEST", "The body is not JSON.");
    };
    // MTN refuses some characters in the notes (apostrophes among them), and
    // notes longer than 160 characters.
    for note in ["payerMessage", "payeeNote"] {
        if body[note].as_str().is_some_and(|n| {
            n.chars().count() > 160
                || n.chars()
                    .any(|c| matches!(c, '\'' | '"' | '<' | '>' | '&' | ';'))
        }) {
            return error(
                400,
                "BAD_REQUEST",
                &format!("{note} is too long or contains characters that are not allowed."),
            );
        }
    }
    if !is_amount(body.get("amount")) || !body["externalId"].is_string() {
        return error(
            400,
            "BAD_REQUEST",
            "amount (a string), currency and externalId are required.",
        );
    }
    let market = req
        .header("X-Target-Environment")
        .unwrap_or_default()
        .to_string();
    let currency = body["currency"].as_str().unwrap_or_default().to_string();
    if !MARKETS.contains(&(market.as_str(), currency.as_str())) {
        return error(
            400,
            "INVALID_CURRENCY",
            "Currency not supported: it must be the target environment's.",
        );
    }
    let refund_of = body["referenceIdToRefund"].as_str().map(str::to_string);
    let party = match kind {
        Kind::RequestToPay => Some(&body["payer"]),
        Kind::Transfer => Some(&body["payee"]),
        Kind::Refund => None,
    };
    let msisdn = match party {
        Some(p) => {
            let id = p["partyId"].as_str().unwrap_or_default();
            if p["partyIdType"] != "MSISDN"
                || id.is_empty()
                || !id.bytes().all(|b| b.is_ascii_digit())
            {
                return error(
                    400,
                    "INVALID_PARTY",
                    "partyId must be an MSISDN (digits only).",
                );
            }
            id.to_string()
        }
        None => {
            // A refund goes back to the payer of a successful request to pay.
            let original = body["referenceIdToRefund"].as_str().unwrap_or_default();
            let transactions = inner.transactions.lock();
            match transactions.get(original) {
                Some(t) if t.kind == Kind::RequestToPay && t.status == "SUCCESSFUL" => {
                    t.party.clone()
                }
                Some(_) => {
                    return error(
                        409,
                        "NOT_ALLOWED",
                        "Only a successful payment can be refunded.",
                    );
                }
                None => return error(404, "RESOURCE_NOT_FOUND", "referenceIdToRefund is unknown."),
            }
        }
    };
    {
        let mut transactions = inner.transactions.lock();
        if transactions.contains_key(&reference) {
            return error(
                409,
                "RESOURCE_ALREADY_EXIST",
                "Duplicated reference id. Creation of resource failed.",
            );
        }
        transactions.insert(
            reference.clone(),
            Transaction {
                kind,
                reference: reference.clone(),
                external_id: body["externalId"].as_str().unwrap_or_default().into(),
                amount: body["amount"].as_str().unwrap_or_default().into(),
                currency,
                party: msisdn,
                status: "PENDING".into(),
                reason: None,
                market,
                callback_url: req.header("X-Callback-Url").map(str::to_string),
                financial_transaction_id: None,
                refund_of: refund_of.filter(|_| kind == Kind::Refund),
            },
        );
    }
    let delay = inner.plumbing.settle_delay();
    tokio::spawn(settle(inner, reference, delay));
    Reply::empty(202)
}

/// The customer acts (or not) after `delay`, as the phone's script says.
async fn settle(inner: Arc<Mtn>, reference: String, delay: Duration) {
    tokio::time::sleep(delay).await;
    let party = match inner.transactions.lock().get(&reference) {
        Some(t) => t.party.clone(),
        None => return,
    };
    let outcome = inner.plumbing.outcomes.of(&party);
    decide(&inner, &reference, outcome).await;
}

/// A pending transaction becomes final with `outcome` (`Stay`: it does not);
/// then one callback, if asked for.
async fn decide(inner: &Arc<Mtn>, reference: &str, outcome: Outcome) {
    let settled = {
        let mut transactions = inner.transactions.lock();
        let Some(t) = transactions.get_mut(reference) else {
            return;
        };
        if t.status != "PENDING" {
            return;
        }
        match outcome {
            Outcome::Succeed => {
                t.status = "SUCCESSFUL".into();
                t.financial_transaction_id = Some(format!("{}", rand_digits()));
            }
            Outcome::Fail(reason) => {
                t.status = "FAILED".into();
                t.reason = Some(reason.into());
            }
            Outcome::Stay => return,
        }
        t.clone()
    };
    let Some(url) = settled.callback_url.clone() else {
        return;
    };
    let body = serde_json::to_vec(&resource(&settled)).unwrap();
    inner
        .plumbing
        .dispatch("PUT", &url, Vec::new, body, DELIVERY)
        .await;
}

/// How long MTN waits for the partner's answer to a callback.
pub const CALLBACK_PATIENCE: Duration = Duration::from_secs(2);

/// MTN's callback documentation: the partner has
/// 2 s to answer with a 2xx, MTN tries up to 20 times, then blocks the URL.
/// The pause between attempts is not stated: 200 ms here.
pub const DELIVERY: Delivery = Delivery {
    patience: CALLBACK_PATIENCE,
    attempts: 20,
    pause: Duration::from_millis(200),
    only_200: false,
};

/// MTN refusing a partner for the partner's own doing, before doing
/// anything, in the shapes its gateway answers: 401 and 429 from the API
/// gateway in front of the Open API (`{statusCode, message}`), 403 and 404
/// as the Open API's `{code, message}` (codes from MTN's common errors list).
pub fn refusal(status: u16) -> Fault {
    let body = match status {
        401 => json!({"statusCode": 401,
            "message": "Access denied due to invalid subscription key. Make sure to provide a valid key for an active subscription."}),
        403 => {
            json!({"code": "NOT_ALLOWED", "message": "Authorization failed. Insufficient permissions."})
        }
        404 => {
            json!({"code": "RESOURCE_NOT_FOUND", "message": "Requested resource was not found."})
        }
        429 => {
            json!({"statusCode": 429, "message": "Rate limit is exceeded. Try again in 1 seconds."})
        }
        other => json!({"code": "NOT_ALLOWED", "message": format!("Refused ({other}).")}),
    };
    Fault::Reply(Reply::json(status, &body))
}

fn rand_digits() -> u64 {
    (uuid::Uuid::new_v4().as_u128() % 9_000_000_000) as u64 + 1_000_000_000
}

/// Standard base64, enough for a Basic authorization header.
fn base64(input: &str) -> String {
    const TABLE: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let bytes = input.as_bytes();
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(TABLE[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
