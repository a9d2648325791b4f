//! The provider route of a payment. The host's router chooses it before the
//! intent is stored; it is stored with the intent, and every later call about
//! the payment (status, OTP, cancel, its callbacks and refunds) names it, so
//! a change of the routes never moves a payment already sent.
//!
//! A request to pay moves to the next route only when its route answered
//! that nothing was done (refused, not sent, not supported); an unknown
//! outcome keeps it where it is until the operator answers.

use mmc_domain::outcome::Certainty;
use mmc_domain::record::{Route, TriedRoute};
use serde_json::{Value, json};

use crate::ApiError;
use crate::mmc::adapter::router;
use crate::mmc::adapter::types::AdapterError;
use crate::mmc::api::http_types::{Caller, Response};
use crate::payments::failures::{adapter_failure, failure_kind};
use crate::store::{self, Payment};
use crate::wire::json_response;

/// A route chosen for a payment, with the fee its provider's rate card says.
#[derive(Debug, Clone)]
pub struct Choice {
    pub route: Route,
    pub expected_fee: Option<u64>,
}

impl Choice {
    /// `p` goes through this route from now on.
    pub fn apply(self, p: &mut Payment) {
        p.route = Some(self.route);
        p.expected_fee = self.expected_fee;
    }
}

/// The adapter `p` was sent through (None: the operator's first route, for
/// records from before routes were recorded).
pub fn via(p: &Payment) -> Option<String> {
    p.route.as_ref().map(|r| r.adapter.clone())
}

/// The route a new collection `id` of `amount` to `operator` takes; an
/// error (nothing stored, nothing sent) when no route can take it now.
pub fn choose(
    env: &str,
    operator: &str,
    merchant: &str,
    (id, amount): (&str, u64),
) -> Result<Choice, ApiError> {
    chosen(env, operator, merchant, (id, amount), Vec::new()).map_err(|explanation| {
        crate::mmc::platform::log::log(
            crate::mmc::platform::log::Level::Warn,
            &format!("no route for {operator} in {env}: {explanation}"),
        );
        ApiError::invalid(
            "operator_unavailable",
            "operator",
            format!("No provider can take a payment to {operator} right now; try again later."),
        )
    })
}

/// The route to try after `p`'s route answered `e`: only when `e` says
/// nothing was done there, and another route can take it.
pub fn after_refusal(p: &Payment, e: &AdapterError) -> Option<Choice> {
    let route = p.route.as_ref()?;
    let kind = failure_kind(e);
    if kind.certainty() != Certainty::NotPerformed {
        return None;
    }
    let (code, message) = adapter_failure(e);
    let mut tried = route.tried.clone();
    tried.push(TriedRoute {
        adapter: route.adapter.clone(),
        code: code.into(),
        message: message.chars().take(300).collect(),
    });
    let operator = p.operator.as_deref()?;
    chosen(
        &p.environment,
        operator,
        &p.merchant_id,
        (&p.id, p.amount),
        tried,
    )
    .ok()
}

fn chosen(
    env: &str,
    operator: &str,
    merchant: &str,
    (id, amount): (&str, u64),
    tried: Vec<TriedRoute>,
) -> Result<Choice, String> {
    let skip: Vec<String> = tried.iter().map(|t| t.adapter.clone()).collect();
    let choice = router::route(env, operator, merchant, id, "collection", amount, &skip)?;
    Ok(Choice {
        route: Route {
            adapter: choice.adapter,
            explanation: choice.explanation,
            tried,
        },
        expected_fee: choice.expected_fee,
    })
}

/// `GET /api/v1/collect/payments/{id}/route`: where the payment was sent,
/// why, and what was tried before.
pub fn get_http(caller: &Caller, id: &str) -> Result<Response, ApiError> {
    let p = store::read_payment(&caller.environment, &caller.merchant_id, id)?
        .ok_or_else(|| ApiError::payment_not_found(id))?;
    let mut view = json!({"object": "payment.route", "payment_id": p.id});
    if let Value::Object(o) = &mut view {
        o.extend(Route::fields(p.route.as_ref()));
    }
    Ok(json_response(200, &view))
}
