//! Cancelling a payment the customer has not paid: the operator is asked
//! first, and money it already took completes the payment instead.

use mmc_domain::Status;
use serde_json::Value;

use crate::ApiError;
use crate::mmc::adapter::router;
use crate::mmc::adapter::types::{AdapterError, PspStatus};
use crate::mmc::api::http_types::{Caller, Request, Response};
use crate::mmc::platform::{clock, log};
use crate::store::{self, Payment, Tx};
use crate::wire::{self, json_response};

use super::intent::{initiation_under_way, not_found_is_final};
use super::psp::operation_ref;
use super::transitions::{apply_psp_status, move_to};

/// Cancel while the customer has not paid. The operator is asked first; if it
/// says the money already moved, the payment completes instead.
pub fn cancel_http(caller: &Caller, req: &Request, id: &str) -> Result<Response, ApiError> {
    let reason = parse_cancel_reason(req)?;
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let p =
        store::read_payment(env, merchant, id)?.ok_or_else(|| ApiError::payment_not_found(id))?;
    if !p.status.is_cancellable() {
        return Err(ApiError::state(
            "payment_not_cancellable",
            format!("A {} payment cannot be cancelled.", p.status.as_str()),
        ));
    }
    // The request to pay is on its way: cancelling only here would let the
    // customer's approval take money for a cancelled payment.
    if initiation_under_way(&p, clock::now_ms()) {
        return Err(ApiError::state(
            "payment_not_cancellable",
            "The operator is still being asked to start this payment; try again in a moment.",
        ));
    }
    // Once a request to pay may have reached the operator, only the operator
    // can say whether it is withdrawn: ask it, by our id.
    let answer = (p.operator.is_some() && p.sent_at().is_some())
        .then(|| router::cancel(crate::routes::via(&p).as_deref(), &operation_ref(&p)));
    let refuse = |why: &str| Err(ApiError::state("payment_not_cancellable", why.to_string()));
    // The operator's answer is recorded whatever the storage's conflicts.
    let p = store::again_on_conflict(|| {
        let tx = Tx::begin()?;
        let mut p = tx
            .payment(env, merchant, &p.id)?
            .ok_or_else(|| ApiError::internal("payment vanished"))?;
        let previous_check = p.next_check_ms;
        let now = clock::now_ms();
        match cancel_verdict(&p, answer.clone(), now) {
            Verdict::Withdrawn => {}
            Verdict::Refused(why) => return refuse(why),
            Verdict::Paid(paid) => {
                apply_psp_status(&tx, &mut p, paid)?;
                tx.save_payment(&p, previous_check)?;
                tx.commit()?;
                if p.status != Status::Completed {
                    return refuse(
                        "The operator reports a payment for another amount or currency: the payment is under review.",
                    );
                }
                return refuse("The customer already paid: the payment is completed.");
            }
        }
        if !p.status.is_cancellable() || initiation_under_way(&p, now) {
            return Err(ApiError::state(
                "payment_not_cancellable",
                format!("A {} payment cannot be cancelled now.", p.status.as_str()),
            ));
        }
        p.cancel_reason = reason.clone();
        move_to(&tx, &mut p, Status::Cancelled, now)?;
        tx.save_payment(&p, previous_check)?;
        tx.commit()?;
        Ok(p)
    })?;
    Ok(json_response(200, &wire::PaymentView::new(&p, false)))
}

/// A cancel's optional `reason`: text of at most 64 characters.
fn parse_cancel_reason(req: &Request) -> Result<Option<String>, ApiError> {
    let body = wire::optional_body_object(req)?;
    wire::reject_unknown(&body, &["reason"])?;
    match body.get("reason") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() <= 64 => Ok(Some(s.clone())),
        Some(Value::String(_)) => Err(ApiError::invalid(
            "parameter_too_long",
            "reason",
            "reason must be at most 64 characters.",
        )),
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid_string",
            "reason",
            "reason must be a string.",
        )),
    }
}

/// What the operator's answer to a cancel allows.
enum Verdict {
    /// Withdrawn at the operator (or failed there), or never sent.
    Withdrawn,
    Refused(&'static str),
    /// The customer paid meanwhile: recorded, and the cancel refused.
    Paid(PspStatus),
}

fn cancel_verdict(
    p: &Payment,
    answer: Option<Result<PspStatus, AdapterError>>,
    now: u64,
) -> Verdict {
    match answer {
        Some(Ok(paid @ PspStatus::Completed(_))) => Verdict::Paid(paid),
        Some(Ok(PspStatus::Failed(_))) | None => Verdict::Withdrawn,
        // An OTP payment moves money only with a code we send, and none is on its way.
        Some(Ok(PspStatus::NotFound)) if p.status == Status::AwaitingOtp => Verdict::Withdrawn,
        // Not found is not never: the request may still be queued at the
        // operator, and once nothing of ours can be on its way it is sent
        // again under its id, so that the operator's answer settles it.
        Some(Ok(PspStatus::NotFound)) if not_found_is_final(p.sent_at(), now) => Verdict::Refused(
            "The operator has no record of this request to pay yet; it may still be queued there. It is being sent again under the same id: try again once the operator answers.",
        ),
        Some(Ok(PspStatus::NotFound)) => Verdict::Refused(
            "The request to pay may still be reaching the operator; try again in a moment.",
        ),
        // Still pending at an operator that cannot withdraw a push: cancelling only here would
        // let a later approval take the customer's money for a cancelled payment.
        Some(Ok(PspStatus::Pending)) => Verdict::Refused(
            "The operator cannot withdraw this request; it completes or expires on its own.",
        ),
        Some(Err(e)) => {
            log::log(
                log::Level::Warn,
                &format!(
                    "payment {}: cancel not confirmed by the operator: {e:?}",
                    p.id
                ),
            );
            Verdict::Refused(
                "The operator could not confirm the request is withdrawn; the payment stays in progress.",
            )
        }
    }
}
