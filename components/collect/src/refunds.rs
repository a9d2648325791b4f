//! Refunds of completed payments. The amount is reserved on the payment in
//! the same transaction that records the refund, so concurrent refunds can
//! never add up to more than the payment; the operator is called outside.

use mmc_domain::settlement::Mismatch;
use mmc_domain::{Status, time};
use serde_json::{Value, json};

use crate::events::{EventData, emit_event};
use crate::mmc::adapter::router::{self, Routed};
use crate::mmc::adapter::types::{AdapterError, OperationRef, PspStatus, RefundRequest};
use crate::mmc::api::http_types::{Caller, Request, Response};
use crate::mmc::platform::{clock, signing};
use crate::payments::{
    self, FIRST_CHECK_MS, MAX_CHECK_INTERVAL_MS, adapter_failure, move_to, operation_ref,
};
use crate::review;
use crate::store::{self, Failure, Payment, Refund, RefundIdem, RefundStatus, Tx};
use crate::wire::{self, json_response};
use crate::{API_VERSION, ApiError};

pub const REASONS: &[&str] = &[
    "customer_dispute",
    "duplicate",
    "fraudulent",
    "requested_by_customer",
    "other",
];

pub fn refund_json(r: &Refund) -> Value {
    let mut v = json!({
        "object": "collect.refund",
        "id": r.id,
        "payment_id": r.payment_id,
        "reference": r.reference,
        "status": match r.status { RefundStatus::Pending => "pending", RefundStatus::Completed => "completed", RefundStatus::Failed => "failed" },
        "amount": r.amount,
        "currency": r.currency,
        "reason": r.reason,
        "metadata": r.metadata,
        "psp_reference": r.psp_reference,
        "failure_code": r.failure.as_ref().map(|f| f.code.clone()),
        "failure_message": r.failure.as_ref().map(|f| f.message.clone()),
        "environment": r.environment,
        "created_at": time::rfc3339(r.created_at_ms),
    });
    // Only when flagged: an unflagged refund's JSON is as it always was.
    if let Some(f) = &r.review {
        v["review"] = json!({"code": f.code, "message": f.message});
    }
    v
}

/// What a refund request asks: the amount (None: all that remains), the
/// reason and the merchant's metadata.
#[derive(Clone)]
struct Asked {
    amount: Option<u64>,
    reason: String,
    metadata: Option<Value>,
}

fn parse_refund(req: &Request) -> Result<Asked, ApiError> {
    let body = wire::optional_body_object(req)?;
    wire::reject_unknown(&body, &["amount", "reason", "metadata"])?;
    let not_integer = || {
        ApiError::invalid(
            "parameter_invalid_integer",
            "amount",
            "amount must be an integer.",
        )
    };
    let amount = match body.get("amount") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) => match mmc_domain::json::integer(n) {
            Some(a) if a >= 1 => Some(a as u64),
            Some(_) => {
                return Err(ApiError::invalid(
                    "parameter_out_of_range",
                    "amount",
                    "amount must be at least 1.",
                ));
            }
            None => return Err(not_integer()),
        },
        Some(_) => return Err(not_integer()),
    };
    let reason = match body.get("reason") {
        None | Some(Value::Null) => "customer_dispute".to_string(),
        Some(Value::String(r)) if REASONS.contains(&r.as_str()) => r.clone(),
        Some(_) => {
            return Err(ApiError::invalid(
                "parameter_invalid",
                "reason",
                format!("reason must be one of {}.", REASONS.join(", ")),
            ));
        }
    };
    let metadata = wire::metadata(body.get("metadata"))?;
    Ok(Asked {
        amount,
        reason,
        metadata,
    })
}

/// The first step of a refund: a replay of an earlier request under the
/// same key, or a new pending refund with its amount reserved.
enum Reserved {
    Replay(Refund),
    /// The payment as reserved on (boxed: a payment is several times a refund's size).
    New(Box<Payment>, Refund),
}

