//! Sending a batch's payouts from its cursor: each item claimed before its
//! request leaves, routed (and failed over when nothing was done), within
//! the per-operator lanes.

use mmc_api_kit::again_on_conflict;
use mmc_domain::outcome;
use std::collections::HashMap;

use crate::mmc::adapter::router::{self, FloatNeed, RouteRefusal};
use crate::mmc::adapter::types::{AdapterError, PayoutRequest, Started};
use crate::mmc::platform::{clock, log};
use crate::store::{self, Batch, BatchStatus, Item, ItemStatus, Tx};
use crate::{ApiError, settings};

use super::answers::{failure_kind, payout_answer, record, same_attempt, warn};

/// Items of one batch looked at per run, from its cursor.
pub(super) const WINDOW: u32 = 200;

/// Payouts in flight per (environment, operator), counted from storage the
/// first time an operator is seen in a run, then kept up to date.
pub(super) struct Lanes {
    counts: HashMap<(String, String), u32>,
    cap: u32,
}

impl Lanes {
    pub(super) fn new() -> Lanes {
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
pub(super) fn pay_batch(d: &store::Due, budget: u32, lanes: &mut Lanes) -> Result<u32, ApiError> {
    let (env, merchant) = (d.env.as_str(), d.merchant.as_str());
    let batch = match store::read_batch(env, merchant, &d.batch)? {
        Some(b) if b.status == BatchStatus::Processing && b.queued_ms.is_some() => b,
        _ => return store::drop_entry("runnable", &d.key).map(|_| 0),
    };
    if !float_enough(&batch)? {
        return Ok(0);
    }
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
            let outcome = send(env, &claimed);
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

/// Items read per page when adding up what a batch needs.
const NEEDS_PAGE: u32 = 1000;

/// Before a batch's first payout: whether the wallets of the routes that
/// would pay it hold what its payouts add up to, per operator. If not, the
/// batch is held (`insufficient_float`, saying which wallets and by how
/// much) and looked at again every `float_retry_ms`; nothing is sent
/// meanwhile. Once they hold enough, or once anything was sent, it is not
/// asked again: each payout's route is chosen by its float too.
fn float_enough(batch: &Batch) -> Result<bool, ApiError> {
    let untouched = batch.counts.pending == batch.item_count;
    if !untouched || (batch.float_checked_ms.is_some() && batch.float_hold.is_none()) {
        return Ok(true);
    }
    let (env, merchant) = (batch.environment.as_str(), batch.merchant_id.as_str());
    let mut needs: Vec<FloatNeed> = Vec::new();
    let mut from = 0;
    loop {
        let page = store::scan_items(env, merchant, &batch.id, from, NEEDS_PAGE)?;
        for item in &page {
            match needs
                .iter_mut()
                .find(|n| n.operator == item.operator && n.currency == item.currency)
            {
                Some(n) => n.amount += item.amount,
                None => needs.push(FloatNeed {
                    operator: item.operator.clone(),
                    currency: item.currency.clone(),
                    amount: item.amount,
                }),
            }
        }
        match page.last() {
            Some(last) if page.len() == NEEDS_PAGE as usize => from = last.position + 1,
            _ => break,
        }
    }
    let short = router::float_short(env, &needs);
    let now = clock::now_ms();
    let wallets: Vec<store::ShortWallet> = short
        .into_iter()
        .map(|s| store::ShortWallet {
            account: s.adapter,
            wallet: s.wallet,
            currency: s.currency,
            available: s.available,
            needed: s.needed,
        })
        .collect();
    let enough = wallets.is_empty();
    // Some(answer): the batch is gone or moved on meanwhile, nothing saved.
    let moved = again_on_conflict(|| {
        let tx = Tx::begin()?;
        let Some(mut b) = tx.batch(env, merchant, &batch.id)? else {
            return Ok(Some(false));
        };
        if b.counts.pending != b.item_count || b.status != BatchStatus::Processing {
            return Ok(Some(true));
        }
        let previous_queue = b.queued_ms;
        if enough {
            b.float_hold = None;
            b.float_checked_ms = Some(now);
        } else {
            let since = b.float_hold.as_ref().map_or(now, |h| h.since_ms);
            b.float_hold = Some(store::FloatHold {
                since_ms: since,
                checked_ms: now,
                wallets: wallets.clone(),
            });
            b.queued_ms = Some(now + settings::float_retry_ms());
        }
        b.updated_at_ms = now;
        tx.save_batch(&b, previous_queue)?;
        tx.commit()?;
        Ok(None)
    })?;
    if let Some(answer) = moved {
        return Ok(answer);
    }
    if !enough {
        log::count("batch_insufficient_float");
        warn(&format!(
            "batch {} held: its routes' float is short ({})",
            batch.id,
            wallets
                .iter()
                .map(|w| format!(
                    "{} {}: {} of {} {}",
                    w.account, w.wallet, w.available, w.needed, w.currency
                ))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(enough)
}

/// The payout request of a claimed `item`, sent as one attempt: under its
/// id, through its route, and not after the attempt's sending deadline.
pub(super) fn send(env: &str, item: &Item) -> Result<Started, AdapterError> {
    let started = item.submitted_at_ms.unwrap_or(item.updated_at_ms);
    router::payout(
        item.route.as_deref(),
        &payout_request(env, item),
        settings::send_until_ms(started),
    )
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

/// The route a payout of `item` takes now, skipping `tried`, with the fee
/// its rate card says; why none can.
fn route(
    env: &str,
    merchant: &str,
    item: &Item,
    tried: &[String],
) -> Result<(String, Option<u64>), String> {
    router::route(
        env,
        &item.operator,
        merchant,
        &item.id,
        "payout",
        item.amount,
        None,
        tried,
    )
    .map(|choice| (choice.adapter, choice.expected_fee))
    .map_err(|refusal| {
        let why = match refusal {
            RouteRefusal::NotOffered => "no adapter serves it".to_string(),
            RouteRefusal::Closed => "closed at its provider".to_string(),
            RouteRefusal::AmountOutOfRange(r) => format!(
                "its providers take {} to {} {}",
                r.min_amount, r.max_amount, r.currency
            ),
            RouteRefusal::ModeNotSupported => "not in this mode".to_string(),
            RouteRefusal::Unroutable(explanation) => {
                serde_json::from_str::<serde_json::Value>(&explanation)
                    .ok()
                    .and_then(|v| v["reason"].as_str().map(str::to_string))
                    .unwrap_or(explanation)
            }
        };
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
    let held = again_on_conflict(|| {
        let tx = Tx::begin()?;
        let Some(mut current) = tx.item(env, merchant, &item.batch_id, item.position)? else {
            return Ok(false);
        };
        if current.status != ItemStatus::Pending || current.held.is_some() {
            return Ok(false);
        }
        current.held = Some(store::Held {
            reason: reason.clone(),
            since_ms: clock::now_ms(),
        });
        tx.save_item(env, merchant, &current, None)?;
        tx.commit()?;
        Ok(true)
    })?;
    if held {
        log::count("payout_held");
    }
    Ok(())
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
    let Ok((next, expected_fee)) = route(env, merchant, claimed, &tried) else {
        return Ok(None);
    };
    let moved = again_on_conflict(|| {
        let tx = Tx::begin()?;
        let Some(mut item) = tx.item(env, merchant, &claimed.batch_id, claimed.position)? else {
            return Ok(None);
        };
        if item.status != ItemStatus::Processing || !same_attempt(&item, claimed) {
            return Ok(None);
        }
        let now = clock::now_ms();
        item.tried.push(current.clone());
        item.route = Some(next.clone());
        item.expected_fee = expected_fee;
        item.attempts += 1;
        // A new attempt, with a sending deadline of its own.
        item.submitted_at_ms = Some(now);
        item.updated_at_ms = now;
        tx.save_item(env, merchant, &item, item.next_check_ms)?;
        tx.commit()?;
        Ok(Some(item))
    })?;
    if moved.is_some() {
        log::count("payout_failover");
    }
    Ok(moved)
}

/// pending → processing, in its own committed transaction, before the
/// payout request leaves through `route`. None if the item or its batch
/// moved meanwhile.
fn claim(
    env: &str,
    merchant: &str,
    item: &Item,
    cursor: Option<u32>,
    (route, expected_fee): (String, Option<u64>),
) -> Result<Option<Item>, ApiError> {
    let now = clock::now_ms();
    again_on_conflict(|| {
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
        item.route = Some(route.clone());
        item.expected_fee = expected_fee;
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
    })
}

/// No pending item in the window: move the cursor past it, or, at the end
/// of the batch, take the batch off the queue.
fn skip_window(batch: &Batch, next: Option<u32>) -> Result<(), ApiError> {
    let (env, merchant) = (batch.environment.as_str(), batch.merchant_id.as_str());
    again_on_conflict(|| {
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
    })
}
