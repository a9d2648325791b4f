//! Batches and items in this component's storage. Every key of merchant
//! data starts with environment and merchant, so a lookup made for one
//! merchant and environment cannot reach another's batch (it is a 404).
//!
//! | table | key | value |
//! |---|---|---|
//! | batches | env/merchant/batch id | [`Batch`] |
//! | batch_list | env/merchant/(u64::MAX − seq) | batch id — newest first, dense, so a page is one scan |
//! | batch_seq | env/merchant | number of batches created |
//! | items | env/merchant/batch id/position | [`Item`] |
//! | idem | env/merchant/Idempotency-Key | [`IdemRecord`] — written in the transaction that inserts its batch; honoured 24 h, then overwritten by the next use |
//! | runnable | queued_ms/env/merchant/batch id | (empty) — processing batches with items still to pay |
//! | checks | due_ms/env/merchant/batch id/position | (empty) — items `processing` whose outcome we must ask for |
//! | inflight | env/operator/item id | (empty) — payouts not yet final, per operator (the cap) |
//! | unconfirmed | env/merchant/batch id/position | [`Held`] — items `processing` whose status cannot be read now (the batch's summary) |
//!
//! `processing` items are always in `checks` (due after the claim grace
//! period when just claimed) and in `inflight`; final items in neither.

use serde::{Deserialize, Serialize};

use crate::ApiError;
use crate::mmc::platform::storage::{self, Transaction};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchStatus {
    PendingValidation,
    Processing,
    Completed,
    PartiallyCompleted,
    Failed,
    Rejected,
}

impl BatchStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            BatchStatus::PendingValidation => "pending_validation",
            BatchStatus::Processing => "processing",
            BatchStatus::Completed => "completed",
            BatchStatus::PartiallyCompleted => "partially_completed",
            BatchStatus::Failed => "failed",
            BatchStatus::Rejected => "rejected",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ItemStatus {
    Pending,
    Processing,
    Completed,
    Failed,
}

