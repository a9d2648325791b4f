//! The status moves of a payment, each written with its event: the state
//! machine, what the PSP's answers do, late successes, reviews and expiry.

use mmc_domain::Status;
use mmc_domain::settlement::Mismatch;

use crate::ApiError;
use crate::events::emit;
use crate::mmc::adapter::router;
use crate::mmc::adapter::types::{AdapterError, PspStatus};
use crate::mmc::platform::{clock, log};
use crate::review;
use crate::store::{Failure, Payment, Tx};

use super::intent::{FIRST_CHECK_MS, initiation_under_way, not_found_is_final};

/// What the PSP said of a payment, or why it could not say.
pub type PspAnswer = Result<PspStatus, AdapterError>;

/// Moves `p` to `next` if the state machine allows it and writes the event.
/// Returns without change when the move is not allowed (late or duplicate news).
pub fn move_to(tx: &Tx, p: &mut Payment, next: Status, now: u64) -> Result<(), ApiError> {
    if p.status == next {
        return Ok(()); // news we already have (a duplicate callback, a repeated poll)
    }
    if !p.status.can_move_to(next) {
        log::log(
            log::Level::Warn,
            &format!(
                "payment {}: refused move {} -> {}",
                p.id,
                p.status.as_str(),
                next.as_str()
            ),
        );
        log::count(&format!(
            "refused_move_{}_to_{}",
            p.status.as_str(),
            next.as_str()
        ));
        return Ok(());
    }
    p.status = next;
    p.updated_at_ms = now;
    if next == Status::Completed {
        p.completed_at_ms = Some(now);
    }
    if next.is_terminal() || next == Status::AwaitingOtp {
        p.next_check_ms = None;
    }
    emit(tx, p, event_of(next))
}

/// The event every status change emits (a created payment emits `created`).
fn event_of(status: Status) -> &'static str {
    match status {
        Status::Pending => "collect.payment.created",
        Status::Processing => "collect.payment.processing",
        Status::AwaitingOtp => "collect.payment.awaiting_otp",
        Status::AwaitingPayment => "collect.payment.awaiting_payment",
        Status::Completed => "collect.payment.completed",
        Status::Failed => "collect.payment.failed",
        Status::Cancelled => "collect.payment.cancelled",
        Status::Expired => "collect.payment.expired",
        Status::Refunded => "collect.payment.refunded",
    }
}

/// The operator took the money for a payment recorded failed, cancelled or
/// expired. Money taken is never hidden: the payment becomes `completed`
/// (the merchant sees it, gets `collect.payment.completed`, and can refund),
/// the status it had is kept in `late_success_from`, and it is logged and counted.
fn record_late_success(tx: &Tx, p: &mut Payment, now: u64) -> Result<(), ApiError> {
    log::log(
        log::Level::Error,
        &format!(
            "payment {}: the operator reports the money taken, but it was recorded {}; now completed",
            p.id,
            p.status.as_str()
        ),
    );
    log::count("late_success");
    p.late_success_from = Some(p.status);
    p.status = Status::Completed;
    p.updated_at_ms = now;
    p.completed_at_ms = Some(now);
    p.next_check_ms = None;
    emit(tx, p, event_of(Status::Completed))
}

/// A success for another amount or currency than the payment's: not
/// believed. The payment keeps its status and is flagged for review, once.
fn flag_for_review(tx: &Tx, p: &mut Payment, m: &Mismatch) -> Result<(), ApiError> {
    review::report("payment", &p.id, m);
    if p.review.is_some() {
        return Ok(());
    }
    p.review = Some(review::failure(m));
    p.updated_at_ms = clock::now_ms();
    review::list(tx, &p.environment, &p.merchant_id, &p.id)?;
    emit(tx, p, review::PAYMENT_EVENT)
}

