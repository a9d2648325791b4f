//! What an operator's answer makes of a payout: believed, failed, reviewed
//! or still pending, recorded on the item and its batch in one transaction.

use mmc_domain::outcome::CallFailure;
use mmc_domain::settlement::{self, Asked, Reported};

use crate::ApiError;
use crate::events::{emit, emit_review};
use crate::mmc::adapter::types::{AdapterError, PspStatus, Settled, Started};
use crate::mmc::platform::{clock, log};
use crate::store::{BatchStatus, Failure, Held, Item, ItemStatus, Tx};

/// First status query of a payout the operator left pending, then doubling.
const FIRST_CHECK_MS: u64 = 2_000;
const MAX_CHECK_INTERVAL_MS: u64 = 60_000;

pub(super) fn warn(message: &str) {
    log::log(log::Level::Warn, message);
}

/// What we learnt about a payout.
#[derive(Clone)]
pub(super) enum Answer {
    Completed(Option<String>),
    Failed(Option<String>, Failure),
    /// A success for something other than what was asked: stays processing,
    /// flagged for review, asked again later.
    Review(Option<String>, Failure),
    /// Accepted, not final yet, or unknown (timeout): ask again later.
    Pending(Option<String>),
    /// The status query itself failed (why): still processing, the reason
    /// shown on the item until an answer comes; asked again later.
    Unreadable(String),
}

pub(super) fn failure(code: &str, message: impl Into<String>) -> Failure {
    Failure {
        code: code.into(),
        message: message.into(),
    }
}

/// A success counts only for the item's amount, currency and beneficiary;
/// any other is not believed and the item stays processing, under review.
pub(super) fn completed(item: &Item, paid: &Settled, r: Option<String>) -> Answer {
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
pub(super) fn failure_kind(e: &AdapterError) -> CallFailure {
    mmc_domain::call_failure!(AdapterError, e)
}

/// The answer to a payout request. An error that leaves the outcome unknown
/// (timeout, 5xx, reset, unreadable answer, trap) keeps the item processing:
/// the operator is asked about it by our id, and it is never sent again under
/// another. Only an error that certainly performed nothing fails it.
pub(super) fn payout_answer(item: &Item, outcome: Result<Started, AdapterError>) -> Answer {
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

/// Whether `stored` is still the attempt `claimed` was: the same route,
/// sent (or sent again) at the same moment. A run that stalled past its
/// lease (a frozen node) may come back after another took the item over and
/// sent it again; what it learnt of its older attempt must not move the item
/// (a failover to another route would pay it twice).
pub(super) fn same_attempt(stored: &Item, claimed: &Item) -> bool {
    stored.route == claimed.route
        && stored.submitted_at_ms == claimed.submitted_at_ms
        && stored.resent == claimed.resent
}

/// Applies an answer to a processing item (and its batch) in one
/// transaction, run again on a storage conflict (the answer is never lost
/// to one); `checked`: the answer came from a status query. Returns true if
/// the item is now final.
pub(super) fn record(
    env: &str,
    merchant: &str,
    claimed: &Item,
    answer: Answer,
    checked: bool,
) -> Result<bool, ApiError> {
    let now = clock::now_ms();
    mmc_api_kit::again_on_conflict(|| {
        record_once(env, merchant, claimed, answer.clone(), checked, now)
    })
}

fn record_once(
    env: &str,
    merchant: &str,
    claimed: &Item,
    answer: Answer,
    checked: bool,
    now: u64,
) -> Result<bool, ApiError> {
    let tx = Tx::begin()?;
    let Some(mut item) = tx.item(env, merchant, &claimed.batch_id, claimed.position)? else {
        return Ok(true);
    };
    if item.status != ItemStatus::Processing {
        if let Answer::Completed(r) = answer
            && item.status == ItemStatus::Failed
        {
            late_success(&tx, env, merchant, item, r, now)?;
            tx.commit()?;
        }
        return Ok(true);
    }
    // An older attempt's answer: the current one is asked about on its own.
    // Only a success still counts (the operator moved the money under the
    // item's id), never a failure that would end the current attempt.
    if !same_attempt(&item, claimed) && !matches!(answer, Answer::Completed(_)) {
        return Ok(false);
    }
    let previous_check = item.next_check_ms;
    let was_unconfirmed = item.unconfirmed.is_some();
    if checked {
        item.checks += 1;
    }
    if !matches!(answer, Answer::Unreadable(_)) {
        item.unconfirmed = None;
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
        Answer::Unreadable(reason) => {
            let since = item.unconfirmed.as_ref().map_or(now, |u| u.since_ms);
            item.unconfirmed = Some(Held {
                reason,
                since_ms: since,
            });
            (ItemStatus::Processing, None)
        }
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
        tx.index_unconfirmed(env, merchant, &item, was_unconfirmed)?;
        tx.commit()?;
        return Ok(false);
    }
    item.status = to;
    item.next_check_ms = None;
    item.completed_at_ms = Some(now);
    tx.save_item(env, merchant, &item, previous_check)?;
    tx.index_unconfirmed(env, merchant, &item, was_unconfirmed)?;

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

/// The operator reports paid a payout recorded failed: the money went, so
/// the item becomes completed, never left failed (paying it again would pay
/// twice). It is flagged for review, with an event, and its batch's counts
/// and outcome follow.
fn late_success(
    tx: &Tx,
    env: &str,
    merchant: &str,
    mut item: Item,
    psp_reference: Option<String>,
    now: u64,
) -> Result<(), ApiError> {
    let was = item.failure.take();
    log::log(
        log::Level::Error,
        &format!(
            "payout of item {}: the operator reports it paid after it was recorded failed ({})",
            item.id,
            was.as_ref().map_or("no reason", |f| f.code.as_str())
        ),
    );
    log::count("late_payout_success");
    item.status = ItemStatus::Completed;
    item.completed_at_ms = Some(now);
    item.updated_at_ms = now;
    if psp_reference.is_some() {
        item.psp_reference = psp_reference;
    }
    item.review = Some(failure(
        "late_success",
        "The operator reports this payout made after it was recorded failed: check that it was not paid again.",
    ));
    tx.save_item(env, merchant, &item, None)?;
    let mut batch = tx
        .batch(env, merchant, &item.batch_id)?
        .ok_or_else(|| ApiError::internal("item without batch"))?;
    let previous_queue = batch.queued_ms;
    batch.count_move(ItemStatus::Failed, ItemStatus::Completed, item.amount);
    batch.amount_failed = batch.amount_failed.saturating_sub(item.amount);
    batch.updated_at_ms = now;
    emit_review(tx, &batch, &item)?;
    if let Some(end) = batch.outcome()
        && batch.status != end
        && batch.status != BatchStatus::Processing
    {
        batch.status = end;
        emit(tx, &batch)?;
    }
    tx.save_batch(&batch, previous_queue)
}