impl ItemStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ItemStatus::Pending => "pending",
            ItemStatus::Processing => "processing",
            ItemStatus::Completed => "completed",
            ItemStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<ItemStatus> {
        [
            ItemStatus::Pending,
            ItemStatus::Processing,
            ItemStatus::Completed,
            ItemStatus::Failed,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub pending: u32,
    pub processing: u32,
    pub completed: u32,
    pub failed: u32,
}

impl Counts {
    pub fn of(&self, status: ItemStatus) -> u32 {
        match status {
            ItemStatus::Pending => self.pending,
            ItemStatus::Processing => self.processing,
            ItemStatus::Completed => self.completed,
            ItemStatus::Failed => self.failed,
        }
    }

    fn slot(&mut self, status: ItemStatus) -> &mut u32 {
        match status {
            ItemStatus::Pending => &mut self.pending,
            ItemStatus::Processing => &mut self.processing,
            ItemStatus::Completed => &mut self.completed,
            ItemStatus::Failed => &mut self.failed,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Batch {
    pub id: String,
    pub merchant_id: String,
    pub environment: String,
    pub name: String,
    pub description: Option<String>,
    /// `api` or `csv`.
    pub source: String,
    pub status: BatchStatus,
    pub currency: String,
    pub item_count: u32,
    pub total_amount: u64,
    pub counts: Counts,
    pub amount_completed: u64,
    pub amount_failed: u64,
    /// The threshold in force when the batch was created.
    pub validation_threshold: u64,
    pub requires_validation: bool,
    /// Items before this position are no longer pending: the payout worker
    /// starts looking here.
    pub cursor: u32,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    pub validated_at_ms: Option<u64>,
    pub processing_started_at_ms: Option<u64>,
    pub completed_at_ms: Option<u64>,
    pub rejected_at_ms: Option<u64>,
    pub rejection_reason: Option<String>,
    /// Time part of its `runnable` key while it has items to pay.
    pub queued_ms: Option<u64>,
    /// The key that created it and the one that approved it (maker-checker);
    /// absent on batches from before they were recorded.
    #[serde(default)]
    pub created_by_key: Option<String>,
    #[serde(default)]
    pub validated_by_key: Option<String>,
    /// The person behind the creating and the approving caller (`user_…`):
    /// who acted in the console, or made there the key that acted; absent
    /// for a service key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by_person: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub validated_by_person: Option<String>,
    /// Held before anything was sent: its routes' wallets hold less than
    /// its payouts need (`insufficient_float`). Looked at again every
    /// `float_retry_ms`; cleared once they hold enough.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub float_hold: Option<FloatHold>,
    /// When its routes' float was found enough, before its first payout
    /// (not looked at again: each payout's route is chosen by its float too).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub float_checked_ms: Option<u64>,
}

/// Why a batch waits for float, and since when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FloatHold {
    pub since_ms: u64,
    pub checked_ms: u64,
    pub wallets: Vec<ShortWallet>,
}

/// A provider wallet holding less than the batch's payouts through it need.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ShortWallet {
    pub account: String,
    pub wallet: String,
    pub currency: String,
    pub available: u64,
    pub needed: u64,
}

impl Batch {
    /// The person who created it: recorded, or, on a batch from before
    /// people were recorded, the console user whose caller id made it.
    pub fn creator(&self) -> Option<&str> {
        self.created_by_person.as_deref().or(self
            .created_by_key
            .as_deref()
            .filter(|k| k.starts_with("user_")))
    }

    /// Moves one item's weight in the counters and amounts.
    pub fn count_move(&mut self, from: ItemStatus, to: ItemStatus, amount: u64) {
        let slot = self.counts.slot(from);
        *slot = slot.saturating_sub(1);
        *self.counts.slot(to) += 1;
        match to {
            ItemStatus::Completed => self.amount_completed += amount,
            ItemStatus::Failed => self.amount_failed += amount,
            _ => {}
        }
    }

    /// Every item final: the batch's final status. None while work remains.
    pub fn outcome(&self) -> Option<BatchStatus> {
        let c = &self.counts;
        if c.pending + c.processing > 0 {
            return None;
        }
        Some(match (c.completed, c.failed) {
            (_, 0) => BatchStatus::Completed,
            (0, _) => BatchStatus::Failed,
            _ => BatchStatus::PartiallyCompleted,
        })
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Item {
    /// Also the payout id the operator receives (its idempotency key).
    pub id: String,
    pub batch_id: String,
    /// 0-based position in the batch.
    pub position: u32,
    /// CSV line, or 1-based position in the JSON `items` array.
    pub line: u32,
    pub reference: String,
    pub beneficiary_name: String,
    /// E.164.
    pub phone: String,
    pub country: String,
    pub operator: String,
    pub amount: u64,
    pub currency: String,
    pub status: ItemStatus,
    /// Payout requests sent for it: 0, or one per route tried (a route is
    /// tried only after the one before answered that nothing was done; an
    /// item never goes to a second provider after an unknown outcome).
    pub attempts: u32,
    /// Times its request was sent again to its route under the same id,
    /// because the provider did not know that id once nothing of ours could
    /// still be on its way: the provider takes the id once, so whichever
    /// copy arrives, the money moves once.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub resent: u32,
    pub psp_reference: Option<String>,
    pub failure: Option<Failure>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
    pub submitted_at_ms: Option<u64>,
    pub completed_at_ms: Option<u64>,
    /// Time part of its `checks` key while `processing`.
    pub next_check_ms: Option<u64>,
    /// Status queries made so far (for the backoff).
    pub checks: u32,
    /// Why the operator's success was not believed (another amount,
    /// currency or beneficiary): the item stays processing until someone
    /// looks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub review: Option<Failure>,
    /// The adapter its payout request was sent through: its status is asked
    /// there, whatever the routes say later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub route: Option<String>,
    /// Routes tried before `route`, each of which answered that nothing was done.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tried: Vec<String>,
    /// Why a pending item waits: no route can take a payout to its operator
    /// now. It goes by itself when one can; cleared then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Held>,
    /// Why a processing item's outcome cannot be read now (its status query
    /// failed: the provider's error, or a search that could not tell), since
    /// when; cleared by the next answer. It stays processing meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unconfirmed: Option<Held>,
    /// What its route's provider charges on it by the rate card in force
    /// when the route was chosen (major units).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected_fee: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Held {
    pub reason: String,
    pub since_ms: u64,
}

/// The batch created under an `Idempotency-Key` (JSON create or CSV import).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdemRecord {
    /// SHA-256 (hex) of the canonical request: the JSON body re-serialised,
    /// or the CSV file with name and description.
    pub request_hash: String,
    pub batch_id: String,
    pub created_ms: u64,
}

pub fn scope(env: &str, merchant: &str, id: &str) -> String {
    format!("{env}/{merchant}/{id}")
}

fn list_key(env: &str, merchant: &str, seq: u64) -> String {
    format!("{env}/{merchant}/{:020}", u64::MAX - seq)
}

pub fn item_key(env: &str, merchant: &str, batch: &str, position: u32) -> String {
    format!("{env}/{merchant}/{batch}/{position:010}")
}

fn runnable_key(at: u64, env: &str, merchant: &str, batch: &str) -> String {
    format!("{at:013}/{env}/{merchant}/{batch}")
}

fn check_key(at: u64, env: &str, merchant: &str, batch: &str, position: u32) -> String {
    format!("{at:013}/{env}/{merchant}/{batch}/{position:010}")
}

fn inflight_key(env: &str, operator: &str, item: &str) -> String {
    format!("{env}/{operator}/{item}")
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn decode_one<T: for<'de> Deserialize<'de>>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| ApiError::internal(format!("corrupt record: {e}")))
}

fn decode<T: for<'de> Deserialize<'de>>(bytes: Option<Vec<u8>>) -> Result<Option<T>, ApiError> {
    bytes.as_deref().map(decode_one).transpose()
}

fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("records serialise")
}

/// A path segment safe to put in a key (ids come from URLs).
fn plausible_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= 64 && !id.contains('/')
}

