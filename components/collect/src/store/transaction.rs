//! Transactions: a real one under the storage writer, or a draft of one run
//! outside it and settled by one checked write.

use mmc_domain::record::Payment;
use rustc_hash::FxHashMap;
use std::cell::RefCell;

use crate::ApiError;
use crate::mmc::platform::storage::{self, Transaction};
use mmc_api_kit::again_on_conflict;

use super::codec::encode_payment;
use super::keys::scope;

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
///
/// Under the writer, a transaction the storage rolls back as a conflict with
/// another writer (PostgreSQL: two open transactions each waiting for a key
/// the other holds) runs again from the start ([`again_on_conflict`]).
pub fn transact<T>(f: impl Fn(&Tx) -> Result<T, ApiError>) -> Result<T, ApiError> {
    // Read-only: committed data was read, nothing to write.
    if let Some(out) = settled(settle_draft(Draft::default(), &f, true))? {
        return Ok(out);
    }
    // The draft failed, or what it read changed meanwhile: decide again under the writer.
    again_on_conflict(|| {
        let tx = Tx::begin()?;
        let out = f(&tx)?;
        tx.commit()?;
        Ok(out)
    })
}

/// A draft's outcome, a conflict taken as a draft that did not settle (the
/// writer decides it then).
fn settled<T>(drafted: Result<Option<T>, ApiError>) -> Result<Option<T>, ApiError> {
    match drafted {
        Err(e) if e.conflict => Ok(None),
        drafted => drafted,
    }
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
    match settled(settle_draft(draft, &f, false))? {
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

    /// `f` of the payment stored under `key` as this draft knows it, decoded.
    pub(super) fn with_decoded<R>(&self, key: &str, f: impl FnOnce(&Payment) -> R) -> Option<R> {
        match &self.0 {
            TxMode::Draft(d) => d.borrow().payments.get(key).map(f),
            TxMode::Real(_) => None,
        }
    }

    /// Records `p` as the draft now knows it stored under `key`.
    pub(super) fn remember_payment(&self, key: String, p: &Payment) {
        if let TxMode::Draft(d) = &self.0 {
            d.borrow_mut().payments.insert(key, p.clone());
        }
    }

    /// Drops the decoded payment under `key`: its stored value changed.
    pub(super) fn forget_payment(&self, key: &str) {
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
}