pub fn create_http(caller: &Caller, req: &Request, id: &str) -> Result<Response, ApiError> {
    let asked = parse_refund(req)?;
    let key = wire::header(req, "idempotency-key")
        .map(payments::parse_idempotency_key)
        .transpose()?;
    let (p, r) = match reserve(caller, id, asked, key.as_deref())? {
        Reserved::Replay(r) => {
            let mut body = refund_json(&r);
            body["idempotent_replay"] = Value::Bool(true);
            return Ok(json_response(200, &body));
        }
        Reserved::New(p, r) => (*p, r),
    };
    let answer = send(&p, &r);
    let r = store::again_on_conflict(|| {
        let tx = Tx::begin()?;
        let mut r = tx
            .refund(&r.environment, &r.merchant_id, &r.id)?
            .ok_or_else(|| ApiError::internal("refund vanished"))?;
        // Sent again since, by another run (this one stalled past the
        // in-flight window): that attempt's answer is the one to record.
        if r.sent_at_ms.is_some() {
            return Ok(r);
        }
        let status = match &answer {
            Ok(started) => {
                if !started.psp_reference.is_empty() {
                    r.psp_reference = Some(started.psp_reference.clone());
                }
                started.status.clone()
            }
            Err(e) => status_after_error(&r, e),
        };
        apply_refund_status(&tx, &mut r, status)?;
        tx.commit()?;
        Ok(r)
    })?;
    Ok(json_response(201, &refund_json(&r)))
}

/// The refund request of `r`, sent as one attempt: under the refund's id,
/// through the route its payment was collected through, and not after the
/// attempt's sending deadline (from when it was stored).
fn send(p: &Payment, r: &Refund) -> Result<crate::mmc::adapter::types::Started, AdapterError> {
    let started = r.sent_at_ms.unwrap_or(r.created_at_ms);
    router::refund(
        crate::routes::via(p).as_deref(),
        &RefundRequest {
            refund_id: r.id.clone(),
            payment: operation_ref(p),
            amount: r.amount,
            reason: r.reason.clone(),
        },
        mmc_domain::outcome::send_until_ms(started, crate::mmc::platform::config::get),
    )
}

/// Reserves the amount with the pending refund, in one transaction; the
/// refund is due for a status query from the start, so a crash before the
/// operator's answer is recorded leaves it polled, not forgotten.
fn reserve(
    caller: &Caller,
    id: &str,
    asked: Asked,
    key: Option<&str>,
) -> Result<Reserved, ApiError> {
    let now = clock::now_ms();
    store::again_on_conflict(|| reserve_once(caller, id, asked.clone(), key, now))
}

fn reserve_once(
    caller: &Caller,
    id: &str,
    asked: Asked,
    key: Option<&str>,
    now: u64,
) -> Result<Reserved, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let tx = Tx::begin()?;
    let pid = store::read_payment(env, merchant, id)?
        .ok_or_else(|| ApiError::payment_not_found(id))?
        .id;
    // The same request again under its key: the same refund, never a second one.
    let request_hash = hex::encode(signing::sha256(
        &serde_json::to_vec(&json!([pid, asked.amount, asked.reason, asked.metadata]))
            .unwrap_or_default(),
    ));
    if let Some(key) = key
        && let Some(r) = earlier_refund(&tx, env, merchant, key, &request_hash, now)?
    {
        return Ok(Reserved::Replay(r));
    }
    let mut p = tx
        .payment(env, merchant, &pid)?
        .ok_or_else(|| ApiError::payment_not_found(id))?;
    if p.status != Status::Completed {
        return Err(ApiError::state(
            "payment_not_refundable",
            format!(
                "Only completed payments can be refunded; this one is {}.",
                p.status.as_str()
            ),
        ));
    }
    let remaining = p.amount - p.refunded_amount - p.refund_reserved;
    let amount = asked.amount.unwrap_or(remaining);
    if amount == 0 || amount > remaining {
        return Err(ApiError::invalid(
            "refund_amount_exceeds_remaining",
            "amount",
            format!(
                "At most {remaining} {} remains to refund on this payment.",
                p.currency
            ),
        ));
    }
    let r = new_refund(&p, amount, asked, now);
    p.refund_reserved += amount;
    tx.save_payment(&p, p.next_check_ms)?;
    tx.save_refund(&r, None)?;
    if let Some(key) = key {
        tx.put_refund_idem(
            env,
            merchant,
            key,
            &RefundIdem {
                request_hash,
                refund_id: r.id.clone(),
                created_ms: now,
            },
        )?;
    }
    tx.commit()?;
    Ok(Reserved::New(Box::new(p), r))
}