// ---- Reads outside a transaction (committed data) ----

pub fn read_batch(env: &str, merchant: &str, id: &str) -> Result<Option<Batch>, ApiError> {
    if !plausible_id(id) {
        return Ok(None);
    }
    decode(storage::get("batches", &scope(env, merchant, id))?)
}

/// The record of an `Idempotency-Key`, as committed (a retry answered
/// before its request is checked again; creation decides in its transaction).
pub fn read_idem(env: &str, merchant: &str, key: &str) -> Result<Option<IdemRecord>, ApiError> {
    decode(storage::get("idem", &scope(env, merchant, key))?)
}

/// Number of batches of the merchant, and the page of `size` newest first
/// after skipping `offset`.
pub fn list_batches(
    env: &str,
    merchant: &str,
    offset: u64,
    size: u32,
) -> Result<(u64, Vec<Batch>), ApiError> {
    let count = batch_count(storage::get("batch_seq", &format!("{env}/{merchant}"))?);
    if offset >= count {
        return Ok((count, Vec::new()));
    }
    // Keys are dense: the newest batch has seq = count, so the page starts at seq = count − offset.
    let start = list_key(env, merchant, count - offset);
    let end = format!("{env}/{merchant}/~");
    let mut batches = Vec::new();
    for e in storage::scan("batch_list", &start, &end, size)? {
        let id = String::from_utf8_lossy(&e.value).into_owned();
        if let Some(b) = read_batch(env, merchant, &id)? {
            batches.push(b);
        }
    }
    Ok((count, batches))
}

