//! The rules of the current generation: create (validation, idempotency,
//! initiation through the router), read (with optional PSP sync), and the
//! status moves of DESIGN §2, each written with its event in one transaction.
//! Operator calls never run inside a transaction.

use mmc_domain::operators::Country;
use mmc_domain::outcome::{self, CallFailure};
use mmc_domain::settlement::Mismatch;
use mmc_domain::{Mode, Status};
use serde_json::Value;

use crate::ApiError;
use crate::events::emit;
use crate::mmc::adapter::router::{self, Routed};
use crate::mmc::adapter::types::{
    AdapterError, InitiateRequest, Initiated, OperationRef, OtpOutcome, PspStatus,
};
use crate::mmc::api::http_types::{Caller, Request, Response};
use crate::mmc::platform::{clock, config, log, node, signing};
use crate::review;
use crate::store::{self, Failure, Generation, IdemRecord, Payment, Route, Tx};
use crate::wire::{self, json_response};

/// Idempotency keys are honoured for 24 hours; references forever.
pub const IDEMPOTENCY_TTL_MS: u64 = 24 * 3600 * 1000;
/// First PSP poll of a payment in progress, then doubling up to the cap.
pub const FIRST_CHECK_MS: u64 = 2_000;
const MAX_OTP_ATTEMPTS: u32 = 3;
pub const MAX_CHECK_INTERVAL_MS: u64 = 60_000;

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

/// The intent of a request to pay, persisted before it is sent: marked as
/// under way on this node, and its first poll scheduled with it. If the
/// answer is never recorded (the node died meanwhile), reconciliation asks
/// the operator about it by our id within seconds, not only at expiry. The
/// answer keeps that poll rather than moving it, so this costs no index row.
pub fn mark_intent(p: &mut Payment, now: u64) {
    p.start_initiating(now, crate::mmc::platform::node::id());
    p.sent_at_ms = Some(now);
    p.next_check_ms.get_or_insert(now + FIRST_CHECK_MS);
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
    let request_hash = hex(&signing::sha256(
        &serde_json::to_vec(body).unwrap_or_default(),
    ));
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    // The operator's availability and the route (chosen before the intent
    // is stored with it; a hosted payment's when the customer picks the
    // operator): a refusal stands unless this request is a replay, which
    // gets the payment it made whatever the routes say now.
    let id = crate::ids::new().to_string();
    let route = check_operator(env, &input).and_then(|()| match input.operator {
        Some(op) if input.mode == Mode::Direct => {
            crate::routes::choose(env, op.slug, merchant, (&id, input.amount)).map(Some)
        }
        _ => Ok(None),
    });

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
        p.route = route.clone()?;
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

/// The operator asked for must be reachable in this environment, open, and
/// take this amount in this mode: refused here, nothing stored or sent.
fn check_operator(env: &str, input: &wire::CreatePayment) -> Result<(), ApiError> {
    let Some(op) = input.operator else {
        return Ok(());
    };
    let info = router::operator(env, op.slug).ok_or_else(|| {
        ApiError::invalid(
            "operator_unavailable",
            "operator",
            format!("{} is not available in the {env} environment.", op.slug),
        )
    })?;
    // A provider that says it is closed rejects every request.
    if info.status == "closed" {
        return Err(ApiError::invalid(
            "operator_unavailable",
            "operator",
            format!(
                "{} is closed at its provider right now; try again later.",
                op.slug
            ),
        ));
    }
    if input.amount > info.max_amount || input.amount < info.min_amount {
        return Err(ApiError::invalid(
            "amount_out_of_range",
            "amount",
            format!(
                "{} accepts amounts from {} to {} {}.",
                op.slug, info.min_amount, info.max_amount, info.currency
            ),
        ));
    }
    if !info.modes.iter().any(|m| m == input.mode.as_str()) {
        return Err(ApiError::invalid(
            "mode_not_supported",
            "mode",
            format!("{} does not support mode {}.", op.slug, input.mode.as_str()),
        ));
    }
    Ok(())
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
    }
}

/// How long a request to the operator counts as possibly in flight (see
/// `mmc_domain::outcome::in_flight_ms`: the adapter deadline plus
/// `operator_answer_window_ms`). Until then "not found" proves nothing.
pub fn in_flight_ms() -> u64 {
    outcome::in_flight_ms(config::get)
}

/// The operator is being asked to start `p` right now. A request that died
/// mid-way stops counting as running once it cannot be in flight any more
/// (reconciliation then asks the operator about it).
pub fn initiation_under_way(p: &Payment, now: u64) -> bool {
    p.initiating_since_ms
        .is_some_and(|since| now.saturating_sub(since) < in_flight_ms())
}

