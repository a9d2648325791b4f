//! The `payouts` job: pays the items of processing batches through the
//! operator adapters, and finds out what became of payouts whose outcome is
//! not known yet. All its state is in storage, so a restart resumes it.
//!
//! Never paying an item twice rests on three rules:
//! 1. An item is claimed (pending → processing, attempt recorded) in a
//!    committed transaction *before* the payout request leaves; the
//!    operator is never called inside a transaction.
//! 2. The payout id is the item id: adapters hand it to the operator as the
//!    idempotency key.
//! 3. A `processing` item is never sent again. If the worker dies between
//!    the claim and recording the answer, the item's status check falls due
//!    after the claim grace period and asks the operator (`payout-status`)
//!    for that id.
//!
//! Claims are one item per transaction, so a crash leaves at most one item
//! whose request may or may not have left.
//!
//! Per operator and environment, at most `max_in_flight_per_operator`
//! payouts are sent and not final at any time; other operators' items go on.

use std::collections::HashMap;

use mmc_domain::outcome::{self, CallFailure};
use mmc_domain::settlement::{self, Asked, Reported};
use serde_json::json;

use crate::mmc::adapter::router::{self, Routed};
use crate::mmc::adapter::types::{
    AdapterError, OperationRef, PayoutRequest, PspStatus, Settled, Started,
};
use crate::mmc::platform::{clock, log, storage};
use crate::store::{self, Batch, BatchStatus, Failure, Item, ItemStatus, Tx};
use crate::{API_VERSION, ApiError, settings, wire};

/// First status query of a payout the operator left pending, then doubling.
const FIRST_CHECK_MS: u64 = 2_000;
const MAX_CHECK_INTERVAL_MS: u64 = 60_000;
/// Items of one batch looked at per run, from its cursor.
const WINDOW: u32 = 200;
/// Batches looked at per run.
const BATCHES_PER_RUN: u32 = 20;

/// Does up to `limit` units of work (one payout sent or one status asked);
/// returns how many were done.
pub fn run_payouts(limit: u32) -> u32 {
    let now = clock::now_ms();
    let mut done = 0;
    // Outcomes first: they free room under the per-operator cap.
    match store::due("checks", now, limit) {
        Ok(due) => {
            check_items(&due, now);
            done += due.len() as u32;
        }
        Err(e) => warn(&format!("cannot read due checks: {}", e.message)),
    }
    let batches = match store::due("runnable", now, BATCHES_PER_RUN) {
        Ok(b) => b,
        Err(e) => {
            warn(&format!("cannot read runnable batches: {}", e.message));
            return done;
        }
    };
    let mut lanes = Lanes::new();
    for d in batches {
        if done >= limit {
            break;
        }
        match pay_batch(&d, limit - done, &mut lanes) {
            Ok(n) => done += n,
            Err(e) => warn(&format!(
                "payouts of batch {} failed: {}",
                d.batch, e.message
            )),
        }
    }
    done
}

fn warn(message: &str) {
    log::log(log::Level::Warn, message);
}

/// Payouts in flight per (environment, operator), counted from storage the
/// first time an operator is seen in a run, then kept up to date.
struct Lanes {
    counts: HashMap<(String, String), u32>,
    cap: u32,
}

impl Lanes {
    fn new() -> Lanes {
        Lanes {
            counts: HashMap::new(),
            cap: settings::max_in_flight_per_operator() as u32,
        }
    }

    fn has_room(&mut self, env: &str, operator: &str) -> Result<bool, ApiError> {
        let key = (env.to_string(), operator.to_string());
        let n = match self.counts.get(&key) {
            Some(n) => *n,
            None => {
                let n = store::in_flight(env, operator, self.cap)?;
                self.counts.insert(key, n);
                n
            }
        };
        Ok(n < self.cap)
    }

    /// Called after `has_room`, which loaded the count.
    fn add(&mut self, env: &str, operator: &str, delta: i32) {
        if let Some(n) = self
            .counts
            .get_mut(&(env.to_string(), operator.to_string()))
        {
            *n = n.saturating_add_signed(delta);
        }
    }
}

