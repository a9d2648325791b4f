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
use crate::mmc::adapter::router::{self, RouteRefusal};
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

/// The route a new collection `id` of `amount` (in `mode`, when its mode is
/// checked) to `operator` takes: the operator's availability and its route
/// in one question to the router. An error (nothing stored, nothing sent)
/// when no route can take it now.
pub fn choose(
    env: &str,
    operator: &str,
    merchant: &str,
    (id, amount, mode): (&str, u64, Option<&str>),
) -> Result<Choice, ApiError> {
    chosen(env, operator, merchant, (id, amount, mode), Vec::new())
        .map_err(|refusal| refused(env, operator, mode, refusal))
}

/// Whether some route of `operator` takes `amount` in `mode`, for a
/// payment whose route is chosen later (a hosted one's, by its customer).
pub fn check(env: &str, operator: &str, amount: u64, mode: &str) -> Result<(), ApiError> {
    router::available(env, operator, amount, Some(mode))
        .map_err(|refusal| refused(env, operator, Some(mode), refusal))
}

/// What a client is told when no route takes its payment.
fn refused(env: &str, operator: &str, mode: Option<&str>, refusal: RouteRefusal) -> ApiError {
    match refusal {
        RouteRefusal::NotOffered => ApiError::invalid(
            "operator_unavailable",
            "operator",
            format!("{operator} is not available in the {env} environment."),
        ),
        // A provider that says it is closed rejects every request.
        RouteRefusal::Closed => ApiError::invalid(
            "operator_unavailable",
            "operator",
            format!("{operator} is closed at its provider right now; try again later."),
        ),
        RouteRefusal::AmountOutOfRange(r) => ApiError::invalid(
            "amount_out_of_range",
            "amount",
            format!(
                "{operator} accepts amounts from {} to {} {}.",
                r.min_amount, r.max_amount, r.currency
            ),
        ),
        RouteRefusal::ModeNotSupported => ApiError::invalid(
            "mode_not_supported",
            "mode",
            format!(
                "{operator} does not support mode {}.",
                mode.unwrap_or_default()
            ),
        ),
        RouteRefusal::Unroutable(explanation) => {
            crate::mmc::platform::log::log(
                crate::mmc::platform::log::Level::Warn,
                &format!("no route for {operator} in {env}: {explanation}"),
            );
            ApiError::invalid(
                "operator_unavailable",
                "operator",
                format!("No provider can take a payment to {operator} right now; try again later."),
            )
        }
    }
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
        (&p.id, p.amount, None),
        tried,
    )
    .ok()
}

fn chosen(
    env: &str,
    operator: &str,
    merchant: &str,
    (id, amount, mode): (&str, u64, Option<&str>),
    tried: Vec<TriedRoute>,
) -> Result<Choice, RouteRefusal> {
    let skip: Vec<String> = tried.iter().map(|t| t.adapter.clone()).collect();
    let choice = router::route(
        env,
        operator,
        merchant,
        id,
        "collection",
        amount,
        mode,
        &skip,
    )?;
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
