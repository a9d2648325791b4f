//! Records and their keys in this component's storage. Every key starts
//! with environment and merchant, so a lookup made for one merchant and
//! environment cannot reach another's data.
//!
//! | table | key | value |
//! |---|---|---|
//! | payments | env/merchant/id | [`Payment`] |
//! | refs | env/merchant/reference | payment id |
//! | idem | env/merchant/idempotency-key | [`IdemRecord`] |
//! | expiry | expires_ms/env/merchant/id | (empty) — payments not yet final |
//! | active | next_check_ms/env/merchant/id | (empty) — payments to poll at the PSP |
//! | owners | env/id | merchant id — for operator callbacks, which carry no merchant |
//! | pspref | env/operator/psp_reference | merchant/id |
//! | refunds | env/merchant/refund id | [`Refund`] |
//! | refund_active | next_check_ms/env/merchant/refund id | (empty) — refunds to poll |

use mmc_domain::{Mode, Status};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ApiError;
use crate::mmc::platform::storage::{self, Transaction};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Customer {
    pub phone: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Failure {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Payment {
    pub id: String,
    pub merchant_id: String,
    pub environment: String,
    pub reference: String,
    pub status: Status,
    pub amount: u64,
    pub currency: String,
    pub country: String,
    pub mode: Mode,
    pub operator: Option<String>,
    pub customer: Option<Customer>,
    pub description: Option<String>,
    pub callback_url: Option<String>,
    pub external_merchant_id: Option<String>,
    pub metadata: Option<Value>,
    pub psp_reference: Option<String>,
    pub checkout_url: Option<String>,
    pub expires_at_ms: u64,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    pub completed_at_ms: Option<u64>,
    pub failure: Option<Failure>,
    #[serde(default)]
    pub otp_attempts: u32,
    #[serde(default)]
    pub refunded_amount: u64,
    /// Hash of the creating request's canonical body (reference replays compare it).
    pub request_hash: String,
    #[serde(default)]
    pub refund_reserved: u64,
    #[serde(default)]
    pub generation: Generation,
    #[serde(default)]
    pub cancel_reason: Option<String>,
    /// Shown on the hosted checkout page.
    #[serde(default)]
    pub merchant_name: String,
    /// Next PSP poll, when the payment is in `active`.
    #[serde(default)]
    pub next_check_ms: Option<u64>,
    #[serde(default)]
    pub checks: u32,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Generation {
    #[default]
    Current,
    Legacy,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RefundStatus {
    Pending,
    Completed,
    Failed,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Refund {
    pub id: String,
    pub payment_id: String,
    pub merchant_id: String,
    pub environment: String,
    pub reference: String,
    pub status: RefundStatus,
    pub amount: u64,
    pub currency: String,
    pub reason: String,
    pub metadata: Option<Value>,
    pub psp_reference: Option<String>,
    pub failure: Option<Failure>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    #[serde(default)]
    pub next_check_ms: Option<u64>,
    #[serde(default)]
    pub checks: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdemRecord {
    pub request_hash: String,
    pub payment_id: String,
    pub created_ms: u64,
    /// False while the creating request still runs.
    pub done: bool,
}

pub fn scope(env: &str, merchant: &str, id: &str) -> String {
    format!("{env}/{merchant}/{id}")
}

pub fn time_key(ms: u64, env: &str, merchant: &str, id: &str) -> String {
    format!("{ms:013}/{env}/{merchant}/{id}")
}

/// (ms, env, merchant, id) of a time-ordered index key.
pub fn parse_time_key(key: &str) -> Option<(u64, String, String, String)> {
    let mut p = key.splitn(4, '/');
    Some((
        p.next()?.parse().ok()?,
        p.next()?.into(),
        p.next()?.into(),
        p.next()?.into(),
    ))
}

fn decode<T: for<'de> Deserialize<'de>>(bytes: Option<Vec<u8>>) -> Result<Option<T>, ApiError> {
    bytes
        .map(|b| {
            serde_json::from_slice(&b)
                .map_err(|e| ApiError::internal(format!("corrupt record: {e}")))
        })
        .transpose()
}

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("records serialise")
}

/// Reads outside a transaction (committed data).
pub fn read_payment(
    env: &str,
    merchant: &str,
    id_or_reference: &str,
) -> Result<Option<Payment>, ApiError> {
    if id_or_reference.is_empty() || id_or_reference.len() > 200 || id_or_reference.contains('/') {
        return Ok(None);
    }
    if let Some(p) = decode(storage::get(
        "payments",
        &scope(env, merchant, id_or_reference),
    )?)? {
        return Ok(Some(p));
    }
    match storage::get("refs", &scope(env, merchant, id_or_reference))? {
        Some(id) => decode(storage::get(
            "payments",
            &scope(env, merchant, &String::from_utf8_lossy(&id)),
        )?),
        None => Ok(None),
    }
}

pub struct Tx(pub Transaction);

impl Tx {
    pub fn begin() -> Result<Tx, ApiError> {
        Ok(Tx(storage::begin()?))
    }

    pub fn commit(self) -> Result<(), ApiError> {
        Ok(self.0.commit()?)
    }

    pub fn payment(
        &self,
        env: &str,
        merchant: &str,
        id: &str,
    ) -> Result<Option<Payment>, ApiError> {
        decode(self.0.get("payments", &scope(env, merchant, id))?)
    }

    pub fn payment_id_by_reference(
        &self,
        env: &str,
        merchant: &str,
        reference: &str,
    ) -> Result<Option<String>, ApiError> {
        Ok(self
            .0
            .get("refs", &scope(env, merchant, reference))?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    pub fn idem(
        &self,
        env: &str,
        merchant: &str,
        key: &str,
    ) -> Result<Option<IdemRecord>, ApiError> {
        decode(self.0.get("idem", &scope(env, merchant, key))?)
    }

    pub fn put_idem(
        &self,
        env: &str,
        merchant: &str,
        key: &str,
        rec: &IdemRecord,
    ) -> Result<(), ApiError> {
        Ok(self
            .0
            .put("idem", &scope(env, merchant, key), &encode(rec))?)
    }

    /// Inserts a new payment with its reference and expiry indexes.
    pub fn insert_payment(&self, p: &Payment) -> Result<(), ApiError> {
        self.0.put(
            "refs",
            &scope(&p.environment, &p.merchant_id, &p.reference),
            p.id.as_bytes(),
        )?;
        self.0.put(
            "expiry",
            &time_key(p.expires_at_ms, &p.environment, &p.merchant_id, &p.id),
            b"",
        )?;
        // Callbacks and checkout links carry no merchant: find it from the id.
        self.0.put(
            "owners",
            &format!("{}/{}", p.environment, p.id),
            p.merchant_id.as_bytes(),
        )?;
        self.save_payment(p, None)
    }

    /// Writes `p`, keeping the `expiry` and `active` indexes in step with its
    /// status. `previous_check` is the `next_check_ms` it was stored with.
    pub fn save_payment(&self, p: &Payment, previous_check: Option<u64>) -> Result<(), ApiError> {
        let (env, m, id) = (&p.environment, &p.merchant_id, &p.id);
        if let Some(at) = previous_check {
            self.0.delete("active", &time_key(at, env, m, id))?;
        }
        if p.status.is_terminal() {
            self.0
                .delete("expiry", &time_key(p.expires_at_ms, env, m, id))?;
        } else if let Some(at) = p.next_check_ms {
            self.0.put("active", &time_key(at, env, m, id), b"")?;
        }
        if let (Some(op), Some(r)) = (&p.operator, &p.psp_reference) {
            self.0.put(
                "pspref",
                &format!("{env}/{op}/{r}"),
                format!("{m}/{id}").as_bytes(),
            )?;
        }
        Ok(self.0.put("payments", &scope(env, m, id), &encode(p))?)
    }

    /// The merchant owning payment or refund `id` (callbacks carry no merchant).
    pub fn owner(&self, env: &str, id: &str) -> Result<Option<String>, ApiError> {
        Ok(self
            .0
            .get("owners", &format!("{env}/{id}"))?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    /// (merchant, id) of the payment an operator knows by `psp_reference`.
    pub fn by_psp_reference(
        &self,
        env: &str,
        operator: &str,
        psp_reference: &str,
    ) -> Result<Option<(String, String)>, ApiError> {
        Ok(self
            .0
            .get("pspref", &format!("{env}/{operator}/{psp_reference}"))?
            .and_then(|b| {
                let s = String::from_utf8_lossy(&b).into_owned();
                s.split_once('/')
                    .map(|(m, i)| (m.to_string(), i.to_string()))
            }))
    }

    pub fn refund(&self, env: &str, merchant: &str, id: &str) -> Result<Option<Refund>, ApiError> {
        decode(self.0.get("refunds", &scope(env, merchant, id))?)
    }

    /// Writes a refund, keeping `refund_active` in step. `previous_check` as for payments.
    pub fn save_refund(&self, r: &Refund, previous_check: Option<u64>) -> Result<(), ApiError> {
        let (env, m, id) = (&r.environment, &r.merchant_id, &r.id);
        if let Some(at) = previous_check {
            self.0.delete("refund_active", &time_key(at, env, m, id))?;
        }
        if let (RefundStatus::Pending, Some(at)) = (r.status, r.next_check_ms) {
            self.0
                .put("refund_active", &time_key(at, env, m, id), b"")?;
        }
        self.0.put("owners", &format!("{env}/{id}"), m.as_bytes())?;
        Ok(self.0.put("refunds", &scope(env, m, id), &encode(r))?)
    }

    pub fn emit(&self, event: &storage::OutboxEvent) -> Result<(), ApiError> {
        Ok(self.0.emit(event)?)
    }
}

/// An entry of a time-ordered index that is due.
pub struct Due {
    pub key: String,
    pub env: String,
    pub merchant: String,
    pub id: String,
}

/// Index entries due at `now` (keys of a time-ordered table).
pub fn due(table: &str, now: u64, limit: u32) -> Result<Vec<Due>, ApiError> {
    let end = format!("{:013}~", now);
    Ok(storage::scan(table, "", &end, limit)?
        .into_iter()
        .filter_map(|e| {
            parse_time_key(&e.key).map(|(_, env, merchant, id)| Due {
                key: e.key,
                env,
                merchant,
                id,
            })
        })
        .collect())
}

/// Removes an index entry whose payment is gone.
pub fn drop_index_entry(table: &str, key: &str) -> Result<(), ApiError> {
    let tx = Tx::begin()?;
    tx.0.delete(table, key)?;
    tx.commit()
}