/// What a failed refund call means: unknown → still pending (polled, the
/// amount kept reserved); certainly not performed → failed.
fn status_after_error(r: &Refund, e: &AdapterError) -> PspStatus {
    if payments::failure_kind(e).is_unknown() {
        crate::mmc::platform::log::log(
            crate::mmc::platform::log::Level::Warn,
            &format!("refund {}: outcome unknown: {e:?}", r.id),
        );
        crate::mmc::platform::log::count("refund_outcome_unknown");
        return PspStatus::Pending;
    }
    let (code, message) = adapter_failure(e);
    PspStatus::Failed(crate::mmc::adapter::types::Failure {
        code: code.into(),
        message,
    })
}

/// The next status query of a refund still pending: backing off from
/// `FIRST_CHECK_MS`, doubling, up to `MAX_CHECK_INTERVAL_MS`.
fn ask_again_later(r: &mut Refund, now: u64) {
    r.checks += 1;
    r.next_check_ms = Some(now + (FIRST_CHECK_MS << r.checks.min(10)).min(MAX_CHECK_INTERVAL_MS));
}

/// Moves a pending refund to its final state (once), releasing or settling
/// the reserved amount and refunding the payment when fully refunded.
pub fn apply_refund_status(tx: &Tx, r: &mut Refund, status: PspStatus) -> Result<(), ApiError> {
    let previous_check = r.next_check_ms;
    let now = clock::now_ms();
    if let PspStatus::Completed(paid) = &status
        && let Err(m) = review::check(r.amount, &r.currency, paid)
    {
        return flag_for_review(tx, r, &m, now);
    }
    // A late success: the operator refunded a refund recorded failed. The
    // money went back, so it is recorded (its amount, released when it
    // failed, is counted as refunded), never dropped.
    let late = r.status == RefundStatus::Failed && matches!(status, PspStatus::Completed(_));
    if late {
        crate::mmc::platform::log::log(
            crate::mmc::platform::log::Level::Error,
            &format!("refund {}: the operator reports it made after all", r.id),
        );
        crate::mmc::platform::log::count("late_refund_success");
    } else if r.status != RefundStatus::Pending {
        return keep_final(tx, r, &status);
    }
    // Not found is not never: the request may still arrive (queued in the
    // operator's gateway). The amount stays reserved; the status query goes
    // on, and once nothing of ours can be on its way the refund is sent
    // again under its id (`reconcile_due`). Only an explicit refusal fails it.
    let (event, settled) = match status {
        PspStatus::NotFound | PspStatus::Pending => {
            ask_again_later(r, now);
            tx.save_refund(r, previous_check)?;
            return Ok(());
        }
        PspStatus::Completed(_) => {
            r.status = RefundStatus::Completed;
            ("collect.refund.completed", true)
        }
        PspStatus::Failed(f) => {
            r.status = RefundStatus::Failed;
            r.failure = Some(Failure {
                code: f.code,
                message: f.message,
            });
            ("collect.refund.failed", false)
        }
    };
    r.updated_at_ms = now;
    r.next_check_ms = None;
    tx.save_refund(r, previous_check)?;
    let mut p = tx
        .payment(&r.environment, &r.merchant_id, &r.payment_id)?
        .ok_or_else(|| ApiError::internal("refund without payment"))?;
    // The amount reserved at the request goes; a late success had released it.
    if !late {
        p.refund_reserved = p.refund_reserved.saturating_sub(r.amount);
    }
    if settled {
        p.refunded_amount += r.amount;
        if p.refunded_amount >= p.amount {
            move_to(tx, &mut p, Status::Refunded, now)?;
        }
    }
    tx.save_payment(&p, p.next_check_ms)?;
    emit_refund_event(tx, event, r, &p)
}

