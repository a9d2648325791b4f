//! Reading a payment and the operators: the payment by id, the operator
//! catalogue, and which operator a phone number belongs to.

use mmc_domain::operators::Country;

use crate::ApiError;
use crate::mmc::adapter::router;
use crate::mmc::api::http_types::{Caller, Request, Response};
use crate::store;
use crate::wire::{self, json_response};

use super::psp::sync_with_psp;

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