/// Applies what the PSP says about a payment in progress.
pub fn apply_psp_status(tx: &Tx, p: &mut Payment, status: PspStatus) -> Result<(), ApiError> {
    let now = clock::now_ms();
    match status {
        PspStatus::Completed(paid) => match review::check(p.amount, &p.currency, &paid) {
            Err(m) => flag_for_review(tx, p, &m),
            Ok(()) if p.status.takes_late_success() => record_late_success(tx, p, now),
            Ok(()) => move_to(tx, p, Status::Completed, now),
        },
        // Not found is not never: a request queued in the operator's gateway
        // can still be carried out. The payment stays as it is; once nothing
        // of ours can be on its way, reconciliation sends it again under its
        // id (`resend`), which the operator takes once. An OTP payment moves
        // money only with a code we send: once none can be on its way, it
        // never started.
        PspStatus::NotFound
            if p.status == Status::AwaitingOtp && not_found_is_final(p.sent_at(), now) =>
        {
            p.failure = Some(Failure {
                code: "operator_not_reached".into(),
                message: "The operator has no record of this payment: it was never started.".into(),
            });
            move_to(tx, p, Status::Failed, now)
        }
        PspStatus::NotFound => Ok(()),
        PspStatus::Failed(f) => {
            if !p.status.is_terminal() {
                p.failure = Some(Failure {
                    code: f.code,
                    message: f.message,
                });
            }
            move_to(tx, p, Status::Failed, now)
        }
        PspStatus::Pending => {
            // A pending payment acknowledged by the PSP is processing.
            if p.status == Status::Pending && p.psp_reference.is_some() {
                move_to(tx, p, Status::Processing, now)?;
            }
            Ok(())
        }
    }
}

/// How long after its request the customer of `p` can still approve it at the
/// operator, as the adapter serving it describes (asked outside any transaction).
/// Unknown operator: a wide default, since nobody can say otherwise.
pub fn approval_window_ms(p: &Payment) -> u64 {
    const UNKNOWN_WINDOW_MS: u64 = 30 * 60 * 1000;
    let Some(op) = &p.operator else { return 0 };
    router::operator(&p.environment, op).map_or(UNKNOWN_WINDOW_MS, |o| o.approval_window_ms)
}

/// Past `expires_at`, what the operator said decides (`answer`: None when no
/// request ever reached an operator). Withdrawn or failed → `expired`;
/// pending → `expired` only once the operator's approval window has closed
/// too; unknown to the operator (its request may still arrive, and is sent
/// again under its id) or no answer → still in progress, asked again later.
/// A success is applied by the caller before this.
pub fn settle_overdue(
    tx: &Tx,
    p: &mut Payment,
    answer: Option<&PspAnswer>,
    approval_window_ms: u64,
    now: u64,
) -> Result<(), ApiError> {
    if p.status.is_terminal() || now < p.expires_at_ms {
        return Ok(());
    }
    // A request (or a one-time code) on its way: its answer decides first.
    let expire = !initiation_under_way(p, now)
        && match answer {
            None | Some(Ok(PspStatus::Failed(_))) => true,
            // Unknown at the operator is not never (see `apply_psp_status`):
            // only an OTP payment with no code on its way expires on it.
            Some(Ok(PspStatus::NotFound)) => {
                p.status == Status::AwaitingOtp && not_found_is_final(p.sent_at(), now)
            }
            Some(Ok(PspStatus::Pending)) => {
                now >= p.expires_at_ms.saturating_add(approval_window_ms)
            }
            Some(Ok(PspStatus::Completed(_))) | Some(Err(_)) => false,
        };
    if expire {
        if let Some(Ok(PspStatus::Failed(f))) = answer {
            p.failure = Some(Failure {
                code: f.code.clone(),
                message: f.message.clone(),
            });
        }
        return move_to(tx, p, Status::Expired, now);
    }
    log::count("expiry_held_open");
    if p.next_check_ms.is_none() {
        p.next_check_ms = Some(now + FIRST_CHECK_MS);
    }
    Ok(())
}
