//! The `collect` component: the current API generation. The host hands it
//! authenticated requests; it validates, keeps the payments in its own
//! storage, asks the host's router to reach the operator, and runs the
//! expiry and reconciliation jobs.
//!
//! Modules: `wire` (JSON in and out: request parsing, the Payment shape,
//! error bodies), `payments` (the rules), `store` (keys and records),
//! `jobs` (background work), `events` (the outbox's payment events: stored
//! compact, rendered when read).

wit_bindgen::generate!({
    path: ["../../wit/platform", "../../wit/adapter", "../../wit/api"],
    world: "mmc:api/collect",
    generate_all,
});

mod callbacks;
mod checkout;
mod csv_export;
mod error;
mod events;
mod ids;
mod jobs;
mod listing;
mod payments;
mod refunds;
mod review;
mod routes;
mod store;
mod typed;
mod wire;

use exports::mmc::api::events::Guest as Events;
use exports::mmc::api::handler::Guest as Handler;
use exports::mmc::api::jobs::Guest as Jobs;
use exports::mmc::api::recheck::Guest as Recheck;
use mmc::api::http_types::{Caller, Request, Response};
use mmc::platform::log;

pub use error::ApiError;

pub const API_VERSION: &str = "2026-06";

/// The OpenAPI 3.1 document of this generation; tests validate it and fuzz the
/// live server against it, so it cannot drift from what the code does.
/// `api/openapi.json`, minified by `build.rs`.
const OPENAPI: &str = include_str!(concat!(env!("OUT_DIR"), "/openapi.json"));

struct Collect;

impl Handler for Collect {
    fn handle(caller: Option<Caller>, req: Request) -> Response {
        let result = route(caller.as_ref(), &req);
        let base = base_url(caller.as_ref(), &req);
        match result {
            Ok(resp) => resp,
            Err(e) => error::respond(e, &base),
        }
    }
}

impl Jobs for Collect {
    fn run(job: String, limit: u32) -> u32 {
        match job.as_str() {
            "expire" => jobs::expire_due(limit),
            "reconcile" => jobs::reconcile_due(limit) + refunds::reconcile_due(limit),
            "index" => jobs::build_listing_index(limit) + store::build_search_index(limit),
            _ => 0,
        }
    }
}

impl Recheck for Collect {
    fn recheck(
        environment: String,
        merchant_id: String,
        id: String,
        _within: Option<String>,
    ) -> bool {
        let (env, merchant) = (environment.as_str(), merchant_id.as_str());
        let asked = match store::read_stored_payment(env, merchant, &id) {
            Ok(Some((p, stored))) => payments::recheck(p, stored),
            Ok(None) => match store::read_refund(env, merchant, &id) {
                Ok(Some(r)) => refunds::recheck(r),
                Ok(None) => Ok(false),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        asked.unwrap_or_else(|e| {
            log::log(
                log::Level::Error,
                &format!("recheck of {id} failed: {}", e.message),
            );
            false
        })
    }
}

impl Events for Collect {
    fn render(payloads: Vec<Vec<u8>>) -> Vec<Option<Vec<u8>>> {
        events::render_all(payloads)
    }
}

/// The caller's base URL, or (public paths, no key) one built from the Host header.
pub fn base_url(caller: Option<&Caller>, req: &Request) -> String {
    match caller {
        Some(c) => c.base_url.clone(),
        None => format!(
            "http://{}",
            wire::header(req, "host").unwrap_or("localhost")
        ),
    }
}

fn route(caller: Option<&Caller>, req: &Request) -> Result<Response, ApiError> {
    let path = req.path.trim_end_matches('/');
    // The hosted checkout page: public, the payment id is the capability.
    if path == "/checkout" || path.starts_with("/checkout/") {
        return checkout::handle(req);
    }
    // Operators' notifications: public, authenticated by the adapter.
    if let Some(rest) = path.strip_prefix("/api/v1/psp/") {
        return match rest.split('/').collect::<Vec<_>>().as_slice() {
            [operator, "callback"] => callbacks::handle(req, operator),
            _ => Err(ApiError::not_found(&format!(
                "No such endpoint: {} {}",
                req.method, req.path
            ))),
        };
    }
    let rest = path.strip_prefix("/api/v1/collect").unwrap_or(path);
    let segments = mmc_domain::http::path_segments(rest);
    let segments: Vec<&str> = segments.iter().map(|s| s.as_ref()).collect();
    let method = req.method.as_str();
    if segments == ["openapi.json"] {
        return match method {
            "GET" => Ok(Response {
                status: 200,
                headers: vec![("content-type".into(), "application/json".into())],
                body: OPENAPI.as_bytes().to_vec(),
            }),
            _ => Err(ApiError::method_not_allowed(method, "GET")),
        };
    }
    if matches!(
        segments.as_slice(),
        ["payments", "operators"] | ["payments", "operators", "predict"]
    ) && method != "GET"
    {
        return Err(ApiError::method_not_allowed(method, "GET"));
    }
    let caller = caller.ok_or_else(ApiError::unauthenticated)?;
    wire::check_api_version(req)?;
    match (method, segments.as_slice()) {
        ("POST", ["payments"]) => payments::create(caller, req),
        ("GET", ["payments"]) => listing::list_payments(caller, req),
        ("GET", ["payments", id, "refunds"]) => listing::payment_refunds(caller, req, id),
        ("GET", ["refunds", id]) => listing::get_refund(caller, id),
        ("GET", ["payments", "operators"]) => payments::catalogue(caller, req),
        ("GET", ["payments", "operators", "predict"]) => payments::predict(caller, req),
        ("GET", ["payments", "export"]) => csv_export::export_payments(caller, req),
        ("GET", ["payments", id]) => payments::get(caller, req, id),
        ("GET", ["payments", id, "route"]) => routes::get_http(caller, id),
        ("POST", ["payments", id, "confirm"]) => payments::confirm_http(caller, req, id),
        ("POST", ["payments", id, "cancel"]) => payments::cancel_http(caller, req, id),
        ("POST", ["payments", id, "refunds"]) => refunds::create_http(caller, req, id),
        (_, ["payments"]) | (_, ["payments", _, "refunds"]) => {
            Err(ApiError::method_not_allowed(method, "GET, POST"))
        }
        (_, ["payments", _, "confirm" | "cancel"]) => {
            Err(ApiError::method_not_allowed(method, "POST"))
        }
        (_, ["payments", _]) | (_, ["payments", _, "route"]) | (_, ["refunds", _]) => {
            Err(ApiError::method_not_allowed(method, "GET"))
        }
        _ => Err(ApiError::not_found(&format!(
            "No such endpoint: {method} {}",
            req.path
        ))),
    }
}

export!(Collect);
