//! Sending a stored payment to the operator through its route (failing over
//! when nothing was done) and recording the operator's answer.

use mmc_domain::outcome::{self, CallFailure};
use mmc_domain::{Mode, Status};

use crate::ApiError;
use crate::mmc::adapter::router;
use crate::mmc::adapter::types::{AdapterError, InitiateRequest, Initiated};
use crate::mmc::api::http_types::Caller;
use crate::mmc::platform::{clock, config, log, node};
use crate::routes::Choice;
use crate::store::{self, Failure, Payment, Tx};

use super::failures::{adapter_failure, failure_kind};
use super::intent::FIRST_CHECK_MS;
use super::transitions::move_to;

/// Asks the operator to start collecting `p` (as just stored; no transaction
/// held), through its route or, when that route answers that nothing was
/// done, the next one (see `routes`); then applies the outcome (which ends
/// `initiating_since_ms`). Returns the payment as stored afterwards.
pub fn initiate(caller: &Caller, mut p: Payment) -> Result<Payment, ApiError> {
    let outcome = loop {
        let outcome = router::initiate(
            crate::routes::via(&p).as_deref(),
            &initiate_request(&caller.base_url, &p),
            send_until(&p),
        );
        let next = match &outcome {
            Err(e) => crate::routes::after_refusal(&p, e),
            Ok(_) => None,
        };
        match next.map(|route| switch_route(&p, route)).transpose()? {
            Some(Some(moved)) => p = moved,
            _ => break outcome,
        }
    };
    let busy = matches!(&outcome, Err(e) if failure_kind(e) == CallFailure::Busy);
    let p = store::transact(|tx| {
        tx.assume_payment(&p); // as the caller stored it
        let mut stored = tx
            .payment(&p.environment, &p.merchant_id, &p.id)?
            .ok_or_else(|| ApiError::internal("payment vanished"))?;
        // Sent again since, by another run (this one stalled past the
        // in-flight window): that attempt's answer is the one to record.
        if stored.sent_at_ms != p.sent_at_ms {
            return Ok(stored);
        }
        record_attempt(tx, &mut stored, |tx, p| {
            apply_initiated(tx, p, outcome.clone())
        })?;
        Ok(stored)
    })?;
    if busy && p.sent_at().is_none() {
        return Err(ApiError::busy());
    }
    Ok(p)
}

/// The sending deadline of `p`'s request now on its way (see
/// `mmc_domain::outcome::send_until_ms`): a node that stalls past it sends
/// nothing, so that whoever asks about `p` once its in-flight window has
/// passed knows that nothing of ours is still on its way.
pub(super) fn send_until(p: &Payment) -> u64 {
    let started = p.initiating_since_ms.unwrap_or_else(clock::now_ms);
    outcome::send_until_ms(started, config::get)
}

/// Records what `answer` makes of `p` (as stored in `tx`) once its request
/// to pay is answered: the reference indexed when it changed, the request no
/// longer under way, and the payment saved.
pub(super) fn record_attempt(
    tx: &Tx,
    p: &mut Payment,
    answer: impl FnOnce(&Tx, &mut Payment) -> Result<(), ApiError>,
) -> Result<(), ApiError> {
    let (previous_check, previous_ref) = (p.next_check_ms, p.psp_reference.clone());
    answer(tx, p)?;
    if p.psp_reference != previous_ref {
        tx.index_psp_reference(p)?;
    }
    p.end_initiating();
    tx.save_payment(p, previous_check)
}

pub(super) fn initiate_request(base_url: &str, p: &Payment) -> InitiateRequest {
    let operator = p.operator.clone().unwrap_or_default();
    // The route is in the callback's address: the adapter it names reads it.
    let via = p
        .route
        .as_ref()
        .map(|r| format!("&via={}", r.adapter))
        .unwrap_or_default();
    InitiateRequest {
        payment_id: p.id.clone(),
        reference: p.reference.clone(),
        operator: operator.clone(),
        environment: p.environment.clone(),
        amount: p.amount,
        currency: p.currency.clone(),
        country: p.country.clone(),
        phone: p.customer.as_ref().and_then(|c| c.phone.clone()),
        mode: p.mode.as_str().into(),
        description: p.description.clone(),
        callback_url: format!(
            "{base_url}/api/v1/psp/{operator}/callback?environment={}{via}",
            p.environment
        ),
        return_url: Some(format!("{base_url}/checkout/{}", p.id)),
    }
}

/// `p`'s next route, stored before it is called (the intent stays): None
/// when the payment moved meanwhile (a cancel, an answer, or the same
/// request sent again by another run once this one's window had passed: a
/// second provider must not be asked for it), and the refusal then stands.
fn switch_route(p: &Payment, route: Choice) -> Result<Option<Payment>, ApiError> {
    store::transact(|tx| {
        tx.assume_payment(p);
        let Some(mut current) = tx.payment(&p.environment, &p.merchant_id, &p.id)? else {
            return Ok(None);
        };
        let same = current.status == p.status
            && current.initiating_since_ms.is_some()
            && current.initiating_since_ms == p.initiating_since_ms
            && current.sent_at_ms == p.sent_at_ms
            && current.route.as_ref().map(|r| &r.adapter) == p.route.as_ref().map(|r| &r.adapter);
        if !same {
            return Ok(None);
        }
        log::count("initiate_failover");
        route.clone().apply(&mut current);
        // A new request goes on its way now: the in-flight window restarts.
        current.start_initiating(clock::now_ms(), node::id());
        tx.save_payment(&current, current.next_check_ms)?;
        Ok(Some(current))
    })
}

