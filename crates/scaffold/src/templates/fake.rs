//! A fake Acme collections API on the fake-operator kit (`kit.rs`):
//! the wire format below, its documented behaviours in the table, and the
//! kit's faults, callback modes and customers for free.
//!
//! | documented behaviour                         | here                                   |
//! |----------------------------------------------|----------------------------------------|
//! | `Authorization: Bearer <api key>`            | anything else: 401 `UNAUTHORIZED`      |
//! | `POST /v1/collections` `{reference, amount, currency, msisdn, callback_url}` | 201, `PENDING`; a reference seen before: 409 `DUPLICATE_REFERENCE`, nothing created |
//! | amount a string of digits, currency XOF      | otherwise 400 `INVALID_REQUEST`        |
//! | the customer approves or declines on the phone | after `settle_after`, by the kit's outcomes (`FAILED` with `PAYER_DECLINED` or the outcome's code) |
//! | `GET /v1/collections?reference=`             | 200 `{data: [...]}` (empty: none)      |
//! | one callback `{event: "collection.updated", data}` to `callback_url` once final, `X-Signature: t=<ts>,v1=<hex HMAC-SHA256(secret, "<ts>.<body>")>` | 3 s to answer 2xx, 3 attempts ([`DELIVERY`]) |
//!
//! Endpoints (for `inject`): `collection_create`, `collection_list`.
//! `inject_for` matches the customer's MSISDN or our id (`reference`);
//! `ids_for` counts the references collections were created under.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use hmac::{Hmac, Mac};
use mmc_config::ComponentConfig;
use parking_lot::Mutex;
use serde_json::{Value, json};
use sha2::Sha256;

use super::{
    Delivery, FakeServer, Outcome, Plumbing, Received, Reply, Wire, is_amount, with_fault_for,
};

pub const API_KEY: &str = "acme_live_FAKEKEY0123456789";
pub const WEBHOOK_SECRET: &str = "acme_whsec_FAKE0123456789";

/// The provider's callback rule (the table above).
pub const DELIVERY: Delivery = Delivery {
    patience: Duration::from_secs(3),
    attempts: 3,
    pause: Duration::from_millis(200),
    only_200: false,
};

#[derive(Clone, Debug)]
pub struct Collection {
    pub id: String,
    /// Our payment id.
    pub reference: String,
    pub amount: String,
    pub currency: String,
    pub msisdn: String,
    /// `PENDING`, `SUCCESSFUL`, `FAILED`.
    pub status: String,
    pub failure_reason: Option<String>,
    pub callback_url: String,
}

impl Collection {
    /// Money moved: the customer approved.
    pub fn succeeded(&self) -> bool {
        self.status == "SUCCESSFUL"
    }
}

/// Acme's state: its collections by id.
pub struct Acme {
    plumbing: Plumbing,
    collections: Mutex<HashMap<String, Collection>>,
}

/// A fake Acme server (the kit's [`FakeServer`] over [`Acme`]).
pub type FakeAcme = FakeServer<Acme>;

impl Wire for Acme {
    fn new() -> Acme {
        Acme {
            plumbing: Plumbing::default(),
            collections: Mutex::new(HashMap::new()),
        }
    }

    fn plumbing(&self) -> &Plumbing {
        &self.plumbing
    }

    fn handle(self: Arc<Self>, req: Received) -> BoxFuture<'static, Reply> {
        Box::pin(handle(self, req))
    }

    /// The adapter's API key and callback secret.
    fn configure(&self, c: &mut ComponentConfig) {
        c.secrets.insert("api_key".into(), API_KEY.into());
        c.secrets
            .insert("webhook_secret".into(), WEBHOOK_SECRET.into());
    }
}

/// Acme's own: its collections, and the customer acting now.
impl FakeAcme {
    /// Every collection made under our id (`reference`).
    pub fn collections_for(&self, reference: &str) -> Vec<Collection> {
        self.wire()
            .collections
            .lock()
            .values()
            .filter(|c| c.reference == reference)
            .cloned()
            .collect()
    }

    /// The customer acts now on the pending collection made under our id,
    /// whatever the script said; Acme then calls back.
    pub async fn customer_acts(&self, reference: &str, outcome: Outcome) {
        for c in self.collections_for(reference) {
            decide(self.wire(), &c.id, outcome.clone()).await;
        }
    }

    /// The callback Acme sends about the collection under our id:
    /// (headers, body), signed with `secret` now.
    pub fn signed_callback(
        &self,
        reference: &str,
        secret: &str,
    ) -> (Vec<(String, String)>, Vec<u8>) {
        let c = self
            .collections_for(reference)
            .pop()
            .expect("a collection under this reference");
        let body = event(&c);
        (vec![signature_header(secret, &body)], body)
    }
}

