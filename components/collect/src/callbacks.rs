//! Operators' inbound notifications: `POST|PUT /api/v1/psp/{operator}/callback`.
//! The adapter checks authenticity and translates; here the updates go
//! through the same state machine as everything else, so a duplicate or late
//! callback never moves a terminal payment. Nothing here calls the operator:
//! the answer goes back at once (MTN allows 2 s, pawaPay counts only a quick
//! 200), and an unsigned callback's subject is asked about right after, by
//! reconciliation.
//!
//! A callback never chooses which operator transaction we follow. The
//! reference of a payment or refund is the one our own call was answered
//! with (or, for the operators that take our id, the one derived from it);
//! a callback naming another changes nothing and is counted, and one that
//! cannot be compared yet (no reference recorded) only brings the operator
//! query forward. A success in a callback counts, as in any answer, only
//! for the amount and currency asked (`review`).

use serde_json::json;

use crate::ApiError;
use crate::mmc::adapter::router;
use crate::mmc::adapter::types::{AdapterError, CallbackUpdate, Inbound, SubjectKind};
use crate::mmc::api::http_types::{Request, Response};
use crate::mmc::platform::{clock, log};
use crate::payments::{self, apply_psp_status};
use crate::refunds::apply_refund_status;
use crate::store::{Payment, RefundStatus, Tx};
use crate::wire::{self, json_response};

pub fn handle(req: &Request, operator: &str) -> Result<Response, ApiError> {
    if req.method != "POST" && req.method != "PUT" {
        return Err(ApiError::method_not_allowed(&req.method, "POST, PUT"));
    }
    let environment = match wire::query_param(req, "environment") {
        None | Some("live") => "live",
        Some("test") => "test",
        Some(_) => {
            return Err(ApiError::invalid(
                "parameter_invalid",
                "environment",
                "environment must be test or live.",
            ));
        }
    };
    let op = mmc_domain::operators::find(operator)
        .ok_or_else(|| ApiError::not_found(&format!("Unknown operator '{operator}'.")))?;
    let inbound = Inbound {
        operator: op.slug.into(),
        environment: environment.into(),
        method: req.method.clone(),
        headers: req.headers.clone(),
        body: req.body.clone(),
    };
    // The route named in the address we gave the operator; else the
    // operator's first route reads it (a provider with one address for all).
    let via = wire::query_param(req, "via").map(str::to_string);
    let updates = match router::parse_callback(via.as_deref(), &inbound) {
        Ok(u) => u,
        Err(e) => return not_parsed(operator, e, req),
    };
    let mut applied = 0;
    for u in &updates {
        match apply(environment, op.slug, via.as_deref(), u) {
            Ok(true) => applied += 1,
            Ok(false) => log::log(
                log::Level::Warn,
                &format!("{operator} callback not applied: {u:?}"),
            ),
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        200,
        &json!({"received": updates.len(), "applied": applied}),
    ))
}

/// The answer to a notification the adapter did not turn into updates: 401
/// when it failed its authenticity check, 503 when our side could not read
/// it now (the operator sends it again), 400 when it is unreadable.
fn not_parsed(operator: &str, e: AdapterError, req: &Request) -> Result<Response, ApiError> {
    match e {
        AdapterError::Unauthenticated(m) => {
            log::log(
                log::Level::Warn,
                &format!("{operator} callback refused: {m}"),
            );
            Ok(ApiError {
                allow: None,
                status: 401,
                kind: "authentication_error",
                code: "callback_unauthenticated",
                message: "The notification failed its authenticity check.".into(),
                param: None,
            }
            .into_response(&crate::base_url(None, req)))
        }
        AdapterError::NotSupported(m) => Err(ApiError::not_found(&m)),
        // Our side could not read it now (every instance busy, a trap, a
        // deadline, no configuration): 503, so the operator sends it again.
        // Only the adapter's own verdict on the body is the sender's fault.
        e @ (AdapterError::Busy(_)
        | AdapterError::Timeout(_)
        | AdapterError::Unavailable(_)
        | AdapterError::NotSent(_)) => {
            log::log(
                log::Level::Warn,
                &format!("{operator} callback not processed, the operator will retry: {e:?}"),
            );
            Err(ApiError::callback_not_processed())
        }
        // Unreadable, or naming an id that is not in the form we send: nothing
        // changes, and it is counted.
        e => {
            log::count("callback_invalid");
            Err(ApiError::bad_request(
                "callback_invalid",
                format!("The notification could not be read: {e:?}"),
            ))
        }
    }
}

