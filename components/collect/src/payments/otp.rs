//! Confirming a payment with the customer's one-time code: one confirmation
//! at a time, three attempts, unknown answers treated as submitted.

use mmc_domain::Status;
use mmc_domain::outcome::CallFailure;
use serde_json::Value;

use crate::ApiError;
use crate::mmc::adapter::router;
use crate::mmc::adapter::types::{AdapterError, OtpOutcome, PspStatus};
use crate::mmc::api::http_types::{Caller, Request, Response};
use crate::mmc::platform::{clock, log};
use crate::store::{self, Failure, Payment, Tx};
use crate::wire::{self, json_response};

use super::failures::{adapter_failure, failure_kind};
use super::intent::{FIRST_CHECK_MS, initiation_under_way, mark_intent};
use super::psp::operation_ref;
use super::transitions::{apply_psp_status, move_to};

const MAX_OTP_ATTEMPTS: u32 = 3;

/// OTP confirmation (the OTP operator). Wrong code: 400 `invalid_otp`, status
/// unchanged; the third wrong code fails the payment.
pub fn confirm(caller: &Caller, id: &str, otp: &str) -> Result<Payment, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let p = start_confirmation(env, merchant, id, otp)?;
    let answer = router::confirm_otp(crate::routes::via(&p).as_deref(), &operation_ref(&p), otp);
    // A storage error aborts (nothing written); any decided answer is saved.
    let (p, recorded) = store::again_on_conflict(|| {
        let tx = Tx::begin()?;
        let mut p = tx
            .payment(env, merchant, &p.id)?
            .ok_or_else(|| ApiError::internal("payment vanished"))?;
        let previous_check = p.next_check_ms;
        p.end_initiating();
        let recorded = record_otp_answer(&tx, &mut p, answer.clone(), clock::now_ms())?;
        tx.save_payment(&p, previous_check)?;
        tx.commit()?;
        Ok((p, recorded))
    })?;
    match recorded {
        OtpAnswer::Accepted => Ok(p),
        OtpAnswer::Refused(e) => Err(e),
        OtpAnswer::Wrong => {
            let left = MAX_OTP_ATTEMPTS.saturating_sub(p.otp_attempts);
            Err(ApiError::invalid(
                "invalid_otp",
                "otp",
                if left == 0 {
                    "Wrong one-time code; the payment has failed after three attempts.".to_string()
                } else {
                    format!("Wrong one-time code; {left} attempt(s) left.")
                },
            ))
        }
    }
}

/// The intent, persisted before the code goes to the operator: one
/// confirmation at a time (parallel guesses cannot pass the attempt limit),
/// and a cancel or expiry meanwhile waits for its answer.
fn start_confirmation(env: &str, merchant: &str, id: &str, otp: &str) -> Result<Payment, ApiError> {
    let p =
        store::read_payment(env, merchant, id)?.ok_or_else(|| ApiError::payment_not_found(id))?;
    let len = otp.chars().count();
    if !(4..=8).contains(&len) {
        return Err(ApiError::invalid(
            "otp_invalid_length",
            "otp",
            "otp must be 4 to 8 characters.",
        ));
    }
    store::transact(|tx| {
        let mut p = tx
            .payment(env, merchant, &p.id)?
            .ok_or_else(|| ApiError::internal("payment vanished"))?;
        let now = clock::now_ms();
        if p.status != Status::AwaitingOtp {
            return Err(not_awaiting_otp(&p));
        }
        if initiation_under_way(&p, now) {
            return Err(ApiError::state(
                "otp_confirmation_in_progress",
                "A one-time code for this payment is being checked; retry in a moment.",
            ));
        }
        // With its first poll, as a create's intent (see `mark_intent`): a
        // confirmation cut by a crash is asked about within seconds, not at expiry.
        let previous_check = p.next_check_ms;
        mark_intent(&mut p, now);
        tx.save_payment(&p, previous_check)?;
        Ok(p)
    })
}

/// What the operator's answer to a code did to the payment (saved either way).
enum OtpAnswer {
    Accepted,
    Wrong,
    /// Answered to the merchant as this error once the payment is saved.
    Refused(ApiError),
}