/// Sends the payouts of one batch from its cursor, within `budget` and the caps.
fn pay_batch(d: &store::Due, budget: u32, lanes: &mut Lanes) -> Result<u32, ApiError> {
    let (env, merchant) = (d.env.as_str(), d.merchant.as_str());
    let batch = match store::read_batch(env, merchant, &d.batch)? {
        Some(b) if b.status == BatchStatus::Processing && b.queued_ms.is_some() => b,
        _ => return store::drop_entry("runnable", &d.key).map(|_| 0),
    };
    let window = store::scan_items(env, merchant, &batch.id, batch.cursor, WINDOW)?;
    let mut done = 0;
    // Once an item waits for room, the cursor must stay before it.
    let mut waiting = false;
    let mut saw_pending = false;
    for item in &window {
        if done >= budget {
            break;
        }
        if item.status != ItemStatus::Pending {
            continue;
        }
        saw_pending = true;
        if !lanes.has_room(env, &item.operator)? {
            waiting = true;
            continue;
        }
        // No route can take it now: it waits, saying why, and goes by itself
        // once one can (this job comes back to the batch).
        let route = match route(env, merchant, item, &[]) {
            Ok(route) => route,
            Err(reason) => {
                hold(env, merchant, item, reason)?;
                waiting = true;
                continue;
            }
        };
        let cursor = (!waiting).then_some(item.position + 1);
        let Some(mut claimed) = claim(env, merchant, item, cursor, route)? else {
            continue;
        };
        lanes.add(env, &claimed.operator, 1);
        let outcome = loop {
            let outcome = router::payout(claimed.route.as_deref(), &payout_request(env, &claimed));
            match outcome {
                Err(ref e) if failure_kind(e).certainty() == outcome::Certainty::NotPerformed => {
                    match next_route(env, merchant, &claimed)? {
                        Some(moved) => claimed = moved,
                        None => break outcome,
                    }
                }
                _ => break outcome,
            }
        };
        if record(
            env,
            merchant,
            &claimed,
            payout_answer(&claimed, outcome),
            false,
        )? {
            lanes.add(env, &claimed.operator, -1);
        }
        done += 1;
    }
    if !saw_pending {
        // Counters say pending items remain but none is at or after the
        // cursor: move the cursor past this window, or stop queueing.
        skip_window(&batch, window.last().map(|i| i.position + 1))?;
    }
    Ok(done)
}

fn payout_request(env: &str, item: &Item) -> PayoutRequest {
    PayoutRequest {
        payout_id: item.id.clone(),
        operator: item.operator.clone(),
        environment: env.into(),
        phone: item.phone.clone(),
        amount: item.amount,
        currency: item.currency.clone(),
        beneficiary_name: item.beneficiary_name.clone(),
        reference: item.reference.clone(),
    }
}

/// The route a payout of `item` takes now, skipping `tried`; why none can.
fn route(env: &str, merchant: &str, item: &Item, tried: &[String]) -> Result<String, String> {
    router::route(
        env,
        &item.operator,
        merchant,
        &item.id,
        "payout",
        item.amount,
        tried,
    )
    .map(|choice| choice.adapter)
    .map_err(|explanation| {
        let why = serde_json::from_str::<serde_json::Value>(&explanation)
            .ok()
            .and_then(|v| v["reason"].as_str().map(str::to_string))
            .unwrap_or(explanation);
        format!(
            "no provider can take a payout to {} now: {why}",
            item.operator
        )
    })
}

/// Marks a pending item as waiting for a route (once: the reason is kept
/// until it goes).
fn hold(env: &str, merchant: &str, item: &Item, reason: String) -> Result<(), ApiError> {
    if item.held.is_some() {
        return Ok(());
    }
    let tx = Tx::begin()?;
    let Some(mut current) = tx.item(env, merchant, &item.batch_id, item.position)? else {
        return Ok(());
    };
    if current.status != ItemStatus::Pending || current.held.is_some() {
        return Ok(());
    }
    log::count("payout_held");
    current.held = Some(store::Held {
        reason,
        since_ms: clock::now_ms(),
    });
    tx.save_item(env, merchant, &current, None)?;
    tx.commit()
}