/// Applies one update; false when its subject is unknown here.
fn apply(
    env: &str,
    operator: &str,
    via: Option<&str>,
    u: &CallbackUpdate,
) -> Result<bool, ApiError> {
    let tx = Tx::begin()?;
    let located = match (&u.id, &u.psp_reference) {
        (Some(id), _) => tx.owner(env, id)?.map(|m| (m, id.clone())),
        (None, Some(r)) => tx.by_psp_reference(env, operator, r)?,
        (None, None) => None,
    };
    let Some((merchant, id)) = located else {
        return Ok(false);
    };
    // Only the route the subject was sent through speaks for it: a callback
    // parsed by another adapter (another operator's or route's address, a
    // forged body naming our id) is ignored and counted.
    let parsed_by = ParsedBy {
        env,
        adapter: via
            .map(str::to_string)
            .or_else(|| router::served_by(env, operator)),
    };
    let applied = match u.kind {
        SubjectKind::Payment => apply_to_payment(&tx, &parsed_by, (&merchant, &id), u)?,
        SubjectKind::Refund => apply_to_refund(&tx, &parsed_by, (&merchant, &id), u)?,
        // Payouts belong to the bulk component, which polls their status.
        SubjectKind::Payout => false,
    };
    if !applied {
        return Ok(false);
    }
    tx.commit()?;
    Ok(true)
}

/// The adapter that parsed a callback (the route in its address, else the
/// operator's first route).
struct ParsedBy<'a> {
    env: &'a str,
    adapter: Option<String>,
}

impl ParsedBy<'_> {
    /// Whether `subject` was sent through the route that parsed the callback.
    fn speaks_for(&self, subject: Option<&Payment>) -> bool {
        let Some(p) = subject else { return false };
        let route = crate::routes::via(p).or_else(|| {
            p.operator
                .as_deref()
                .and_then(|o| router::served_by(self.env, o))
        });
        self.adapter.is_some() && self.adapter == route
    }
}

/// A payment's update, written in `tx`; false when it is not applied.
fn apply_to_payment(
    tx: &Tx,
    parsed_by: &ParsedBy<'_>,
    (merchant, id): (&str, &str),
    u: &CallbackUpdate,
) -> Result<bool, ApiError> {
    let Some(mut p) = tx.payment(parsed_by.env, merchant, id)? else {
        return Ok(false);
    };
    // Nothing was ever sent for it (a hosted payment the customer has not
    // paid yet): no operator can have news of it, and a forged reference
    // would stop the customer from paying.
    if p.sent_at().is_none() {
        log::count("callback_for_unsent_payment");
        return Ok(false);
    }
    if !parsed_by.speaks_for(Some(&p)) {
        log::count("callback_from_foreign_adapter");
        return Ok(false);
    }
    let previous_check = p.next_check_ms;
    match follows(u, p.psp_reference.as_deref()) {
        Some(Follows::Ours) => apply_psp_status(tx, &mut p, u.status.clone())?,
        // Not comparable yet: a hint, answered by asking the operator (below).
        Some(Follows::Unverified) => log::count("callback_reference_unverified"),
        None => {
            log::log(
                log::Level::Warn,
                &format!(
                    "payment {}: callback names another operator transaction ({:?}), ignored",
                    p.id, u.psp_reference
                ),
            );
            log::count("callback_reference_mismatch");
            return Ok(false);
        }
    }
    // A callback is news: the operator is asked at the next reconciliation
    // round (within a second), after this answer, not before it.
    if payments::worth_asking(&p) {
        p.next_check_ms = Some(clock::now_ms());
    }
    tx.save_payment(&p, previous_check)?;
    Ok(true)
}

/// A refund's update, written in `tx`; false when it is not applied.
fn apply_to_refund(
    tx: &Tx,
    parsed_by: &ParsedBy<'_>,
    (merchant, id): (&str, &str),
    u: &CallbackUpdate,
) -> Result<bool, ApiError> {
    let env = parsed_by.env;
    let Some(mut r) = tx.refund(env, merchant, id)? else {
        return Ok(false);
    };
    let paid_with = tx.payment(env, merchant, &r.payment_id)?;
    if !parsed_by.speaks_for(paid_with.as_ref()) {
        log::count("callback_from_foreign_adapter");
        return Ok(false);
    }
    match follows(u, r.psp_reference.as_deref()) {
        Some(Follows::Ours) => apply_refund_status(tx, &mut r, u.status.clone())?,
        Some(Follows::Unverified) => log::count("callback_reference_unverified"),
        None => {
            log::count("callback_reference_mismatch");
            return Ok(false);
        }
    }
    // Asked right after (a failed refund too: the operator may have made it after all).
    if r.status != RefundStatus::Completed {
        let previous = r.next_check_ms.replace(clock::now_ms());
        tx.save_refund(&r, previous)?;
    }
    Ok(true)
}

enum Follows {
    /// The callback names the operator transaction we follow.
    Ours,
    /// We have no reference to compare yet, or the callback gives none.
    Unverified,
}

/// Whether `u` speaks of the operator transaction recorded as `ours`,
/// compared exactly; `None` when it names another one.
fn follows(u: &CallbackUpdate, ours: Option<&str>) -> Option<Follows> {
    match (u.psp_reference.as_deref(), ours) {
        (Some(theirs), Some(ours)) if theirs == ours => Some(Follows::Ours),
        (Some(_), Some(_)) => None,
        _ => Some(Follows::Unverified),
    }
}
