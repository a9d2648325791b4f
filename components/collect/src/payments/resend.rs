//! Not found is not never: a request to pay the operator does not know once
//! nothing of ours can still be on its way is sent again, under the same id
//! and through the same route, so that the operator's answer settles it.
//! The first copy may still be queued in the operator's gateway; the
//! operator takes a repeated id once, so whichever copy arrives, the
//! customer is asked once and the money moves once.

use mmc_domain::Status;

use crate::ApiError;
use crate::mmc::adapter::router;
use crate::mmc::adapter::types::{AdapterError, Initiated};
use crate::mmc::platform::{clock, config, log, node};
use crate::store::{self, Payment};

use super::initiate::{apply_initiated, initiate_request, record_attempt, send_until};
use super::intent::{FIRST_CHECK_MS, in_flight_ms, initiation_under_way, not_found_is_final};

/// Whether the operator's "not found" about `p` calls for sending it again:
/// a request to pay that may have been sent, in progress, of which nothing
/// of ours can still be on its way. (An OTP payment moves no money before
/// our code, which its confirmation sends: see `apply_psp_status`.)
pub fn to_send_again(p: &Payment, now: u64) -> bool {
    matches!(
        p.status,
        Status::Pending | Status::Processing | Status::AwaitingPayment
    ) && p.operator.is_some()
        && p.sent_at().is_some()
        && not_found_is_final(p.sent_at(), now)
        && !initiation_under_way(p, now)
}

/// Sends payment `id` again (see the module), as a new attempt stored
/// before it leaves with its own sending deadline. `seen_sent_at` is when
/// the attempt found unknown was sent: a payment sent again or answered
/// meanwhile is left alone. Only a copy taken moves the payment: a copy
/// refused or not sent changes nothing, since an earlier one may still
/// arrive; the operator's answer about the id settles it.
pub fn resend(
    env: &str,
    merchant: &str,
    id: &str,
    seen_sent_at: Option<u64>,
) -> Result<(), ApiError> {
    let now = clock::now_ms();
    let attempt = store::transact(|tx| {
        let Some(mut p) = tx.payment(env, merchant, id)? else {
            return Ok(Attempt::Moved);
        };
        if !to_send_again(&p, now) || p.sent_at() != seen_sent_at {
            return Ok(Attempt::Moved);
        }
        // A record from before the address was kept names the service's
        // address as this node knows it; with neither, it cannot name its
        // callback: it stays in progress, asked about, for a person to check.
        if p.base_url.is_none() {
            p.base_url = config::get("service_base_url");
        }
        if p.base_url.is_none() {
            return Ok(Attempt::Unaddressed);
        }
        let previous_check = p.next_check_ms;
        p.sent_at_ms = Some(now);
        p.resent += 1;
        p.updated_at_ms = now;
        p.start_initiating(now, node::id());
        // If the answer is never recorded (this node dies), asked about then.
        p.next_check_ms = Some(now + in_flight_ms());
        tx.save_payment(&p, previous_check)?;
        Ok(Attempt::Stored(Box::new(p)))
    })?;
    let p = match attempt {
        Attempt::Stored(p) => p,
        Attempt::Moved => return Ok(()),
        Attempt::Unaddressed => {
            said(
                id,
                log::Level::Error,
                "payment_unconfirmed",
                "stored without the service's address to send it again; check with the operator",
            );
            return Ok(());
        }
    };
    said(
        id,
        log::Level::Warn,
        "payment_resent",
        "sent again under the same id",
    );
    let base_url = p.base_url.as_deref().unwrap_or_default();
    let outcome = router::initiate(
        crate::routes::via(&p).as_deref(),
        &initiate_request(base_url, &p),
        send_until(&p),
    );
    record_answer(&p, outcome)
}

/// What became of a payment to send again.
enum Attempt {
    /// Its new attempt, stored before it leaves.
    Stored(Box<Payment>),
    /// It moved meanwhile (answered, or sent again by another run).
    Moved,
    /// It cannot be sent again: stored without the service's address.
    Unaddressed,
}

/// Logs and counts (`event`) what was done about payment `id`, unknown to the operator.
fn said(id: &str, level: log::Level, event: &str, what: &str) {
    log::log(
        level,
        &format!(
            "payment {id}: unknown to the operator once nothing of ours could be on its way; {what}"
        ),
    );
    log::count(event);
}

/// Logs and counts an answer to a copy sent again that does not settle
/// the payment.
fn said_of_copy(id: &str, what: &str) {
    log::log(
        log::Level::Warn,
        &format!("payment {id} sent again: the copy was {what}; still asked about by its id"),
    );
    log::count("payment_resend_refused");
}

/// What the operator answered to the payment sent again.
fn record_answer(
    attempt: &Payment,
    outcome: Result<Initiated, AdapterError>,
) -> Result<(), ApiError> {
    store::transact(|tx| {
        tx.assume_payment(attempt); // as stored before the call
        let Some(mut p) = tx.payment(&attempt.environment, &attempt.merchant_id, &attempt.id)?
        else {
            return Ok(());
        };
        if p.sent_at_ms != attempt.sent_at_ms {
            return Ok(()); // sent again since, by another run
        }
        record_attempt(tx, &mut p, |tx, p| {
            match outcome.clone() {
                // The copy was taken: recorded as a first answer would be.
                Ok(
                    answer @ (Initiated::AwaitingCustomer(_)
                    | Initiated::Redirect(_)
                    | Initiated::Completed(_)),
                ) => apply_initiated(tx, p, Ok(answer))?,
                // A refusal of this copy says nothing of the copies before
                // it, which may still be carried out: the payment stays in
                // progress, asked about by its id, and is sent again while
                // the operator does not know it. (A code asked for now is
                // unknown too: what was first sent needed none.)
                Ok(Initiated::Refused(f)) => {
                    said_of_copy(&p.id, &format!("refused: {} {}", f.code, f.message));
                }
                Ok(Initiated::OtpRequired(_)) => said_of_copy(&p.id, "a one-time code asked for"),
                Err(e @ AdapterError::Rejected(_)) => said_of_copy(&p.id, &format!("{e:?}")),
                // Unknown, or not sent: nothing changes; asked about again.
                Err(e) => log::log(
                    log::Level::Warn,
                    &format!("payment {} sent again: {e:?}", p.id),
                ),
            }
            if !p.status.is_terminal() {
                p.next_check_ms = Some(clock::now_ms() + FIRST_CHECK_MS);
            }
            Ok(())
        })
    })
}