/// The request that sends `p` is still being run by us: under way, on a node
/// that has not stopped. A retry of the create waits for it (409). Once that
/// node is gone (a crash), nothing of ours runs it any more: the retry gets
/// the payment as stored, never sent again, and reconciliation asks the
/// operator about it by our id. Cancel and expiry still wait out the whole
/// in-flight window (`initiation_under_way`), since the request may still be
/// on its way to the operator whether we run or not.
pub fn initiation_running(p: &Payment, now: u64) -> bool {
    initiation_under_way(p, now) && sender_alive(p)
}

/// The node that put `p`'s request on its way has not stopped (a record
/// from before `initiating_on` is assumed to have a live sender).
fn sender_alive(p: &Payment) -> bool {
    p.initiating_on.as_deref().is_none_or(node::alive)
}

/// What an adapter error means for the money (see `mmc_domain::outcome`).
pub fn failure_kind(e: &AdapterError) -> CallFailure {
    mmc_domain::call_failure!(AdapterError, e)
}

/// Whether the operator's "not found" about an operation sent at `sent_at`
/// is final: nothing can be in flight any more.
pub fn not_found_is_final(sent_at: Option<u64>, now: u64) -> bool {
    sent_at.is_none_or(|at| outcome::not_found_is_final(at, now, in_flight_ms()))
}

/// Asks the operator to start collecting `p` (as just stored; no transaction
/// held), through its route or, when that route answers that nothing was
/// done, the next one (see `routes`); then applies the outcome (which ends
/// `initiating_since_ms`). Returns the payment as stored afterwards.
pub fn initiate(caller: &Caller, mut p: Payment) -> Result<Payment, ApiError> {
    let outcome = loop {
        let outcome = router::initiate(
            crate::routes::via(&p).as_deref(),
            &initiate_request(caller, &p),
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
        let mut p = tx
            .payment(&p.environment, &p.merchant_id, &p.id)?
            .ok_or_else(|| ApiError::internal("payment vanished"))?;
        let (previous_check, previous_ref) = (p.next_check_ms, p.psp_reference.clone());
        apply_initiated(tx, &mut p, outcome.clone())?;
        if p.psp_reference != previous_ref {
            tx.index_psp_reference(&p)?;
        }
        p.end_initiating();
        tx.save_payment(&p, previous_check)?;
        Ok(p)
    })?;
    if busy && p.sent_at().is_none() {
        return Err(ApiError::busy());
    }
    Ok(p)
}

fn initiate_request(caller: &Caller, p: &Payment) -> InitiateRequest {
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
            "{}/api/v1/psp/{operator}/callback?environment={}{via}",
            caller.base_url, p.environment
        ),
        return_url: Some(format!("{}/checkout/{}", caller.base_url, p.id)),
    }
}

/// `p`'s next route, stored before it is called (the intent stays): None
/// when the payment moved meanwhile (a cancel), and the refusal then stands.
fn switch_route(p: &Payment, route: Route) -> Result<Option<Payment>, ApiError> {
    store::transact(|tx| {
        tx.assume_payment(p);
        let Some(mut current) = tx.payment(&p.environment, &p.merchant_id, &p.id)? else {
            return Ok(None);
        };
        let same = current.status == p.status
            && current.initiating_since_ms.is_some()
            && current.route.as_ref().map(|r| &r.adapter) == p.route.as_ref().map(|r| &r.adapter);
        if !same {
            return Ok(None);
        }
        log::count("initiate_failover");
        current.route = Some(route.clone());
        // A new request goes on its way now: the in-flight window restarts.
        current.start_initiating(clock::now_ms(), node::id());
        tx.save_payment(&current, current.next_check_ms)?;
        Ok(Some(current))
    })
}

