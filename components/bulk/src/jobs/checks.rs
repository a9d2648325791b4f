//! Status checks of processing payouts whose outcome is not known yet: the
//! operators asked all at once, each answer recorded on its own.

use mmc_api_kit::again_on_conflict;
use mmc_domain::outcome;

use crate::mmc::adapter::router::{self, Routed};
use crate::mmc::adapter::types::{AdapterError, OperationRef, PspStatus};
use crate::mmc::platform::{clock, log};
use crate::store::{self, Item, ItemStatus, Tx};
use crate::{ApiError, settings};

use super::answers::{Answer, completed, failure, payout_answer, record, same_attempt, warn};
use super::send::send;

/// Processing items whose outcome is due to be asked: after a pending
/// answer, a timeout, or a claim nobody finished (a crash). The operators are
/// asked all at once (each answer can take seconds), then each answer is
/// recorded in its own transaction.
pub(super) fn check_items(due: &[store::Due], now: u64) {
    let mut asked = Vec::with_capacity(due.len());
    for d in due {
        match processing_item(d) {
            Ok(Some(item)) => asked.push((d, item)),
            Ok(None) => {}
            Err(e) => warn(&format!("status check of {} failed: {}", d.key, e.message)),
        }
    }
    let ops: Vec<Routed> = asked.iter().map(|(d, item)| routed(&d.env, item)).collect();
    let statuses = router::payout_status_many(&ops);
    for ((d, item), status) in asked.into_iter().zip(statuses) {
        if let Err(e) = record_status((&d.env, &d.merchant), item, status, now) {
            warn(&format!("status check of {} failed: {}", d.key, e.message));
        }
    }
}

/// How a payout is asked about: through its route, by its id.
fn routed(env: &str, item: &Item) -> Routed {
    Routed {
        via: item.route.clone(),
        op: OperationRef {
            id: item.id.clone(),
            operator: item.operator.clone(),
            environment: env.to_string(),
            psp_reference: item.psp_reference.clone(),
            phone: Some(item.phone.clone()),
            amount: item.amount,
            currency: item.currency.clone(),
        },
    }
}

/// Items of a batch read per page while looking one up by id.
const RECHECK_PAGE: u32 = 500;

/// Asks the operator again about payout `id` of `batch`, because the books
/// found the provider's statement saying otherwise (the `recheck` export),
/// and records the answer. A failed item takes only a success (a late
/// success: completed and flagged for review, never paid again); a
/// processing one any answer but "not found" (its own checks send it again
/// when that is final). False when there is nothing to ask: no such item,
/// never sent, or already completed.
pub fn recheck(env: &str, merchant: &str, batch: &str, id: &str) -> Result<bool, ApiError> {
    let Some(item) = find_item(env, merchant, batch, id)? else {
        return Ok(false);
    };
    if item.route.is_none() || !matches!(item.status, ItemStatus::Processing | ItemStatus::Failed) {
        return Ok(false);
    }
    let Some(Ok(status)) = router::payout_status_many(&[routed(env, &item)]).pop() else {
        return Ok(true); // asked, not answered: unchanged
    };
    let now = clock::now_ms();
    match (item.status, status) {
        (ItemStatus::Failed, PspStatus::Completed(paid)) => {
            record(env, merchant, &item, completed(&item, &paid, None), true)?;
        }
        (ItemStatus::Processing, PspStatus::NotFound) | (ItemStatus::Failed, _) => {}
        (_, status) => record_status((env, merchant), item, Ok(status), now)?,
    }
    Ok(true)
}