/// After the item's route answered that nothing was done: the next route,
/// stored before it is called (the item stays processing, one more attempt).
/// None when no other route can take it, or the item moved meanwhile.
fn next_route(env: &str, merchant: &str, claimed: &Item) -> Result<Option<Item>, ApiError> {
    let Some(current) = claimed.route.clone() else {
        return Ok(None);
    };
    let mut tried = claimed.tried.clone();
    tried.push(current.clone());
    let Ok(next) = route(env, merchant, claimed, &tried) else {
        return Ok(None);
    };
    let tx = Tx::begin()?;
    let Some(mut item) = tx.item(env, merchant, &claimed.batch_id, claimed.position)? else {
        return Ok(None);
    };
    if item.status != ItemStatus::Processing || item.route.as_ref() != Some(&current) {
        return Ok(None);
    }
    log::count("payout_failover");
    item.tried.push(current);
    item.route = Some(next);
    item.attempts += 1;
    item.updated_at_ms = clock::now_ms();
    tx.save_item(env, merchant, &item, item.next_check_ms)?;
    tx.commit()?;
    Ok(Some(item))
}

/// pending → processing, in its own committed transaction, before the
/// payout request leaves through `route`. None if the item or its batch
/// moved meanwhile.
fn claim(
    env: &str,
    merchant: &str,
    item: &Item,
    cursor: Option<u32>,
    route: String,
) -> Result<Option<Item>, ApiError> {
    let now = clock::now_ms();
    let tx = Tx::begin()?;
    let (Some(mut item), Some(mut batch)) = (
        tx.item(env, merchant, &item.batch_id, item.position)?,
        tx.batch(env, merchant, &item.batch_id)?,
    ) else {
        return Ok(None);
    };
    if item.status != ItemStatus::Pending || batch.status != BatchStatus::Processing {
        return Ok(None);
    }
    item.status = ItemStatus::Processing;
    item.attempts += 1;
    item.route = Some(route);
    item.held = None;
    item.submitted_at_ms = Some(now);
    item.updated_at_ms = now;
    // If nobody records the answer (the process died), ask the operator then.
    item.next_check_ms = Some(now + settings::claim_grace_ms());
    tx.save_item(env, merchant, &item, None)?;

    let previous_queue = batch.queued_ms;
    batch.count_move(ItemStatus::Pending, ItemStatus::Processing, item.amount);
    if let Some(c) = cursor {
        batch.cursor = batch.cursor.max(c);
    }
    if batch.counts.pending == 0 {
        batch.queued_ms = None;
    }
    batch.updated_at_ms = now;
    tx.save_batch(&batch, previous_queue)?;
    tx.commit()?;
    Ok(Some(item))
}

/// What we learnt about a payout.
enum Answer {
    Completed(Option<String>),
    Failed(Option<String>, Failure),
    /// A success for something other than what was asked: stays processing,
    /// flagged for review, asked again later.
    Review(Option<String>, Failure),
    /// Accepted, not final yet, or unknown (timeout): ask again later.
    Pending(Option<String>),
}

fn failure(code: &str, message: impl Into<String>) -> Failure {
    Failure {
        code: code.into(),
        message: message.into(),
    }
}

/// A success counts only for the item's amount, currency and beneficiary;
/// any other is not believed and the item stays processing, under review.
fn completed(item: &Item, paid: &Settled, r: Option<String>) -> Answer {
    let asked = Asked {
        amount: item.amount,
        currency: &item.currency,
        party: Some(&item.phone),
    };
    let reported = Reported {
        amount: &paid.amount,
        currency: &paid.currency,
        party: paid.party.as_deref(),
    };
    match settlement::check(asked, reported) {
        Ok(()) => Answer::Completed(r),
        Err(m) => {
            log::log(
                log::Level::Error,
                &format!(
                    "payout of item {}: success not believed, flagged for review: {m}",
                    item.id
                ),
            );
            log::count(&format!("settlement_{}", m.code()));
            Answer::Review(r, failure(m.code(), m.to_string()))
        }
    }
}

/// What an adapter error means for the money (see `mmc_domain::outcome`).
fn failure_kind(e: &AdapterError) -> CallFailure {
    mmc_domain::call_failure!(AdapterError, e)
}

