//! Creating a payment: the request's validation, idempotency by key and by
//! reference, the pending record with its event, then initiation.

use mmc_domain::{Mode, Status};
use serde_json::Value;

use crate::ApiError;
use crate::events::emit;
use crate::mmc::api::http_types::{Caller, Request, Response};
use crate::mmc::platform::{clock, signing};
use crate::store::{self, Generation, IdemRecord, Payment, Tx};
use crate::wire::{self, json_response};

use super::initiate::initiate;
use super::intent::{
    FIRST_CHECK_MS, in_flight_ms, initiation_running, initiation_under_way, mark_intent,
    sender_alive,
};
use super::transitions::move_to;

/// Idempotency keys are honoured for 24 hours; references forever.
pub const IDEMPOTENCY_TTL_MS: u64 = 24 * 3600 * 1000;

/// `X-Service-Environment` is not read: under key authentication the key
/// fixes the environment and the contract has the header ignored, whatever
/// its value.
pub fn create(caller: &Caller, req: &Request) -> Result<Response, ApiError> {
    let key = match wire::header(req, "idempotency-key") {
        None => {
            return Err(ApiError::invalid(
                "idempotency_key_missing",
                "Idempotency-Key",
                "The Idempotency-Key header is required (a UUID).",
            ));
        }
        Some(k) => parse_idempotency_key(k)?,
    };
    let fields = wire::body_object(req)?;
    let input = wire::parse_create_object(&fields, &caller.environment)?;
    let body = Value::Object(fields); // parsed once: validated above, hashed below
    let (p, replay) = create_payment(caller, input, Some(key), &body, Generation::Current)?;
    Ok(json_response(
        if replay { 200 } else { 201 },
        &wire::PaymentView::new(&p, replay),
    ))
}

pub fn parse_idempotency_key(k: &str) -> Result<String, ApiError> {
    Ok(uuid::Uuid::parse_str(k.trim())
        .map_err(|_| {
            ApiError::invalid(
                "idempotency_key_invalid",
                "Idempotency-Key",
                "Idempotency-Key must be a UUID.",
            )
        })?
        .hyphenated()
        .to_string())
}

/// What the creating transaction found or made.
enum Created {
    Replay(Payment),
    New(Payment),
    /// Stored earlier but never sent (no adapter instance was free): the
    /// retry sends it now, its intent marked again.
    Resumed(Payment),
}

/// A replayed create whose payment was never sent (its initiation found the
/// adapter busy) is sent now, under the same id: the intent is marked again
/// in this transaction, so two retries at once send it once. Any other is
/// replayed as stored (one whose sender died mid-call is scheduled for a poll).
fn replay_or_resume(tx: &Tx, mut p: Payment, now: u64) -> Result<Created, ApiError> {
    let under_way = initiation_under_way(&p, now);
    if !(p.unsent && p.status == Status::Pending && !under_way) {
        if under_way && !sender_alive(&p) && p.next_check_ms.is_none() {
            // Its sender stopped before the operator's answer was recorded:
            // the operator is asked soon, not only at expiry.
            p.next_check_ms = Some(now + FIRST_CHECK_MS);
            tx.save_payment(&p, None)?;
        }
        return Ok(Created::Replay(p));
    }
    p.unsent = false;
    let previous_check = p.next_check_ms;
    mark_intent(&mut p, now);
    tx.save_payment(&p, previous_check)?;
    Ok(Created::Resumed(p))
}

/// The creation rules, shared by every generation: operator availability and
/// limits, idempotency by key and by reference, the pending record with its
/// event, then initiation outside any transaction. Returns the payment and
/// whether it is a replay.
pub fn create_payment(
    caller: &Caller,
    input: wire::CreatePayment,
    key: Option<String>,
    body: &Value,
    generation: Generation,
) -> Result<(Payment, bool), ApiError> {
    // Canonical body (serde_json maps are sorted): the same request hashes the same.
    let request_hash = hex::encode(signing::sha256(
        &serde_json::to_vec(body).unwrap_or_default(),
    ));
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    // The operator's availability and the route (chosen before the intent
    // is stored with it; a hosted payment's when the customer picks the
    // operator): a refusal stands unless this request is a replay, which
    // gets the payment it made whatever the routes say now.
    let id = crate::ids::new().to_string();
    let route = match input.operator {
        Some(op) if input.mode == Mode::Direct => {
            let ask = (id.as_str(), input.amount, Some(input.mode.as_str()));
            crate::routes::choose(env, op.slug, merchant, ask).map(Some)
        }
        Some(op) => {
            crate::routes::check(env, op.slug, input.amount, input.mode.as_str()).map(|()| None)
        }
        None => Ok(None),
    };

    let now = clock::now_ms();
    // The pending record, its indexes, event and idempotency key: one transaction.
    // A create's key and reference are nearly always new: the first draft
    // assumes so, and the writer checks it.
    let mut new_keys = vec![store::reference_row(env, merchant, &input.reference)];
    if let Some(key) = &key {
        new_keys.push(store::idem_row(env, merchant, key));
    }
    let step = store::transact_assuming_absent(&new_keys, |tx| {
        if let Some(earlier) = find_earlier(tx, caller, &input, key.as_deref(), &request_hash, now)?
        {
            return replay_or_resume(tx, earlier, now);
        }
        let mut p = new_payment(caller, (&id, &input), &request_hash, generation, now);
        if let Some(choice) = route.clone()? {
            choice.apply(&mut p);
        }
        // Hosted: the customer picks the operator on our checkout page; nothing to initiate yet.
        let hosted = input.mode == Mode::Hosted;
        if hosted {
            p.checkout_url = Some(format!("{}/checkout/{}", caller.base_url, p.id));
        }
        emit(tx, &p, "collect.payment.created")?;
        if hosted {
            move_to(tx, &mut p, Status::AwaitingPayment, now)?;
        } else {
            // The intent, persisted before the operator is called.
            mark_intent(&mut p, now);
        }
        tx.insert_payment(&p)?;
        if let Some(key) = &key {
            tx.put_idem(
                env,
                merchant,
                key,
                &IdemRecord {
                    request_hash: request_hash.clone(),
                    payment_id: p.id.clone(),
                    created_ms: now,
                    done: true,
                },
            )?;
        }
        Ok(Created::New(p))
    })?;
    let p = match step {
        Created::Replay(p) => return Ok((p, true)),
        Created::New(p) | Created::Resumed(p) => p,
    };
    if input.mode == Mode::Hosted {
        return Ok((p, false)); // the customer picks the operator on the checkout page
    }
    let p = initiate(caller, p)?;
    Ok((p, false))
}