async fn handle(inner: Arc<Acme>, mut req: Received) -> Reply {
    let endpoint = match (req.method.as_str(), req.path.as_str()) {
        ("POST", "/v1/collections") => "collection_create",
        ("GET", "/v1/collections") => "collection_list",
        _ => return error(404, "NOT_FOUND", "No such endpoint."),
    };
    identify(endpoint, &mut req);
    inner.plumbing.record(endpoint, &req);
    let work = async {
        if req.header("Authorization") != Some(format!("Bearer {API_KEY}").as_str()) {
            return error(401, "UNAUTHORIZED", "The API key is missing or invalid.");
        }
        match endpoint {
            "collection_create" => create(&inner, &req),
            _ => {
                let reference = req.query_param("reference").unwrap_or_default();
                let data: Vec<Value> = inner
                    .collections
                    .lock()
                    .values()
                    .filter(|c| c.reference == reference)
                    .map(collection_json)
                    .collect();
                Reply::json(200, &json!({ "data": data }))
            }
        }
    };
    with_fault_for(&inner.plumbing, endpoint, &req, work).await
}

/// What identifies a request: our id and the customer's number; a creation
/// is made under our id.
fn identify(endpoint: &str, req: &mut Received) {
    let body = req.json().unwrap_or(Value::Null);
    let reference = match endpoint {
        "collection_create" => body["reference"].as_str().map(str::to_string),
        _ => req.query_param("reference"),
    };
    let msisdn = body["msisdn"].as_str().map(str::to_string);
    if endpoint == "collection_create" {
        req.op_id = reference.clone();
    }
    req.add_keys([reference, msisdn].iter().flatten().map(String::as_str));
}

fn create(inner: &Arc<Acme>, req: &Received) -> Reply {
    let Some(body) = req.json() else {
        return error(400, "INVALID_REQUEST", "The body is not JSON.");
    };
    let text = |k: &str| body[k].as_str().unwrap_or_default().to_string();
    let msisdn = text("msisdn");
    if !is_amount(body.get("amount"))
        || body["currency"] != "XOF"
        || text("reference").is_empty()
        || msisdn.is_empty()
        || !msisdn.bytes().all(|b| b.is_ascii_digit())
    {
        return error(
            400,
            "INVALID_REQUEST",
            "reference, amount (a string), currency XOF and msisdn (digits) are required.",
        );
    }
    let c = Collection {
        id: format!("col_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]),
        reference: text("reference"),
        amount: text("amount"),
        currency: text("currency"),
        msisdn,
        status: "PENDING".into(),
        failure_reason: None,
        callback_url: text("callback_url"),
    };
    {
        let mut collections = inner.collections.lock();
        if collections.values().any(|x| x.reference == c.reference) {
            return error(
                409,
                "DUPLICATE_REFERENCE",
                "A collection exists under this reference.",
            );
        }
        collections.insert(c.id.clone(), c.clone());
    }
    let (settle, delay) = (inner.clone(), inner.plumbing.settle_delay());
    let (id, outcome) = (c.id.clone(), inner.plumbing.outcomes.of(&c.msisdn));
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        decide(&settle, &id, outcome).await;
    });
    Reply::json(201, &collection_json(&c))
}

/// A pending collection becomes final with `outcome` (`Stay`: it does
/// not); then its callback, as the kit's callback mode says.
async fn decide(inner: &Arc<Acme>, id: &str, outcome: Outcome) {
    let settled = {
        let mut collections = inner.collections.lock();
        let Some(c) = collections.get_mut(id) else {
            return;
        };
        if c.status != "PENDING" {
            return;
        }
        match outcome {
            Outcome::Succeed => c.status = "SUCCESSFUL".into(),
            Outcome::Fail(reason) => {
                c.status = "FAILED".into();
                c.failure_reason = Some(reason.into());
            }
            Outcome::Stay => return,
        }
        c.clone()
    };
    let body = event(&settled);
    let sign = || vec![signature_header(WEBHOOK_SECRET, &body)];
    inner
        .plumbing
        .dispatch("POST", &settled.callback_url, sign, body.clone(), DELIVERY)
        .await;
}

fn collection_json(c: &Collection) -> Value {
    json!({
        "id": c.id,
        "reference": c.reference,
        "status": c.status,
        "amount": c.amount,
        "currency": c.currency,
        "msisdn": c.msisdn,
        "failure_reason": c.failure_reason,
    })
}

fn event(c: &Collection) -> Vec<u8> {
    serde_json::to_vec(&json!({"event": "collection.updated", "data": collection_json(c)})).unwrap()
}

/// `X-Signature` for `body`, signed now with `secret`.
fn signature_header(secret: &str, body: &[u8]) -> (String, String) {
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("{t}.").as_bytes());
    mac.update(body);
    let hex = hex::encode(mac.finalize().into_bytes());
    ("X-Signature".into(), format!("t={t},v1={hex}"))
}

fn error(status: u16, code: &str, message: &str) -> Reply {
    Reply::json(status, &json!({"code": code, "message": message}))
}