/// A pending refund of `amount` on `p`, due for a status query once the
/// request may have reached the operator.
fn new_refund(p: &Payment, amount: u64, asked: Asked, now: u64) -> Refund {
    Refund {
        id: crate::ids::new().to_string(),
        payment_id: p.id.clone(),
        merchant_id: p.merchant_id.clone(),
        environment: p.environment.clone(),
        reference: p.reference.clone(),
        status: RefundStatus::Pending,
        amount,
        currency: p.currency.clone(),
        reason: asked.reason,
        metadata: asked.metadata,
        psp_reference: None,
        failure: None,
        created_at_ms: now,
        updated_at_ms: now,
        next_check_ms: Some(now + payments::in_flight_ms()),
        checks: 0,
        review: None,
        sent_at_ms: None,
        resent: 0,
    }
}

/// The refund an earlier request with this Idempotency-Key made (within the
/// key's lifetime); an error if that request differed.
fn earlier_refund(
    tx: &Tx,
    env: &str,
    merchant: &str,
    key: &str,
    request_hash: &str,
    now: u64,
) -> Result<Option<Refund>, ApiError> {
    let Some(rec) = tx
        .refund_idem(env, merchant, key)?
        .filter(|r| now.saturating_sub(r.created_ms) < payments::IDEMPOTENCY_TTL_MS)
    else {
        return Ok(None);
    };
    if rec.request_hash != request_hash {
        return Err(ApiError::idempotency(
            "idempotency_key_reused",
            "This Idempotency-Key was used with a different request.",
        ));
    }
    tx.refund(env, merchant, &rec.refund_id)?
        .ok_or_else(|| ApiError::internal("idempotency record without refund"))
        .map(Some)
}

/// A final refund stays as it is, whatever is said of it later (a move
/// other than a repeat is counted); asked about once after a callback, it
/// is not asked again.
fn keep_final(tx: &Tx, r: &mut Refund, status: &PspStatus) -> Result<(), ApiError> {
    if !matches!(
        (r.status, status),
        (RefundStatus::Completed, PspStatus::Completed(_))
            | (
                RefundStatus::Failed,
                PspStatus::Failed(_) | PspStatus::Pending
            )
    ) {
        crate::mmc::platform::log::count("refused_refund_move");
    }
    if r.next_check_ms.is_some() {
        let previous = r.next_check_ms.take();
        tx.save_refund(r, previous)?;
    }
    Ok(())
}

/// A success for another amount or currency is not believed: the refund
/// stays as it is, flagged for review (asked again on its schedule); the
/// flag's event goes out once.
fn flag_for_review(tx: &Tx, r: &mut Refund, m: &Mismatch, now: u64) -> Result<(), ApiError> {
    let previous_check = r.next_check_ms;
    review::report("refund", &r.id, m);
    let first = r.review.is_none();
    r.review.get_or_insert_with(|| review::failure(m));
    if r.status == RefundStatus::Pending {
        ask_again_later(r, now);
    }
    r.updated_at_ms = now;
    tx.save_refund(r, previous_check)?;
    if !first {
        return Ok(());
    }
    let p = tx
        .payment(&r.environment, &r.merchant_id, &r.payment_id)?
        .ok_or_else(|| ApiError::internal("refund without payment"))?;
    emit_refund_event(tx, review::REFUND_EVENT, r, &p)
}

/// A refund's event, filed under its payment (`GET /events?payment=`),
/// which is its object.
fn emit_refund_event(
    tx: &Tx,
    event: &str,
    r: &Refund,
    p: &crate::store::Payment,
) -> Result<(), ApiError> {
    emit_event(
        tx,
        event,
        &r.merchant_id,
        &r.environment,
        &p.id,
        p.callback_url.clone(),
        EventData {
            object: &wire::PaymentView::new(p, false),
            refund: Some(&refund_json(r)),
        },
        API_VERSION,
    )
}