fn batch_count(bytes: Option<Vec<u8>>) -> u64 {
    bytes
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

pub fn read_item(
    env: &str,
    merchant: &str,
    batch: &str,
    position: u32,
) -> Result<Option<Item>, ApiError> {
    decode(storage::get(
        "items",
        &item_key(env, merchant, batch, position),
    )?)
}

/// Up to `limit` items of a batch from `position` on, in order.
pub fn scan_items(
    env: &str,
    merchant: &str,
    batch: &str,
    position: u32,
    limit: u32,
) -> Result<Vec<Item>, ApiError> {
    let start = item_key(env, merchant, batch, position);
    let end = format!("{env}/{merchant}/{batch}/~");
    storage::scan("items", &start, &end, limit)?
        .into_iter()
        .map(|e| decode_one(&e.value))
        .collect()
}

/// A batch's unconfirmed items (see [`Tx::index_unconfirmed`]): why and
/// since when, up to `limit`.
pub fn unconfirmed(
    env: &str,
    merchant: &str,
    batch: &str,
    limit: u32,
) -> Result<Vec<Held>, ApiError> {
    let start = format!("{env}/{merchant}/{batch}/");
    let end = format!("{env}/{merchant}/{batch}/~");
    storage::scan("unconfirmed", &start, &end, limit)?
        .into_iter()
        .map(|e| decode_one(&e.value))
        .collect()
}

/// Payouts to `operator` not yet final, counted up to `cap`.
pub fn in_flight(env: &str, operator: &str, cap: u32) -> Result<u32, ApiError> {
    let start = format!("{env}/{operator}/");
    let end = format!("{env}/{operator}/~");
    Ok(storage::scan("inflight", &start, &end, cap)?.len() as u32)
}

/// An entry of a time-ordered table that is due.
pub struct Due {
    pub key: String,
    pub env: String,
    pub merchant: String,
    pub batch: String,
    /// Item position, for `checks`.
    pub position: Option<u32>,
}

/// Entries of `runnable` or `checks` due at `now`, oldest first.
pub fn due(table: &str, now: u64, limit: u32) -> Result<Vec<Due>, ApiError> {
    let end = format!("{now:013}~");
    Ok(storage::scan(table, "", &end, limit)?
        .into_iter()
        .filter_map(|e| {
            let mut p = e.key.split('/');
            let _at = p.next()?;
            let (env, merchant, batch) = (p.next()?.into(), p.next()?.into(), p.next()?.into());
            let position = p.next().and_then(|s| s.parse().ok());
            Some(Due {
                key: e.key,
                env,
                merchant,
                batch,
                position,
            })
        })
        .collect())
}

// ---- Writes ----

pub struct Tx(pub Transaction);

impl Tx {
    pub fn begin() -> Result<Tx, ApiError> {
        Ok(Tx(storage::begin()?))
    }

    pub fn commit(self) -> Result<(), ApiError> {
        Ok(self.0.commit()?)
    }

    pub fn batch(&self, env: &str, merchant: &str, id: &str) -> Result<Option<Batch>, ApiError> {
        if !plausible_id(id) {
            return Ok(None);
        }
        decode(self.0.get("batches", &scope(env, merchant, id))?)
    }

    /// Writes `b`, keeping its `runnable` entry in step: present while it is
    /// processing with pending items. `previous_queue` is the `queued_ms` it
    /// was read with.
    pub fn save_batch(&self, b: &Batch, previous_queue: Option<u64>) -> Result<(), ApiError> {
        let (env, m, id) = (&b.environment, &b.merchant_id, &b.id);
        if previous_queue != b.queued_ms {
            if let Some(at) = previous_queue {
                self.0.delete("runnable", &runnable_key(at, env, m, id))?;
            }
            if let Some(at) = b.queued_ms {
                self.0.put("runnable", &runnable_key(at, env, m, id), b"")?;
            }
        }
        Ok(self.0.put("batches", &scope(env, m, id), &encode(b))?)
    }

    /// Inserts a new batch with its items, list entry and queue entry.
    pub fn insert_batch(&self, b: &Batch, items: &[Item]) -> Result<(), ApiError> {
        let (env, m) = (&b.environment, &b.merchant_id);
        let counter = format!("{env}/{m}");
        let seq = batch_count(self.0.get("batch_seq", &counter)?) + 1;
        self.0
            .put("batch_seq", &counter, seq.to_string().as_bytes())?;
        self.0
            .put("batch_list", &list_key(env, m, seq), b.id.as_bytes())?;
        for item in items {
            self.0.put(
                "items",
                &item_key(env, m, &b.id, item.position),
                &encode(item),
            )?;
        }
        self.save_batch(b, None)
    }

    pub fn item(
        &self,
        env: &str,
        merchant: &str,
        batch: &str,
        position: u32,
    ) -> Result<Option<Item>, ApiError> {
        decode(
            self.0
                .get("items", &item_key(env, merchant, batch, position))?,
        )
    }

    /// Writes `item`, keeping `checks` and `inflight` in step with its status.
    /// `previous_check` is the `next_check_ms` it was read with.
    pub fn save_item(
        &self,
        env: &str,
        merchant: &str,
        item: &Item,
        previous_check: Option<u64>,
    ) -> Result<(), ApiError> {
        let (batch, pos) = (&item.batch_id, item.position);
        if let Some(at) = previous_check {
            self.0
                .delete("checks", &check_key(at, env, merchant, batch, pos))?;
        }
        let inflight = inflight_key(env, &item.operator, &item.id);
        match (item.status, item.next_check_ms) {
            (ItemStatus::Processing, Some(at)) => {
                self.0
                    .put("checks", &check_key(at, env, merchant, batch, pos), b"")?;
                self.0.put("inflight", &inflight, b"")?;
            }
            _ => self.0.delete("inflight", &inflight)?,
        }
        Ok(self
            .0
            .put("items", &item_key(env, merchant, batch, pos), &encode(item))?)
    }

    /// Keeps the batch's index of unconfirmed items (`unconfirmed`: those
    /// processing whose status cannot be read now) in step with `item`;
    /// `was`: it was in the index before. A batch's reader then finds them
    /// without walking its items.
    pub fn index_unconfirmed(
        &self,
        env: &str,
        merchant: &str,
        item: &Item,
        was: bool,
    ) -> Result<(), ApiError> {
        let key = item_key(env, merchant, &item.batch_id, item.position);
        match &item.unconfirmed {
            Some(u) if item.status == ItemStatus::Processing => {
                self.0.put("unconfirmed", &key, &encode(u))?
            }
            _ if was => self.0.delete("unconfirmed", &key)?,
            _ => {}
        }
        Ok(())
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

    pub fn emit(&self, event: &storage::OutboxEvent) -> Result<(), ApiError> {
        Ok(self.0.emit(event)?)
    }
}

/// Removes a queue entry whose batch or item is gone or done.
pub fn drop_entry(table: &str, key: &str) -> Result<(), ApiError> {
    mmc_api_kit::again_on_conflict(|| {
        let tx = Tx::begin()?;
        tx.0.delete(table, key)?;
        tx.commit()
    })
}