/// The answer to a payout request. An error that leaves the outcome unknown
/// (timeout, 5xx, reset, unreadable answer, trap) keeps the item processing:
/// the operator is asked about it by our id, and it is never sent again under
/// another. Only an error that certainly performed nothing fails it.
fn payout_answer(item: &Item, outcome: Result<Started, AdapterError>) -> Answer {
    match outcome {
        Ok(Started {
            psp_reference,
            status,
        }) => {
            let r = Some(psp_reference).filter(|r| !r.is_empty());
            match status {
                PspStatus::Completed(paid) => completed(item, &paid, r),
                PspStatus::Failed(f) => Answer::Failed(r, failure(&f.code, f.message)),
                PspStatus::Pending | PspStatus::NotFound => Answer::Pending(r),
            }
        }
        Err(e) if failure_kind(&e).is_unknown() => {
            warn(&format!("payout outcome unknown, will ask: {e:?}"));
            log::count("payout_outcome_unknown");
            Answer::Pending(None)
        }
        Err(AdapterError::NotSupported(m)) => {
            Answer::Failed(None, failure("operator_unavailable", m))
        }
        Err(AdapterError::NotSent(m) | AdapterError::Rejected(m)) => {
            Answer::Failed(None, failure("operator_error", m))
        }
        Err(e) => Answer::Failed(None, failure("operator_error", format!("{e:?}"))),
    }
}

/// Applies an answer to a processing item (and its batch) in one
/// transaction; `checked`: the answer came from a status query. Returns
/// true if the item is now final.
fn record(
    env: &str,
    merchant: &str,
    claimed: &Item,
    answer: Answer,
    checked: bool,
) -> Result<bool, ApiError> {
    let now = clock::now_ms();
    let tx = Tx::begin()?;
    let Some(mut item) = tx.item(env, merchant, &claimed.batch_id, claimed.position)? else {
        return Ok(true);
    };
    if item.status != ItemStatus::Processing {
        return Ok(true);
    }
    let previous_check = item.next_check_ms;
    if checked {
        item.checks += 1;
    }
    let (to, psp_reference) = match answer {
        Answer::Completed(r) => (ItemStatus::Completed, r),
        Answer::Failed(r, f) => {
            item.failure = Some(f);
            (ItemStatus::Failed, r)
        }
        Answer::Review(r, f) => {
            item.review.get_or_insert(f);
            (ItemStatus::Processing, r)
        }
        Answer::Pending(r) => (ItemStatus::Processing, r),
    };
    if to == ItemStatus::Processing {
        // Asked again later, backing off (a success under review too).
        let interval = (FIRST_CHECK_MS << item.checks.min(5)).min(MAX_CHECK_INTERVAL_MS);
        item.next_check_ms = Some(now + interval);
    }
    if psp_reference.is_some() {
        item.psp_reference = psp_reference;
    }
    item.updated_at_ms = now;
    if to == ItemStatus::Processing {
        tx.save_item(env, merchant, &item, previous_check)?;
        tx.commit()?;
        return Ok(false);
    }
    item.status = to;
    item.next_check_ms = None;
    item.completed_at_ms = Some(now);
    tx.save_item(env, merchant, &item, previous_check)?;

    let mut batch = tx
        .batch(env, merchant, &item.batch_id)?
        .ok_or_else(|| ApiError::internal("item without batch"))?;
    let previous_queue = batch.queued_ms;
    batch.count_move(ItemStatus::Processing, to, item.amount);
    batch.updated_at_ms = now;
    if let (BatchStatus::Processing, Some(end)) = (batch.status, batch.outcome()) {
        batch.status = end;
        batch.completed_at_ms = Some(now);
        emit(&tx, &batch)?;
    }
    tx.save_batch(&batch, previous_queue)?;
    tx.commit()?;
    Ok(true)
}

/// Processing items whose outcome is due to be asked: after a pending
/// answer, a timeout, or a claim nobody finished (a crash). The operators are
/// asked all at once (each answer can take seconds), then each answer is
/// recorded in its own transaction.
fn check_items(due: &[store::Due], now: u64) {
    let mut asked = Vec::with_capacity(due.len());
    for d in due {
        match processing_item(d) {
            Ok(Some(item)) => asked.push((d, item)),
            Ok(None) => {}
            Err(e) => warn(&format!("status check of {} failed: {}", d.key, e.message)),
        }
    }
    let ops: Vec<Routed> = asked
        .iter()
        .map(|(d, item)| Routed {
            via: item.route.clone(),
            op: OperationRef {
                id: item.id.clone(),
                operator: item.operator.clone(),
                environment: d.env.clone(),
                psp_reference: item.psp_reference.clone(),
                phone: Some(item.phone.clone()),
                amount: item.amount,
                currency: item.currency.clone(),
            },
        })
        .collect();
    let statuses = router::payout_status_many(&ops);
    for ((d, item), status) in asked.into_iter().zip(statuses) {
        if let Err(e) = record_status(d, item, status, now) {
            warn(&format!("status check of {} failed: {}", d.key, e.message));
        }
    }
}