/// Polls refunds still pending at the PSP: the round's queries go to the
/// operators at once (`refund-status-many`; each can take seconds), then each
/// answer is recorded in its own transaction.
pub fn reconcile_due(limit: u32) -> u32 {
    let due = match store::due("refund_active", clock::now_ms(), limit) {
        Ok(d) => d,
        Err(_) => return 0,
    };
    // Reads: the writer is taken only to record the answers.
    let (asked, ops): (Vec<(&store::Due, Option<u64>)>, Vec<Routed>) = due
        .iter()
        .filter_map(|d| {
            let (op, sent_at) = refund_to_ask(d).ok().flatten()?;
            Some(((d, sent_at), op))
        })
        .unzip();
    let answers = router::refund_status_many(&ops);
    for ((d, sent_at), answer) in asked.into_iter().zip(answers) {
        let _ = record_refund_answer(d, sent_at, answer);
    }
    due.len() as u32
}

/// A due refund, asked through the route its payment was collected
/// through, and when its attempt asked about was sent (None: the first);
/// none when the refund is gone (its index entry is dropped).
fn refund_to_ask(d: &store::Due) -> Result<Option<(Routed, Option<u64>)>, ApiError> {
    let Some(r) = store::read_refund(&d.env, &d.merchant, &d.id)? else {
        store::drop_index_entry("refund_active", &d.key)?;
        return Ok(None);
    };
    let sent_at = r.sent_at_ms;
    routed(r).map(|op| Some((op, sent_at)))
}

/// How `r` is asked about: through the route its payment was collected through.
fn routed(r: Refund) -> Result<Routed, ApiError> {
    let paid = store::read_payment(&r.environment, &r.merchant_id, &r.payment_id)?;
    Ok(Routed {
        via: paid.as_ref().and_then(crate::routes::via),
        op: OperationRef {
            id: r.id,
            operator: paid.and_then(|p| p.operator).unwrap_or_default(),
            environment: r.environment,
            psp_reference: r.psp_reference,
            phone: None,
            amount: r.amount,
            currency: r.currency,
        },
    })
}

/// What the operator answered about a due refund, recorded (run again on a
/// storage conflict); a refund the operator does not know once nothing of
/// ours can be on its way is sent again, after the transaction. `sent_at`:
/// when the attempt asked about was sent (None: the first).
fn record_refund_answer(
    d: &store::Due,
    sent_at: Option<u64>,
    answer: Result<PspStatus, AdapterError>,
) -> Result<(), ApiError> {
    let recorded = store::again_on_conflict(|| {
        let tx = Tx::begin()?;
        let Some(mut r) = tx.refund(&d.env, &d.merchant, &d.id)? else {
            return Ok(None);
        };
        match &answer {
            // Not known before a copy sent since: that copy is asked about
            // on its own schedule.
            Ok(PspStatus::NotFound) if r.sent_at_ms != sent_at => return Ok(None),
            Ok(PspStatus::NotFound)
                if r.status == RefundStatus::Pending
                    && payments::not_found_is_final(
                        r.sent_at_ms.or(Some(r.created_at_ms)),
                        clock::now_ms(),
                    ) =>
            {
                return Ok(Some(r));
            }
            Ok(status) => apply_refund_status(&tx, &mut r, status.clone())?,
            // The operator offers no status query (Wave): stop polling; the refund stays
            // pending for a person to check with the operator.
            Err(AdapterError::NotSupported(_)) => {
                let previous = r.next_check_ms.take();
                tx.save_refund(&r, previous)?;
            }
            Err(_) => apply_refund_status(&tx, &mut r, PspStatus::Pending)?,
        }
        tx.commit()?;
        Ok(None)
    })?;
    if let Some(r) = recorded {
        return resend(d, &r);
    }
    if let Err(AdapterError::NotSupported(m)) = &answer {
        crate::mmc::platform::log::log(
            crate::mmc::platform::log::Level::Warn,
            &format!("refund {}: {m}; needs manual review", d.id),
        );
        crate::mmc::platform::log::count("refund_needs_review");
    }
    Ok(())
}