fn find_item(env: &str, merchant: &str, batch: &str, id: &str) -> Result<Option<Item>, ApiError> {
    let mut from = 0;
    loop {
        let page = store::scan_items(env, merchant, batch, from, RECHECK_PAGE)?;
        let Some(last) = page.last().map(|i| i.position) else {
            return Ok(None);
        };
        if let Some(item) = page.into_iter().find(|i| i.id == id) {
            return Ok(Some(item));
        }
        from = last + 1;
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
    (env, merchant): (&str, &str),
    item: Item,
    status: Result<PspStatus, AdapterError>,
    now: u64,
) -> Result<(), ApiError> {
    let since = item.submitted_at_ms.unwrap_or(item.created_at_ms);
    let answer = match status {
        Ok(PspStatus::Completed(paid)) => completed(&item, &paid, None),
        Ok(PspStatus::Failed(f)) => Answer::Failed(None, failure(&f.code, f.message)),
        // Not found is not never: a request queued in the provider's gateway
        // can still execute. Once nothing of ours can be on its way, the
        // payout is sent again under the same id, which the provider takes
        // once: whichever copy arrives, the money moves once.
        Ok(PspStatus::NotFound)
            if outcome::not_found_is_final(since, now, settings::in_flight_ms()) =>
        {
            told_if_overdue(&item, since, now);
            return resend(env, merchant, &item);
        }
        Err(e) => {
            warn(&format!("payout-status of item {}: {e:?}", item.id));
            log::count("payout_status_unreadable");
            told_if_overdue(&item, since, now);
            Answer::Unreadable(format!(
                "the operator's status could not be read: {}",
                error_text(&e)
            ))
        }
        Ok(PspStatus::Pending | PspStatus::NotFound) => {
            told_if_overdue(&item, since, now);
            Answer::Pending(None)
        }
    };
    record(env, merchant, &item, answer, true).map(|_| ())
}

/// Sends a processing item's payout again, through its route and under its
/// id, as a new attempt stored before it leaves (with its own sending
/// deadline). Only the operator's answer about the id ends the item; a copy
/// refused or not sent changes nothing: earlier ones may still arrive.
fn resend(env: &str, merchant: &str, item: &Item) -> Result<(), ApiError> {
    let Some(attempt) = start_resend(env, merchant, item)? else {
        return Ok(());
    };
    warn(&format!(
        "payout of item {}: unknown to the operator once nothing of ours could be on its way; sent again under the same id",
        item.id
    ));
    log::count("payout_resent");
    // Only a copy taken moves the item: a refusal of this copy says nothing
    // of the copies before it, which may still be carried out, so the item
    // stays processing, asked about by its id.
    let answer = match send(env, &attempt) {
        Err(e) => {
            if matches!(e, AdapterError::Rejected(_)) {
                log::count("payout_resend_refused");
            }
            warn(&format!("payout of item {} sent again: {e:?}", item.id));
            Answer::Pending(None)
        }
        outcome => match payout_answer(&attempt, outcome) {
            Answer::Failed(_, f) => {
                log::count("payout_resend_refused");
                warn(&format!(
                    "payout of item {} sent again: the copy was refused ({}: {}); still asked about by its id",
                    item.id, f.code, f.message
                ));
                // Its reference is the refused copy's: the id is asked about.
                Answer::Pending(None)
            }
            answer => answer,
        },
    };
    record(env, merchant, &attempt, answer, false).map(|_| ())
}

/// The attempt of a payout sent again, stored: none when the item moved
/// meanwhile (answered, or sent again by another run).
fn start_resend(env: &str, merchant: &str, item: &Item) -> Result<Option<Item>, ApiError> {
    let now = clock::now_ms();
    again_on_conflict(|| {
        let tx = Tx::begin()?;
        let Some(mut current) = tx.item(env, merchant, &item.batch_id, item.position)? else {
            return Ok(None);
        };
        if current.status != ItemStatus::Processing || !same_attempt(&current, item) {
            return Ok(None);
        }
        let previous_check = current.next_check_ms;
        current.resent += 1;
        current.submitted_at_ms = Some(now);
        current.updated_at_ms = now;
        // If nobody records the answer (the process died), ask the operator then.
        current.next_check_ms = Some(now + settings::claim_grace_ms());
        tx.save_item(env, merchant, &current, previous_check)?;
        tx.commit()?;
        Ok(Some(current))
    })
}

/// An adapter error as a person reads it on the item.
fn error_text(e: &AdapterError) -> String {
    let text = match e {
        AdapterError::Timeout(m)
        | AdapterError::Unavailable(m)
        | AdapterError::InvalidResponse(m)
        | AdapterError::Rejected(m)
        | AdapterError::NotSent(m)
        | AdapterError::NotSupported(m)
        | AdapterError::Unauthenticated(m)
        | AdapterError::Busy(m) => m,
    };
    text.chars().take(300).collect()
}

/// Unknown stays processing however long it takes; past `max_pending_ms`,
/// a person is told (logged and counted on every check). `since` is when
/// the current attempt was sent; each copy sent before it came at least an
/// in-flight window after the one before, so the payout has been unconfirmed
/// for at least that long in all.
fn told_if_overdue(item: &Item, since: u64, now: u64) {
    let unconfirmed = now.saturating_sub(since) + u64::from(item.resent) * settings::in_flight_ms();
    if unconfirmed >= settings::max_pending_ms() {
        warn(&format!(
            "payout of item {} unconfirmed for at least {} s: check with the operator",
            item.id,
            unconfirmed / 1000
        ));
        log::count("payout_unconfirmed");
    }
}
