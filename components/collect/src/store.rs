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
//! | payment_refunds | env/merchant/payment id/refund id | (empty) — a payment's refunds |
//! | refund_idem | env/merchant/idempotency-key | [`RefundIdem`] |
//! | listing | env/merchant/status/country/operator/id | (empty) — the list's filters ([`listing_key`]; status: the final one, or `pending` for every payment in progress) |
//! | meta | `listing-v2` / `listing-v2-backfill` | set once every payment is in `listing` as keyed now / how far its backfill got |

use rustc_hash::FxHashMap;
use std::cell::RefCell;

use mmc_domain::Status;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ApiError;
use crate::mmc::platform::storage::{self, Transaction};

pub use mmc_domain::record::{Customer, Failure, Generation, Payment, Route};

/// A refund request's Idempotency-Key (table `refund_idem`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefundIdem {
    pub request_hash: String,
    pub refund_id: String,
    pub created_ms: u64,
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
    /// Why the operator's success was not believed (another amount or
    /// currency): the refund stays as it was until someone looks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Failure>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdemRecord {
    pub request_hash: String,
    pub payment_id: String,
    pub created_ms: u64,
    /// Records written before [`Payment::initiating_since_ms`] existed said here that
    /// the creating request still ran (false). New ones leave it out (true):
    /// the payment says it, and the key is written once, not again at the end.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub done: bool,
}

fn yes() -> bool {
    true
}

fn is_true(b: &bool) -> bool {
    *b
}

pub fn scope(env: &str, merchant: &str, id: &str) -> String {
    format!("{env}/{merchant}/{id}")
}

/// The row that indexes a merchant's reference to its payment id.
pub fn reference_row(env: &str, merchant: &str, reference: &str) -> (&'static str, String) {
    ("refs", scope(env, merchant, reference))
}

/// The row that holds a create's Idempotency-Key record.
pub fn idem_row(env: &str, merchant: &str, key: &str) -> (&'static str, String) {
    ("idem", scope(env, merchant, key))
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
    bytes.map(|b| decode_stored(&b)).transpose()
}

fn decode_stored<T: for<'de> Deserialize<'de>>(stored: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(stored).map_err(|e| ApiError::internal(format!("corrupt record: {e}")))
}

/// A payment as stored ([`mmc_domain::record`]: binary, or JSON from before it).
pub fn decode_payment(stored: &[u8]) -> Result<Payment, ApiError> {
    mmc_domain::record::decode(stored)
        .map_err(|e| ApiError::internal(format!("corrupt record: {e}")))
}

/// Binary, unless the setting `payment_records` is `json`: while a fleet is
/// rolled from a version that reads only JSON records (docs/upgrades.md).
/// Read once per instance (one call).
fn encode_payment(p: &Payment) -> Vec<u8> {
    if binary_records() {
        mmc_domain::record::encode(p)
    } else {
        encode(p)
    }
}

/// Payments and their events are stored in their compact binary forms (the
/// setting `payment_records` is not `json`).
pub fn binary_records() -> bool {
    static AS_JSON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    !*AS_JSON.get_or_init(|| {
        crate::mmc::platform::config::get("payment_records").is_some_and(|v| v.trim() == "json")
    })
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
    let by_id = |id: &str| Ok(read_stored_payment(env, merchant, id)?.map(|(p, _)| p));
    if let Some(p) = by_id(id_or_reference)? {
        return Ok(Some(p));
    }
    let (table, key) = reference_row(env, merchant, id_or_reference);
    match storage::get(table, &key)? {
        Some(id) => by_id(&String::from_utf8_lossy(&id)),
        None => Ok(None),
    }
}

/// Payment `id` as stored (committed data): decoded, and the bytes it was
/// decoded from, for a draft to assume exactly ([`Tx::assume_stored_payment`]).
pub fn read_stored_payment(
    env: &str,
    merchant: &str,
    id: &str,
) -> Result<Option<(Payment, Vec<u8>)>, ApiError> {
    let Some(stored) = storage::get("payments", &scope(env, merchant, id))? else {
        return Ok(None);
    };
    Ok(Some((decode_payment(&stored)?, stored)))
}