pub(super) fn apply_initiated(
    tx: &Tx,
    p: &mut Payment,
    outcome: Result<Initiated, AdapterError>,
) -> Result<(), ApiError> {
    let now = clock::now_ms();
    if p.status != Status::Pending && p.status != Status::AwaitingPayment {
        // Moved meanwhile (a cancel, an answer to a query): that move stands,
        // but the reference our own call was answered with is the one we follow.
        if p.psp_reference.is_none()
            && let Ok(
                Initiated::AwaitingCustomer(r)
                | Initiated::OtpRequired(r)
                | Initiated::Completed(r),
            ) = &outcome
            && plausible_reference(r)
        {
            p.psp_reference = Some(r.clone());
        }
        return Ok(());
    }
    match outcome.and_then(usable) {
        // The poll the intent scheduled stays (see `mark_intent`).
        Ok(Initiated::AwaitingCustomer(r)) => {
            p.psp_reference = Some(r);
            p.next_check_ms.get_or_insert(now + FIRST_CHECK_MS);
            move_to(tx, p, Status::Processing, now)
        }
        Ok(Initiated::OtpRequired(r)) => {
            p.psp_reference = Some(r);
            move_to(tx, p, Status::AwaitingOtp, now)
        }
        Ok(Initiated::Redirect(r)) => {
            p.psp_reference = Some(r.psp_reference);
            p.checkout_url = Some(r.url);
            p.next_check_ms.get_or_insert(now + FIRST_CHECK_MS);
            move_to(tx, p, Status::AwaitingPayment, now)
        }
        // Settled at once, says the adapter, without saying for what: the
        // operator is asked right away, and its answer (amount and currency
        // included) decides.
        Ok(Initiated::Completed(r)) => {
            p.psp_reference = Some(r);
            p.next_check_ms = Some(now);
            move_to(tx, p, Status::Processing, now)
        }
        Ok(Initiated::Refused(f)) => {
            p.failure = Some(Failure {
                code: f.code,
                message: f.message,
            });
            move_to(tx, p, Status::Failed, now)
        }
        // No adapter instance was free: the request never left. Not failed and
        // not in flight: a retry (same Idempotency-Key, or the customer on the
        // page) sends it; if none comes, expiry ends it.
        Err(e) => apply_initiate_error(tx, p, e, now),
    }
}

/// An adapter is untrusted code: an answer we cannot store or show leaves
/// the outcome unknown.
fn usable(o: Initiated) -> Result<Initiated, AdapterError> {
    match &o {
        Initiated::AwaitingCustomer(r) | Initiated::OtpRequired(r) | Initiated::Completed(r)
            if !plausible_reference(r) =>
        {
            Err(AdapterError::InvalidResponse(
                "the adapter returned an unusable PSP reference".into(),
            ))
        }
        Initiated::Redirect(r)
            if !plausible_reference(&r.psp_reference) || !plausible_url(&r.url) =>
        {
            Err(AdapterError::InvalidResponse(
                "the adapter returned an unusable redirect".into(),
            ))
        }
        _ => Ok(o),
    }
}

/// A request to pay that ended without an answer: never sent (busy), an
/// unknown outcome (still in progress, asked about by our id), or certainly
/// not performed (failed).
fn apply_initiate_error(
    tx: &Tx,
    p: &mut Payment,
    e: AdapterError,
    now: u64,
) -> Result<(), ApiError> {
    match failure_kind(&e) {
        // No adapter instance was free: the request never left. Not failed and
        // not in flight: a retry (same Idempotency-Key, or the customer on the
        // page) sends it; if none comes, expiry ends it.
        CallFailure::Busy => {
            log::count("initiate_busy");
            p.sent_at_ms = None;
            p.next_check_ms = None; // nothing to ask about
            match p.mode {
                Mode::Direct => p.unsent = true,
                Mode::Hosted => p.operator = None, // the customer chooses again
            }
            Ok(())
        }
        kind if kind.is_unknown() => {
            // Unknown outcome: stay in progress; asking the operator by our id resolves it.
            log::log(
                log::Level::Warn,
                &format!(
                    "payment {}: outcome of the request to pay unknown: {e:?}",
                    p.id
                ),
            );
            log::count("initiate_outcome_unknown");
            p.next_check_ms = Some(now + FIRST_CHECK_MS);
            Ok(())
        }
        _ => {
            let (code, message) = adapter_failure(&e);
            p.failure = Some(Failure {
                code: code.into(),
                message,
            });
            move_to(tx, p, Status::Failed, now)
        }
    }
}

/// 1 to 200 printable characters.
fn plausible_reference(r: &str) -> bool {
    !r.is_empty() && r.len() <= 200 && !r.chars().any(char::is_control)
}

fn plausible_url(u: &str) -> bool {
    (u.starts_with("https://") || u.starts_with("http://"))
        && u.len() <= 2048
        && !u.chars().any(|c| c.is_control() || c.is_whitespace())
}