/// Sends a pending refund again, under its id and through its payment's
/// route, as a new attempt stored before it leaves: the operator did not
/// know it once nothing of ours could still be on its way. Only a copy
/// taken moves it: a copy refused or not sent changes nothing (its amount
/// stays reserved), since an earlier one may still arrive; the operator's
/// answer about the id settles it.
fn resend(d: &store::Due, r: &Refund) -> Result<(), ApiError> {
    let now = clock::now_ms();
    let attempt = store::again_on_conflict(|| {
        let tx = Tx::begin()?;
        let Some(mut attempt) = tx.refund(&d.env, &d.merchant, &d.id)? else {
            return Ok(None);
        };
        if attempt.status != RefundStatus::Pending || attempt.sent_at_ms != r.sent_at_ms {
            return Ok(None);
        }
        let p = tx
            .payment(&d.env, &d.merchant, &attempt.payment_id)?
            .ok_or_else(|| ApiError::internal("refund without payment"))?;
        let previous_check = attempt.next_check_ms;
        attempt.sent_at_ms = Some(now);
        attempt.resent += 1;
        attempt.updated_at_ms = now;
        // If the answer is never recorded (the node died), asked about then.
        attempt.next_check_ms = Some(now + payments::in_flight_ms());
        tx.save_refund(&attempt, previous_check)?;
        tx.commit()?;
        Ok(Some((p, attempt)))
    })?;
    let Some((p, attempt)) = attempt else {
        return Ok(());
    };
    crate::mmc::platform::log::log(
        crate::mmc::platform::log::Level::Warn,
        &format!(
            "refund {}: unknown to the operator once nothing of ours could be on its way; sent again under the same id",
            attempt.id
        ),
    );
    crate::mmc::platform::log::count("refund_resent");
    let answer = send(&p, &attempt);
    let refused = match &answer {
        Ok(started) => match &started.status {
            PspStatus::Failed(f) => Some(format!("{} {}", f.code, f.message)),
            _ => None,
        },
        Err(e @ AdapterError::Rejected(_)) => Some(format!("{e:?}")),
        Err(_) => None,
    };
    if let Some(why) = &refused {
        // A refusal of this copy says nothing of the copies before it.
        crate::mmc::platform::log::log(
            crate::mmc::platform::log::Level::Warn,
            &format!(
                "refund {} sent again: the copy was refused ({why}); still asked about by its id",
                attempt.id
            ),
        );
        crate::mmc::platform::log::count("refund_resend_refused");
    } else if let Err(e) = &answer {
        crate::mmc::platform::log::log(
            crate::mmc::platform::log::Level::Warn,
            &format!("refund {} sent again: {e:?}", attempt.id),
        );
    }
    store::again_on_conflict(|| {
        let tx = Tx::begin()?;
        let Some(mut r) = tx.refund(&d.env, &d.merchant, &d.id)? else {
            return Ok(());
        };
        if r.sent_at_ms != attempt.sent_at_ms {
            return Ok(()); // sent again since, by another run
        }
        // Only a copy taken moves the refund; unknown or refused, it is asked about.
        let status = match &answer {
            Ok(started) if refused.is_none() => {
                if !started.psp_reference.is_empty() {
                    r.psp_reference = Some(started.psp_reference.clone());
                }
                started.status.clone()
            }
            _ => PspStatus::Pending,
        };
        apply_refund_status(&tx, &mut r, status)?;
        tx.commit()
    })
}

/// Asks the operator again about `r` because the books found the
/// provider's statement saying otherwise (see the `recheck` export), and
/// records its answer: a failed refund takes only a success (a late
/// success), a pending one any answer but "not found" (its own checks
/// send it again when that is final). False when it is already completed.
pub fn recheck(r: Refund) -> Result<bool, ApiError> {
    if r.status == RefundStatus::Completed {
        return Ok(false);
    }
    let (env, merchant, id) = (r.environment.clone(), r.merchant_id.clone(), r.id.clone());
    let answer = router::refund_status_many(&[routed(r)?]).pop();
    let Some(Ok(status)) = answer else {
        return Ok(true);
    };
    store::again_on_conflict(|| {
        let tx = Tx::begin()?;
        let Some(mut r) = tx.refund(&env, &merchant, &id)? else {
            return Ok(false);
        };
        let applies = match &status {
            PspStatus::Completed(_) => r.status != RefundStatus::Completed,
            PspStatus::NotFound => false,
            _ => r.status == RefundStatus::Pending,
        };
        if applies {
            apply_refund_status(&tx, &mut r, status.clone())?;
            tx.commit()?;
        }
        Ok(true)
    })
}