/// The merchant owning payment `id` in `env`, read outside a transaction.
pub fn read_owner(env: &str, id: &str) -> Result<Option<String>, ApiError> {
    Ok(storage::get("owners", &format!("{env}/{id}"))?
        .map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// Reads a refund outside a transaction (committed data). An id no refund
/// can have (as for payments) is not looked up: storage refuses long keys.
pub fn read_refund(env: &str, merchant: &str, id: &str) -> Result<Option<Refund>, ApiError> {
    if id.is_empty() || id.len() > 200 || id.contains('/') {
        return Ok(None);
    }
    decode(storage::get("refunds", &scope(env, merchant, id))?)
}

/// Refunds of `payment_id`, newest first, older than refund `after`, at most `limit`.
pub fn read_payment_refunds(
    env: &str,
    merchant: &str,
    payment_id: &str,
    after: Option<&str>,
    limit: u32,
) -> Result<Vec<Refund>, ApiError> {
    let prefix = format!("{env}/{merchant}/{payment_id}/");
    let end = match after {
        Some(a) => format!("{prefix}{a}"),
        None => format!("{}0", prefix.trim_end_matches('/')),
    };
    let mut out = Vec::new();
    for storage::Entry { key, .. } in storage::scan_desc("payment_refunds", &prefix, &end, limit)? {
        let id = key.rsplit('/').next().unwrap_or_default();
        if let Some(r) = read_refund(env, merchant, id)? {
            out.push(r);
        }
    }
    Ok(out)
}

/// A write transaction, or a *draft* of one.
///
/// A draft runs the transaction's logic without the storage writer: reads
/// see committed data and are remembered, writes and events are buffered.
/// [`transact`] then takes the writer only to check that what the draft read
/// is unchanged and to write the buffer — so the decoding, the rules and the
/// encoding of records and events happen outside the single writer's
/// hold, which is what bounds write throughput (docs/benchmarks.md).
pub struct Tx(TxMode);

enum TxMode {
    Real(Transaction),
    Draft(RefCell<Draft>),
}

#[derive(Default)]
struct Draft {
    /// (table, key, value seen): each is checked again under the writer.
    reads: Vec<(String, String, Option<Vec<u8>>)>,
    writes: Vec<storage::WriteOp>,
    /// The value of each key read or written, as the draft last saw or made
    /// it. A map, not a scan of `reads` and `writes`: a reconciliation round
    /// touches hundreds of keys in one draft.
    known: Known,
    /// Each payment whose stored value is in `known`, decoded: a payment is
    /// encoded, read back and saved several times in one transaction (told
    /// by `assume_payment`, loaded by `payment`, its listing key looked up
    /// by `save_payment`), and decoding it each time (as JSON then) was ~3%
    /// of a create's CPU. Kept in step with `known` by those; `write_payment` (the
    /// only writer of `payments`) drops what it overwrites.
    payments: FxHashMap<String, Payment>,
}

/// table → key → value. By table first, so a lookup borrows the caller's
/// `&str`s instead of building a key (the draft looks up every key it touches).
/// Hashed, not ordered: a round's keys share long prefixes (environment,
/// merchant, a UUIDv7's time), and a B-tree compared them byte by byte ~10
/// times per lookup — Wasm's `memcmp` is a byte loop; that was 4.7% of a
/// create's CPU under load. FxHash: the keys are our own (ids, time keys) or
/// one request's, so nobody can pick colliding ones in bulk.
#[derive(Default)]
struct Known(FxHashMap<String, FxHashMap<String, Option<Vec<u8>>>>);

impl Known {
    fn get(&self, table: &str, key: &str) -> Option<&Option<Vec<u8>>> {
        self.0.get(table)?.get(key)
    }

    fn insert(&mut self, table: &str, key: &str, value: Option<Vec<u8>>) {
        let keys = match self.0.get_mut(table) {
            Some(keys) => keys,
            None => self.0.entry(table.to_string()).or_default(),
        };
        match keys.get_mut(key) {
            Some(v) => *v = value,
            None => {
                keys.insert(key.to_string(), value);
            }
        }
    }
}

/// Runs `f` as one transaction and commits what it wrote.
///
/// First as a draft, outside the writer; then one `storage.apply` checks the
/// draft's reads and writes its buffer under the writer. If anything it read
/// changed meanwhile (or the draft failed), `f` runs again inside a real
/// transaction, exactly as a plain transaction would:
/// the outcome is always that of `f` run under the writer on current data.
/// `f` may run twice, so it must not call operators or other side effects.
pub fn transact<T>(f: impl Fn(&Tx) -> Result<T, ApiError>) -> Result<T, ApiError> {
    // Read-only: committed data was read, nothing to write.
    if let Some(out) = settle_draft(Draft::default(), &f, true)? {
        return Ok(out);
    }
    // The draft failed, or what it read changed meanwhile: decide again under the writer.
    let tx = Tx::begin()?;
    let out = f(&tx)?;
    tx.commit()?;
    Ok(out)
}

/// As [`transact`], but the first draft takes each of `absent` (table, key)
/// as absent without reading it; the check under the writer still proves it.
/// For keys that are nearly always new (a create's Idempotency-Key and
/// reference): a reader's lookup of a missing key walks the B-tree again
/// through `pread`, since every commit empties the readers' page caches,
/// while the writer checks it against its own warm cache. When the guess is
/// wrong (a replay) or the draft fails, `f` runs as in [`transact`]: drafted
/// with real reads, then under the writer if need be (so `f` may run three times).
pub fn transact_assuming_absent<T>(
    absent: &[(&str, String)],
    f: impl Fn(&Tx) -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    let mut draft = Draft::default();
    for (table, key) in absent {
        draft.known.insert(table, key, None);
        draft.reads.push((table.to_string(), key.clone(), None));
    }
    // An answer that writes nothing proves nothing of what was assumed.
    match settle_draft(draft, &f, false)? {
        Some(out) => Ok(out),
        None => transact(f),
    }
}

/// Runs `f` on `draft` and applies what it wrote: `Some` when that settled
/// it, `None` when `f` failed, a check failed, or the draft wrote nothing and
/// `read_only_settles` is false.
fn settle_draft<T>(
    draft: Draft,
    f: &impl Fn(&Tx) -> Result<T, ApiError>,
    read_only_settles: bool,
) -> Result<Option<T>, ApiError> {
    let draft = Tx(TxMode::Draft(RefCell::new(draft)));
    let Ok(out) = f(&draft) else {
        return Ok(None);
    };
    let TxMode::Draft(d) = draft.0 else {
        unreachable!("built as a draft")
    };
    let d = d.into_inner();
    let settled = if d.writes.is_empty() {
        read_only_settles
    } else {
        d.apply()?
    };
    Ok(settled.then_some(out))
}

impl Draft {
    /// One call: the host checks the reads and applies the writes under the writer.
    fn apply(self) -> Result<bool, ApiError> {
        let checks: Vec<storage::Check> = self
            .reads
            .into_iter()
            .map(|(table, key, value)| storage::Check { table, key, value })
            .collect();
        Ok(storage::apply(&checks, &self.writes)?)
    }

    /// The value of (table, key) this draft already knows: as it wrote it,
    /// else as it read it (one read, one check per key).
    fn known(&self, table: &str, key: &str) -> Option<Option<Vec<u8>>> {
        self.known.get(table, key).cloned()
    }
}

impl Tx {
    pub fn begin() -> Result<Tx, ApiError> {
        Ok(Tx(TxMode::Real(storage::begin()?)))
    }

    pub fn commit(self) -> Result<(), ApiError> {
        match self.0 {
            TxMode::Real(t) => Ok(t.commit()?),
            TxMode::Draft(_) => Err(ApiError::internal("a draft is committed by transact")),
        }
    }

    pub fn get(&self, table: &str, key: &str) -> Result<Option<Vec<u8>>, ApiError> {
        match &self.0 {
            TxMode::Real(t) => Ok(t.get(table, key)?),
            TxMode::Draft(d) => {
                if let Some(v) = d.borrow().known(table, key) {
                    return Ok(v);
                }
                let v = storage::get(table, key)?;
                let mut d = d.borrow_mut();
                d.known.insert(table, key, v.clone());
                d.reads.push((table.into(), key.into(), v.clone()));
                Ok(v)
            }
        }
    }

    pub fn put(&self, table: &str, key: &str, value: &[u8]) -> Result<(), ApiError> {
        match &self.0 {
            TxMode::Real(t) => Ok(t.put(table, key, value)?),
            TxMode::Draft(d) => {
                let w = storage::WriteOp::Put(storage::PutOp {
                    table: table.into(),
                    key: key.into(),
                    value: value.to_vec(),
                });
                let mut d = d.borrow_mut();
                d.known.insert(table, key, Some(value.to_vec()));
                d.writes.push(w);
                Ok(())
            }
        }
    }

    pub fn delete(&self, table: &str, key: &str) -> Result<(), ApiError> {
        match &self.0 {
            TxMode::Real(t) => Ok(t.delete(table, key)?),
            TxMode::Draft(d) => {
                let w = storage::WriteOp::Delete(storage::DeleteOp {
                    table: table.into(),
                    key: key.into(),
                });
                let mut d = d.borrow_mut();
                d.known.insert(table, key, None);
                d.writes.push(w);
                Ok(())
            }
        }
    }

    pub fn emit(&self, event: &storage::OutboxEvent) -> Result<(), ApiError> {
        match &self.0 {
            TxMode::Real(t) => Ok(t.emit(event)?),
            TxMode::Draft(d) => {
                d.borrow_mut()
                    .writes
                    .push(storage::WriteOp::Emit(event.clone()));
                Ok(())
            }
        }
    }

    pub fn payment(
        &self,
        env: &str,
        merchant: &str,
        id: &str,
    ) -> Result<Option<Payment>, ApiError> {
        let key = scope(env, merchant, id);
        if let Some(p) = self.with_decoded(&key, Payment::clone) {
            return Ok(Some(p));
        }
        let p = match self.get("payments", &key)? {
            Some(stored) => Some(decode_payment(&stored)?),
            None => None,
        };
        if let Some(p) = &p {
            self.remember_payment(key, p);
        }
        Ok(p)
    }

    /// `f` of the payment stored under `key` as this draft knows it, decoded.
    fn with_decoded<R>(&self, key: &str, f: impl FnOnce(&Payment) -> R) -> Option<R> {
        match &self.0 {
            TxMode::Draft(d) => d.borrow().payments.get(key).map(f),
            TxMode::Real(_) => None,
        }
    }

    /// Records `p` as the draft now knows it stored under `key`.
    fn remember_payment(&self, key: String, p: &Payment) {
        if let TxMode::Draft(d) = &self.0 {
            d.borrow_mut().payments.insert(key, p.clone());
        }
    }

    /// Drops the decoded payment under `key`: its stored value changed.
    fn forget_payment(&self, key: &str) {
        if let TxMode::Draft(d) = &self.0 {
            d.borrow_mut().payments.remove(key);
        }
    }

    /// Tells a draft how `p` is stored, when the caller knows (it wrote or
    /// read it a moment ago): the draft then reads nothing for it, and the
    /// check under the writer still proves it (else `f` runs again for real).
    /// A real transaction ignores this and reads.
    pub fn assume_payment(&self, p: &Payment) {
        if matches!(self.0, TxMode::Draft(_)) {
            self.assume_stored_payment(p, &encode_payment(p));
        }
    }

    /// As [`Tx::assume_payment`], with the bytes `p` was read from: no encode,
    /// and the check is exact even for a record another version wrote (whose
    /// encoding by this one may differ, which would fail the check and send
    /// the whole transaction to the writer).
    pub fn assume_stored_payment(&self, p: &Payment, stored: &[u8]) {
        if let TxMode::Draft(d) = &self.0 {
            let key = scope(&p.environment, &p.merchant_id, &p.id);
            let mut d = d.borrow_mut();
            if d.known.get("payments", &key).is_none() {
                let stored = Some(stored.to_vec());
                d.known.insert("payments", &key, stored.clone());
                d.payments.insert(key.clone(), p.clone());
                d.reads.push(("payments".into(), key, stored));
            }
        }
    }

    pub fn payment_id_by_reference(
        &self,
        env: &str,
        merchant: &str,
        reference: &str,
    ) -> Result<Option<String>, ApiError> {
        let (table, key) = reference_row(env, merchant, reference);
        Ok(self
            .get(table, &key)?
            .map(|b| String::from_utf8_lossy(&b).into_owned()))
    }

    pub fn idem(
        &self,
        env: &str,
        merchant: &str,
        key: &str,
    ) -> Result<Option<IdemRecord>, ApiError> {
        let (table, key) = idem_row(env, merchant, key);
        decode(self.get(table, &key)?)
    }

    pub fn put_idem(
        &self,
        env: &str,
        merchant: &str,
        key: &str,
        rec: &IdemRecord,
    ) -> Result<(), ApiError> {
        let (table, key) = idem_row(env, merchant, key);
        self.put(table, &key, &encode(rec))
    }

    pub fn refund_idem(
        &self,
        env: &str,
        merchant: &str,
        key: &str,
    ) -> Result<Option<RefundIdem>, ApiError> {
        decode(self.get("refund_idem", &scope(env, merchant, key))?)
    }

    pub fn put_refund_idem(
        &self,
        env: &str,
        merchant: &str,
        key: &str,
        rec: &RefundIdem,
    ) -> Result<(), ApiError> {
        self.put("refund_idem", &scope(env, merchant, key), &encode(rec))
    }

    /// Inserts a new payment with its reference and expiry indexes.
    pub fn insert_payment(&self, p: &Payment) -> Result<(), ApiError> {
        let (table, key) = reference_row(&p.environment, &p.merchant_id, &p.reference);
        self.put(table, &key, p.id.as_bytes())?;
        self.put(
            "expiry",
            &time_key(p.expires_at_ms, &p.environment, &p.merchant_id, &p.id),
            b"",
        )?;
        // Callbacks and checkout links carry no merchant: find it from the id.
        self.put(
            "owners",
            &format!("{}/{}", p.environment, p.id),
            p.merchant_id.as_bytes(),
        )?;
        self.put("listing", &listing_key(&Listed::of(p)), b"")?;
        self.write_payment(p, None)
    }

    /// Writes `p`, keeping the `expiry`, `active` and `listing` indexes in
    /// step with its status. `previous_check` is the `next_check_ms` it was
    /// stored with. (`pspref` is kept by [`Tx::index_psp_reference`].)
    pub fn save_payment(&self, p: &Payment, previous_check: Option<u64>) -> Result<(), ApiError> {
        // As stored before this write: a draft knows it from the read that
        // loaded `p`, so this costs no storage call there.
        let key = scope(&p.environment, &p.merchant_id, &p.id);
        let before: Option<Listed> = match self.with_decoded(&key, Listed::of) {
            Some(listed) => Some(listed),
            None => match self.get("payments", &key)? {
                Some(stored) => Some(Listed::of(&decode_payment(&stored)?)),
                None => None,
            },
        };
        let after = Listed::of(p);
        if before.as_ref() != Some(&after) {
            if let Some(before) = before {
                self.delete("listing", &listing_key(&before))?;
            }
            self.put("listing", &listing_key(&after), b"")?;
        }
        self.write_payment(p, previous_check)
    }

    fn write_payment(&self, p: &Payment, previous_check: Option<u64>) -> Result<(), ApiError> {
        let (env, m, id) = (&p.environment, &p.merchant_id, &p.id);
        // A check kept as it was (the operator's answer keeps the poll its
        // intent scheduled) stays where it is: no index row written.
        if previous_check != p.next_check_ms {
            if let Some(at) = previous_check {
                self.delete("active", &time_key(at, env, m, id))?;
            }
            // A final payment is due for a check only after a callback (a late success).
            if let Some(at) = p.next_check_ms {
                self.put("active", &time_key(at, env, m, id), b"")?;
            }
        }
        if p.status.is_terminal() {
            self.delete("expiry", &time_key(p.expires_at_ms, env, m, id))?;
        }
        let key = scope(env, m, id);
        self.put("payments", &key, &encode_payment(p))?;
        // Read back in this transaction (rare), it is decoded from what was written.
        self.forget_payment(&key);
        Ok(())
    }

    /// Indexes `p` by the reference its operator gave it (callbacks carry only
    /// that). Called where the reference is set, not at every save: a
    /// reference never changes once given, and each write is a B-tree leaf.
    pub fn index_psp_reference(&self, p: &Payment) -> Result<(), ApiError> {
        if let (Some(op), Some(r)) = (&p.operator, &p.psp_reference) {
            let (env, m, id) = (&p.environment, &p.merchant_id, &p.id);
            self.put(
                "pspref",
                &format!("{env}/{op}/{r}"),
                format!("{m}/{id}").as_bytes(),
            )?;
        }
        Ok(())
    }

    /// The merchant owning payment or refund `id` (callbacks carry no merchant).
    pub fn owner(&self, env: &str, id: &str) -> Result<Option<String>, ApiError> {
        Ok(self
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
            .get("pspref", &format!("{env}/{operator}/{psp_reference}"))?
            .and_then(|b| {
                let s = String::from_utf8_lossy(&b).into_owned();
                s.split_once('/')
                    .map(|(m, i)| (m.to_string(), i.to_string()))
            }))
    }

    pub fn refund(&self, env: &str, merchant: &str, id: &str) -> Result<Option<Refund>, ApiError> {
        decode(self.get("refunds", &scope(env, merchant, id))?)
    }

    /// Writes a refund, keeping `refund_active` in step. `previous_check` as for payments.
    pub fn save_refund(&self, r: &Refund, previous_check: Option<u64>) -> Result<(), ApiError> {
        let (env, m, id) = (&r.environment, &r.merchant_id, &r.id);
        if let Some(at) = previous_check {
            self.delete("refund_active", &time_key(at, env, m, id))?;
        }
        if let Some(at) = r.next_check_ms {
            self.put("refund_active", &time_key(at, env, m, id), b"")?;
        }
        self.put("owners", &format!("{env}/{id}"), m.as_bytes())?;
        self.put(
            "payment_refunds",
            &format!("{env}/{m}/{}/{id}", r.payment_id),
            b"",
        )?;
        self.put("refunds", &scope(env, m, id), &encode(r))
    }
}

/// `meta` key: present once every payment is in `listing`.
pub const LISTING_READY: &str = mmc_domain::payment::listing_meta::READY;
/// `meta` key: the last payments key the backfill of `listing` has indexed.
pub const LISTING_BACKFILL: &str = mmc_domain::payment::listing_meta::BACKFILL;

/// Whether `listing` holds every payment (committed data).
pub fn listing_ready() -> Result<bool, ApiError> {
    Ok(storage::get("meta", LISTING_READY)?.is_some())
}

/// What the `listing` index keys a payment by.
#[derive(Debug, Clone, PartialEq)]
pub struct Listed {
    pub environment: String,
    pub merchant_id: String,
    pub id: String,
    pub status: Status,
    pub country: String,
    pub operator: Option<String>,
}

impl Listed {
    pub fn of(p: &Payment) -> Listed {
        Listed {
            environment: p.environment.clone(),
            merchant_id: p.merchant_id.clone(),
            id: p.id.clone(),
            status: listed_status(p.status),
            country: p.country.clone(),
            operator: p.operator.clone(),
        }
    }
}

/// The status a payment is keyed by in `listing`: its own once final, else
/// `pending` for every status in progress. A payment's answer from its
/// operator (pending → processing, awaiting OTP...) then writes no index
/// row; only its end moves the entry (two rows fewer per payment). The
/// list checks every filter on the record, so `status=processing` reads
/// the `pending` entries and keeps the processing ones — few: payments in
/// progress end within minutes.
pub fn listed_status(status: Status) -> Status {
    if status.is_terminal() {
        status
    } else {
        Status::Pending
    }
}

/// A payment's key in `listing`: `env/merchant/status/country/operator/id`
/// (`-` before an operator is chosen). Every filter of the list is a set of
/// these prefixes, each in id (creation) order; the list merges them.
pub fn listing_key(p: &Listed) -> String {
    let prefix = listing_prefix(
        &p.environment,
        &p.merchant_id,
        p.status,
        &p.country,
        p.operator.as_deref(),
    );
    format!("{prefix}{}", p.id)
}

/// The prefix (ending in `/`) of one status, country and operator in `listing`.
pub fn listing_prefix(
    env: &str,
    merchant: &str,
    status: Status,
    country: &str,
    operator: Option<&str>,
) -> String {
    format!(
        "{env}/{merchant}/{}/{country}/{}/",
        status.as_str(),
        operator.unwrap_or("-")
    )
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
    tx.delete(table, key)?;
    tx.commit()
}