/// Applies the operator's answer to a code. Unknown outcomes are treated as
/// submitted and asked about; only a certain "not performed" lets the
/// customer try again.
fn record_otp_answer(
    tx: &Tx,
    p: &mut Payment,
    answer: Result<OtpOutcome, AdapterError>,
    now: u64,
) -> Result<OtpAnswer, ApiError> {
    if p.status != Status::AwaitingOtp {
        // Moved meanwhile (a callback): money taken is still recorded.
        if let Ok(OtpOutcome::Accepted(paid @ PspStatus::Completed(_))) = answer {
            apply_psp_status(tx, p, paid)?;
        }
        return Ok(OtpAnswer::Refused(not_awaiting_otp(p)));
    }
    Ok(match answer {
        // The code never left (no adapter instance was free): not a guess.
        Err(e) if failure_kind(&e) == CallFailure::Busy => {
            wait_for_code(p, now);
            OtpAnswer::Refused(ApiError::busy())
        }
        Ok(OtpOutcome::WrongCode) => {
            wait_for_code(p, now);
            p.otp_attempts += 1;
            if p.otp_attempts >= MAX_OTP_ATTEMPTS {
                p.failure = Some(Failure {
                    code: "otp_attempts_exceeded".into(),
                    message: "Three wrong one-time codes.".into(),
                });
                move_to(tx, p, Status::Failed, now)?;
            }
            OtpAnswer::Wrong
        }
        Ok(OtpOutcome::Accepted(status)) => {
            move_to(tx, p, Status::Processing, now)?;
            p.next_check_ms.get_or_insert(now + FIRST_CHECK_MS); // the intent's
            apply_psp_status(tx, p, status)?;
            OtpAnswer::Accepted
        }
        Err(e) if failure_kind(&e).is_unknown() => {
            // The code may have been taken: treat as submitted and ask the operator.
            log::count("confirm_otp_outcome_unknown");
            move_to(tx, p, Status::Processing, now)?;
            p.next_check_ms = Some(now + FIRST_CHECK_MS);
            OtpAnswer::Accepted
        }
        // Certainly not performed: nothing changes, the customer may try again.
        Err(e) => {
            wait_for_code(p, now);
            OtpAnswer::Refused(ApiError::operator("operator_error", adapter_failure(&e).1))
        }
    })
}

/// An OTP payment with no code on its way waits for its code: nothing to
/// ask the operator about, so no poll — unless it is overdue, when
/// reconciliation asks until it can settle it. A code sent and not answered
/// (a confirmation under way, or cut by a crash) is asked about.
pub fn waits_for_code(p: &Payment, now: u64) -> bool {
    p.status == Status::AwaitingOtp && now < p.expires_at_ms && p.initiating_since_ms.is_none()
}

/// The code was refused or never left: the poll the confirmation's intent
/// scheduled goes, if the payment waits for its code again.
fn wait_for_code(p: &mut Payment, now: u64) {
    if waits_for_code(p, now) {
        p.next_check_ms = None;
    }
}

fn not_awaiting_otp(p: &Payment) -> ApiError {
    ApiError::state(
        "otp_not_required",
        format!(
            "This payment is {}, not awaiting an OTP.",
            p.status.as_str()
        ),
    )
}

pub fn confirm_http(caller: &Caller, req: &Request, id: &str) -> Result<Response, ApiError> {
    let body = wire::body_object(req)?;
    wire::reject_unknown(&body, &["otp"])?;
    let otp = match body.get("otp") {
        Some(Value::String(s)) => s.clone(),
        Some(_) => {
            return Err(ApiError::invalid(
                "parameter_invalid_string",
                "otp",
                "otp must be a string.",
            ));
        }
        None => {
            return Err(ApiError::invalid(
                "parameter_missing",
                "otp",
                "otp is required.",
            ));
        }
    };
    let p = confirm(caller, id, &otp)?;
    Ok(json_response(200, &wire::PaymentView::new(&p, false)))
}