/// The payment an earlier request with this Idempotency-Key, or else with
/// this reference, created; an error when that request differed or is still
/// under way. None: this request is new.
fn find_earlier(
    tx: &Tx,
    caller: &Caller,
    input: &wire::CreatePayment,
    key: Option<&str>,
    request_hash: &str,
    now: u64,
) -> Result<Option<Payment>, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    // An expired key (older than 24 h) counts as absent; the reference check below still applies.
    if let Some(rec) = match key {
        Some(key) => tx
            .idem(env, merchant, key)?
            .filter(|r| now.saturating_sub(r.created_ms) < IDEMPOTENCY_TTL_MS),
        None => None,
    } {
        if rec.request_hash != request_hash {
            return Err(ApiError::idempotency(
                "idempotency_key_reused",
                "This Idempotency-Key was used with a different request body.",
            ));
        }
        let p = tx
            .payment(env, merchant, &rec.payment_id)?
            .ok_or_else(|| ApiError::internal("idempotency record without payment"))?;
        if initiation_running(&p, now)
            || (!rec.done && now.saturating_sub(rec.created_ms) < in_flight_ms())
        {
            return Err(ApiError::idempotency(
                "idempotency_request_in_progress",
                "A request with this Idempotency-Key is still being processed; retry shortly.",
            ));
        }
        return Ok(Some(p));
    }
    let Some(id) = tx.payment_id_by_reference(env, merchant, &input.reference)? else {
        return Ok(None);
    };
    let p = tx
        .payment(env, merchant, &id)?
        .ok_or_else(|| ApiError::internal("reference without payment"))?;
    if p.request_hash != request_hash {
        return Err(ApiError::idempotency(
            "reference_already_used",
            format!(
                "reference '{}' was already used for a different payment.",
                input.reference
            ),
        ));
    }
    Ok(Some(p))
}

/// A new payment as the request describes it, pending, not yet stored.
fn new_payment(
    caller: &Caller,
    (id, input): (&str, &wire::CreatePayment),
    request_hash: &str,
    generation: Generation,
    now: u64,
) -> Payment {
    Payment {
        id: id.to_string(),
        merchant_id: caller.merchant_id.clone(),
        environment: caller.environment.clone(),
        reference: input.reference.clone(),
        status: Status::Pending,
        amount: input.amount,
        currency: input.currency.clone(),
        country: input.country.code().into(),
        mode: input.mode,
        operator: input.operator.map(|o| o.slug.to_string()),
        customer: input.customer.clone(),
        description: input.description.clone(),
        callback_url: input.callback_url.clone(),
        external_merchant_id: input.external_merchant_id.clone(),
        metadata: input.metadata.clone(),
        psp_reference: None,
        checkout_url: None,
        expires_at_ms: now + input.expires_in_seconds * 1000,
        created_at_ms: now,
        updated_at_ms: now,
        completed_at_ms: None,
        failure: None,
        otp_attempts: 0,
        refunded_amount: 0,
        request_hash: request_hash.to_string(),
        refund_reserved: 0,
        generation,
        cancel_reason: None,
        merchant_name: caller.merchant_name.clone(),
        next_check_ms: None,
        checks: 0,
        initiating_since_ms: None,
        initiating_on: None,
        sent_at_ms: None,
        unsent: false,
        late_success_from: None,
        review: None,
        route: None,
        resent: 0,
        base_url: Some(caller.base_url.clone()),
        expected_fee: None,
    }
}