fn apply_initiated(
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

pub fn adapter_failure(e: &AdapterError) -> (&'static str, String) {
    match e {
        AdapterError::NotSupported(m) => ("operator_unavailable", m.clone()),
        AdapterError::Timeout(m) => ("operator_timeout", m.clone()),
        AdapterError::Busy(m) => ("operator_busy", m.clone()),
        AdapterError::NotSent(m)
        | AdapterError::Unavailable(m)
        | AdapterError::InvalidResponse(m)
        | AdapterError::Rejected(m)
        | AdapterError::Unauthenticated(m) => ("operator_error", m.clone()),
    }
}

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
        PspStatus::NotFound if p.status.is_terminal() => Ok(()),
        // The request never reached the operator (its window has passed): nothing was performed.
        PspStatus::NotFound if not_found_is_final(p.sent_at(), now) => {
            if p.mode == Mode::Hosted && p.status == Status::AwaitingPayment {
                // No push is live: the customer may choose again on the checkout page.
                p.operator = None;
                p.sent_at_ms = None;
                p.next_check_ms = None;
                return Ok(());
            }
            p.failure = Some(Failure {
                code: "operator_not_reached".into(),
                message: "The operator has no record of this payment: it was never started.".into(),
            });
            move_to(tx, p, Status::Failed, now)
        }
        // Not recorded at the operator yet: the request may still be in flight.
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
/// request ever reached an operator). Withdrawn, failed, or never received
/// (for good) → `expired`; pending → `expired` only once the operator's
/// approval window has closed too; no answer (unknown) → still in progress,
/// asked again later. A success is applied by the caller before this.
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
            Some(Ok(PspStatus::NotFound)) => not_found_is_final(p.sent_at(), now),
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

pub fn operation_ref(p: &Payment) -> OperationRef {
    OperationRef {
        id: p.id.clone(),
        operator: p.operator.clone().unwrap_or_default(),
        environment: p.environment.clone(),
        psp_reference: p.psp_reference.clone(),
        phone: p.customer.as_ref().and_then(|c| c.phone.clone()),
        amount: p.amount,
        currency: p.currency.clone(),
    }
}

/// What the PSP said of a payment, or why it could not say.
pub type PspAnswer = Result<PspStatus, AdapterError>;

/// Whether the PSP has something to say about `p`: not before a request
/// may have reached it, nor once the money is known to be taken. A failed,
/// cancelled or expired payment still is (a late success), but it is asked
/// only when something prompts it (a callback), never polled on a schedule.
pub fn worth_asking(p: &Payment) -> bool {
    p.operator.is_some()
        && p.sent_at().is_some()
        && !matches!(p.status, Status::Completed | Status::Refunded)
}

fn log_failed_query(p: &Payment, answer: &PspAnswer) {
    if let Err(e) = answer {
        log::log(
            log::Level::Warn,
            &format!("payment {}: status query failed: {e:?}", p.id),
        );
    }
}

/// Asks the PSP where `p` stands (never inside a transaction). `None`: there
/// is nothing to ask.
pub fn ask_psp(p: &Payment) -> Option<PspAnswer> {
    ask_psp_many(&[p]).pop().flatten()
}

/// [`ask_psp`] for each of `payments`, the operators asked concurrently by
/// the host. Answers in the same order.
pub fn ask_psp_many(payments: &[&Payment]) -> Vec<Option<PspAnswer>> {
    let asked: Vec<Routed> = payments
        .iter()
        .filter(|p| worth_asking(p))
        .map(|p| Routed {
            via: crate::routes::via(p),
            op: operation_ref(p),
        })
        .collect();
    let mut answers = router::status_many(&asked).into_iter();
    payments
        .iter()
        .map(|p| {
            if !worth_asking(p) {
                return None;
            }
            let answer = answers.next().unwrap_or_else(|| {
                Err(AdapterError::Unavailable("the host gave no answer".into()))
            });
            log_failed_query(p, &answer);
            Some(answer)
        })
        .collect()
}

/// Asks the PSP (outside a transaction) and applies the answer (inside one).
/// Returns the payment as stored afterwards.
pub fn sync_with_psp(p: Payment) -> Result<Payment, ApiError> {
    if p.status.is_terminal() {
        return Ok(p); // a read asks only about payments in progress
    }
    let Some(answer) = ask_psp(&p) else {
        return Ok(p);
    };
    store::transact(|tx| {
        tx.assume_payment(&p);
        let mut current = tx
            .payment(&p.environment, &p.merchant_id, &p.id)?
            .ok_or_else(|| ApiError::internal("payment vanished"))?;
        let Ok(status) = &answer else {
            return Ok(current);
        };
        let previous_check = current.next_check_ms;
        apply_psp_status(tx, &mut current, status.clone())?;
        tx.save_payment(&current, previous_check)?;
        Ok(current)
    })
}

pub fn get(caller: &Caller, req: &Request, id: &str) -> Result<Response, ApiError> {
    let sync = wire::parse_bool_param(req, "sync")?;
    let p = store::read_payment(&caller.environment, &caller.merchant_id, id)?
        .ok_or_else(|| ApiError::payment_not_found(id))?;
    let p = if sync { sync_with_psp(p)? } else { p };
    Ok(json_response(200, &wire::PaymentView::new(&p, false)))
}

pub fn catalogue(caller: &Caller, req: &Request) -> Result<Response, ApiError> {
    let country = match wire::query_param(req, "country") {
        None => None,
        Some(c) => Some(Country::parse(c).ok_or_else(|| {
            ApiError::invalid(
                "country_not_supported",
                "country",
                "country must be one of BJ, TG, CI.",
            )
        })?),
    };
    let ops = router::catalogue(&caller.environment);
    Ok(json_response(200, &wire::catalogue_json(&ops, country)))
}

/// The operator `e164` belongs to and who says so: a provider that predicts
/// (pawaPay knows ported numbers) where one serves the country in
/// `environment`, else the numbering plan. Wave runs on every network, so
/// the plan never names it.
pub fn operator_of(
    environment: &str,
    e164: &str,
) -> (Option<&'static mmc_domain::Operator>, &'static str) {
    match router::predict(environment, e164).and_then(|s| mmc_domain::operators::find(&s)) {
        Some(op) => (Some(op), "provider"),
        None => (mmc_domain::phone::infer_operator(e164), "numbering_plan"),
    }
}

/// `GET …/payments/operators/predict?phone=…[&country=…]`: the operator a
/// number belongs to ([`operator_of`]), and whether it is available in the
/// caller's environment.
pub fn predict(caller: &Caller, req: &Request) -> Result<Response, ApiError> {
    let raw = wire::query_param(req, "phone")
        .map(mmc_domain::http::decode_component)
        .filter(|p| !p.trim().is_empty())
        .ok_or_else(|| ApiError::invalid("parameter_missing", "phone", "phone is required."))?;
    let given = match wire::query_param(req, "country") {
        Some(c) => Some(Country::parse(c).ok_or_else(|| {
            ApiError::invalid(
                "country_not_supported",
                "country",
                "country must be one of BJ, TG, CI.",
            )
        })?),
        None => None,
    };
    // An international number says its country; `country` is for a local one.
    let international = raw.trim().starts_with('+') || raw.trim().starts_with("00");
    let country = international
        .then(|| mmc_domain::phone::country_of(&raw))
        .flatten()
        .or(given)
        .ok_or_else(|| {
            ApiError::invalid(
                "phone_invalid",
                "phone",
                "Give the number in international form (+229…, +228…, +225…) or the country.",
            )
        })?;
    let e164 = mmc_domain::phone::normalize(country, &raw).map_err(|e| {
        ApiError::invalid(
            "phone_invalid",
            "phone",
            format!(
                "phone is not a valid {} mobile number: {e}.",
                country.code()
            ),
        )
    })?;
    let (predicted, source) = operator_of(&caller.environment, &e164);
    let available = predicted.is_some_and(|op| {
        router::catalogue(&caller.environment)
            .iter()
            .any(|o| o.slug == op.slug && o.status == "operational")
    });
    Ok(json_response(
        200,
        &serde_json::json!({
            "object": "operator_prediction",
            "phone": e164,
            "country": country.code(),
            "operator": predicted.map(|o| o.slug),
            "name": predicted.map(|o| o.name),
            "available": available,
            "source": source,
        }),
    ))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// OTP confirmation (the OTP operator). Wrong code: 400 `invalid_otp`, status
/// unchanged; the third wrong code fails the payment.
pub fn confirm(caller: &Caller, id: &str, otp: &str) -> Result<Payment, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let p = start_confirmation(env, merchant, id, otp)?;
    let answer = router::confirm_otp(crate::routes::via(&p).as_deref(), &operation_ref(&p), otp);
    let tx = Tx::begin()?;
    let mut p = tx
        .payment(env, merchant, &p.id)?
        .ok_or_else(|| ApiError::internal("payment vanished"))?;
    let previous_check = p.next_check_ms;
    p.end_initiating();
    // A storage error aborts (nothing written); any decided answer is saved.
    let recorded = record_otp_answer(&tx, &mut p, answer, clock::now_ms())?;
    tx.save_payment(&p, previous_check)?;
    tx.commit()?;
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
    let tx = Tx::begin()?;
    let mut p = tx
        .payment(env, merchant, &p.id)?
        .ok_or_else(|| ApiError::internal("payment vanished"))?;
    let previous_check = p.next_check_ms;
    let now = clock::now_ms();
    let refuse = |why: &str| Err(ApiError::state("payment_not_cancellable", why.to_string()));
    match cancel_verdict(&p, answer, now) {
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
    p.cancel_reason = reason;
    move_to(&tx, &mut p, Status::Cancelled, now)?;
    tx.save_payment(&p, previous_check)?;
    tx.commit()?;
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
        Some(Ok(PspStatus::NotFound)) if not_found_is_final(p.sent_at(), now) => Verdict::Withdrawn,
        // An OTP payment moves money only with a code we send, and none is on its way.
        Some(Ok(PspStatus::NotFound)) if p.status == Status::AwaitingOtp => Verdict::Withdrawn,
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