/// The item a due check is about, while it is still processing; a check
/// left for an item that has moved on is dropped.
fn processing_item(d: &store::Due) -> Result<Option<Item>, ApiError> {
    let (env, merchant) = (d.env.as_str(), d.merchant.as_str());
    let item = match d.position {
        Some(p) => store::read_item(env, merchant, &d.batch, p)?,
        None => None,
    };
    match item.filter(|i| i.status == ItemStatus::Processing) {
        Some(item) => Ok(Some(item)),
        None => store::drop_entry("checks", &d.key).map(|_| None),
    }
}

/// What the operator answered about a processing item, recorded.
fn record_status(
    d: &store::Due,
    item: Item,
    status: Result<PspStatus, AdapterError>,
    now: u64,
) -> Result<(), ApiError> {
    let (env, merchant) = (d.env.as_str(), d.merchant.as_str());
    let since = item.submitted_at_ms.unwrap_or(item.created_at_ms);
    let answer = match status {
        Ok(PspStatus::Completed(paid)) => completed(&item, &paid, None),
        Ok(PspStatus::Failed(f)) => Answer::Failed(None, failure(&f.code, f.message)),
        // Never received, once nothing can be in flight any more: nothing was paid.
        Ok(PspStatus::NotFound)
            if outcome::not_found_is_final(since, now, settings::in_flight_ms()) =>
        {
            Answer::Failed(
                None,
                failure(
                    "operator_not_reached",
                    "The operator has no record of this payout: it was never made.",
                ),
            )
        }
        other => {
            if let Err(e) = &other {
                warn(&format!("payout-status of item {}: {e:?}", item.id));
            }
            // Unknown stays processing however long it takes; a person is told.
            if now.saturating_sub(since) >= settings::max_pending_ms() {
                warn(&format!(
                    "payout of item {} unconfirmed for {} s: check with the operator",
                    item.id,
                    now.saturating_sub(since) / 1000
                ));
                log::count("payout_unconfirmed");
            }
            Answer::Pending(None)
        }
    };
    record(env, merchant, &item, answer, true).map(|_| ())
}

/// No pending item in the window: move the cursor past it, or, at the end
/// of the batch, take the batch off the queue.
fn skip_window(batch: &Batch, next: Option<u32>) -> Result<(), ApiError> {
    let (env, merchant) = (batch.environment.as_str(), batch.merchant_id.as_str());
    let tx = Tx::begin()?;
    let Some(mut b) = tx.batch(env, merchant, &batch.id)? else {
        return Ok(());
    };
    let previous_queue = b.queued_ms;
    match next {
        Some(n) => b.cursor = b.cursor.max(n),
        None => {
            warn(&format!(
                "batch {} counts {} pending items but has none; dequeued",
                b.id, b.counts.pending
            ));
            b.queued_ms = None;
        }
    }
    tx.save_batch(&b, previous_queue)?;
    tx.commit()
}

/// `bulk.batch.<status>` with the batch as `data.object`, in the
/// transaction that made the change.
pub fn emit(tx: &Tx, b: &Batch) -> Result<(), ApiError> {
    let id = format!("evt_{}", uuid::Uuid::new_v4().simple());
    let event_type = format!("bulk.batch.{}", b.status.as_str());
    let body = json!({
        "id": id,
        "object": "event",
        "api_version": API_VERSION,
        "type": event_type,
        "created": clock::now_ms() / 1000,
        "environment": b.environment,
        "merchant_id": b.merchant_id,
        "data": {"object": wire::batch_json(b)},
    });
    tx.emit(&storage::OutboxEvent {
        id,
        event_type,
        merchant_id: b.merchant_id.clone(),
        environment: b.environment.clone(),
        subject_id: b.id.clone(),
        extra_url: None,
        payload: serde_json::to_vec(&body).expect("JSON values serialise"),
    })
}
