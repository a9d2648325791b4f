//! Operators' inbound notifications: `POST|PUT /api/v1/psp/{operator}/callback`.
//! The adapter checks authenticity and translates; here every update is a
//! hint, whatever the adapter read in it and however it was signed: it
//! records no status, it brings the operator's status query of its subject
//! forward, and only what that query answers is recorded (by
//! reconciliation, within a second). So a signed "paid" for money the
//! operator never took changes nothing, and a "failed" for a payment the
//! operator completed ends completed. Nothing here calls the operator: the
//! answer goes back at once (MTN allows 2 s, pawaPay counts only a quick 200).
//!
//! A callback never chooses which operator transaction we follow. The
//! reference of a payment or refund is the one our own call was answered
//! with (or, for the operators that take our id, the one derived from it);
//! a callback naming another changes nothing and is counted.
//!
//! A callback that brought a query forward is remembered for
//! [`REMEMBERED_MS`] by the digest of its body: the same notification again
//! (a replay, a provider's retry) is answered 200 and counted, and changes
//! nothing.

use serde_json::json;

use crate::ApiError;
use crate::mmc::adapter::router;
use crate::mmc::adapter::types::{AdapterError, CallbackUpdate, Inbound, SubjectKind};
use crate::mmc::api::http_types::{Request, Response};
use crate::mmc::platform::{clock, log, signing, storage};
use crate::payments;
use crate::store::{self, Payment, RefundStatus, Tx};
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
    let digest = hex::encode(signing::sha256(&req.body));
    if remembered(environment, op.slug, &digest)? {
        log::count("callback_replayed");
        return Ok(json_response(
            200,
            &json!({"received": updates.len(), "applied": 0, "replayed": true}),
        ));
    }
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
    // Only a callback that brought a query forward is worth remembering: any
    // other changes nothing whenever it comes.
    if applied > 0 {
        remember(environment, op.slug, &digest)?;
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
            Ok(crate::error::respond(
                ApiError::callback_unauthenticated(),
                &crate::base_url(None, req),
            ))
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

/// Applies one update; false when its subject is unknown here. Run again
/// on a storage conflict: nothing but storage happens in it.
fn apply(
    env: &str,
    operator: &str,
    via: Option<&str>,
    u: &CallbackUpdate,
) -> Result<bool, ApiError> {
    store::again_on_conflict(|| apply_once(env, operator, via, u))
}

fn apply_once(
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
        Some(Follows::Ours) => {}
        // Not comparable yet: the operator, asked by our id, says which.
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
    // What the callback says is not recorded (`u.status`): the operator is
    // asked at the next reconciliation round (within a second), after this
    // answer, and its answer is. A failed, cancelled or expired payment too:
    // the operator may have taken the money after all (a late success).
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
        Some(Follows::Ours) => {}
        Some(Follows::Unverified) => log::count("callback_reference_unverified"),
        None => {
            log::count("callback_reference_mismatch");
            return Ok(false);
        }
    }
    // Nothing recorded from the callback: the refund is asked about right
    // after (a failed one too: the operator may have made it after all).
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

/// How long a callback is remembered: longer than any provider keeps
/// resending one. A notification older than that and sent again only brings
/// a status query forward, which records what the operator says.
pub const REMEMBERED_MS: u64 = 7 * 24 * 60 * 60 * 1000;

/// Expired memories dropped by each callback remembered: more than one, so
/// the table shrinks after a burst.
const FORGET_PER_CALLBACK: u32 = 8;

/// `callbacks` holds env/operator/digest → when it is forgotten (ms, text);
/// `callback_expiry` the same keyed by that time first, to forget in order.
fn callback_key(env: &str, operator: &str, digest: &str) -> String {
    store::scope(env, operator, digest)
}

/// Whether a callback with this body was taken for `operator` in `env`
/// within [`REMEMBERED_MS`].
fn remembered(env: &str, operator: &str, digest: &str) -> Result<bool, ApiError> {
    let Some(until) = storage::get("callbacks", &callback_key(env, operator, digest))? else {
        return Ok(false);
    };
    let until: u64 = String::from_utf8_lossy(&until).parse().unwrap_or(0);
    Ok(clock::now_ms() < until)
}

/// Remembers a callback taken now, and forgets a few whose time has passed.
fn remember(env: &str, operator: &str, digest: &str) -> Result<(), ApiError> {
    let now = clock::now_ms();
    let until = now + REMEMBERED_MS;
    let expired = store::due("callback_expiry", now, FORGET_PER_CALLBACK)?;
    store::again_on_conflict(|| {
        let tx = Tx::begin()?;
        for d in &expired {
            tx.delete("callback_expiry", &d.key)?;
            tx.delete("callbacks", &callback_key(&d.env, &d.merchant, &d.id))?;
        }
        let key = callback_key(env, operator, digest);
        // Taken again after it was forgotten: its earlier expiry entry goes.
        if let Some(before) = tx.get("callbacks", &key)? {
            let before: u64 = String::from_utf8_lossy(&before).parse().unwrap_or(0);
            tx.delete(
                "callback_expiry",
                &store::time_key(before, env, operator, digest),
            )?;
        }
        tx.put("callbacks", &key, until.to_string().as_bytes())?;
        tx.put(
            "callback_expiry",
            &store::time_key(until, env, operator, digest),
            b"",
        )?;
        tx.commit()
    })
}
