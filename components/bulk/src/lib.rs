//! The `bulk` component: bulk payouts under `/api/v1/bulk-payments/`.
//! A merchant submits a batch of payout lines (JSON or CSV); a batch above
//! the merchant's validation threshold waits for `POST validate`; the
//! `payouts` job then pays every line through the operator adapters.
//!
//! Modules: `batches` (the HTTP endpoints and the validation workflow),
//! `items` (checking one payout line), `csv` (reading uploads; their
//! multipart forms through the API kit), `wire` (JSON in and out), `store` (keys and records),
//! `jobs` (payout execution), `events` (the batch events of the outbox),
//! `settings`, `error`.

wit_bindgen::generate!({
    path: ["../../wit/platform", "../../wit/adapter", "../../wit/api"],
    world: "mmc:api/payouts",
    generate_all,
});

mod batches;
mod csv;
mod error;
mod events;
mod items;
mod jobs;
mod settings;
mod store;
mod wire;

use exports::mmc::api::handler::Guest as Handler;
use exports::mmc::api::jobs::Guest as Jobs;
use exports::mmc::api::recheck::Guest as Recheck;
use mmc::api::http_types::{Caller, Request, Response};

pub use error::ApiError;

pub const API_VERSION: &str = "2026-06";
const ROOT: &str = "/api/v1/bulk-payments";

struct Bulk;

impl Handler for Bulk {
    fn handle(caller: Option<Caller>, req: Request) -> Response {
        let base = caller
            .as_ref()
            .map(|c| c.base_url.clone())
            .unwrap_or_default();
        match route(caller.as_ref(), &req) {
            Ok(resp) => resp,
            Err(e) => error::respond(e, &base),
        }
    }
}

impl Recheck for Bulk {
    fn recheck(
        environment: String,
        merchant_id: String,
        id: String,
        within: Option<String>,
    ) -> bool {
        let Some(batch) = within else { return false };
        jobs::recheck(&environment, &merchant_id, &batch, &id).unwrap_or_else(|e| {
            mmc::platform::log::log(
                mmc::platform::log::Level::Error,
                &format!("recheck of payout {id} failed: {}", e.message),
            );
            false
        })
    }
}

impl Jobs for Bulk {
    fn run(job: String, limit: u32) -> u32 {
        match job.as_str() {
            "payouts" => jobs::run_payouts(limit),
            _ => 0,
        }
    }
}

fn route(caller: Option<&Caller>, req: &Request) -> Result<Response, ApiError> {
    let method = req.method.as_str();
    let not_found = || ApiError::not_found(&format!("No such endpoint: {method} {}", req.path));
    let rest = req.path.strip_prefix(ROOT).ok_or_else(not_found)?;
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let caller = caller.ok_or_else(ApiError::unauthenticated)?;
    wire::check_api_version(req)?;
    let not_allowed = |allow| {
        error::respond(
            ApiError::method_not_allowed(method, allow),
            &caller.base_url,
        )
    };
    match (method, segments.as_slice()) {
        ("POST", []) => batches::create(caller, req),
        ("GET", []) => batches::list(caller, req),
        ("POST", ["import_csv"]) => batches::import_csv(caller, req),
        ("GET", [id]) if *id != "import_csv" => batches::get(caller, id),
        ("GET", [id, "items"]) => batches::items(caller, req, id),
        ("POST", [id, "validate"]) => batches::validate(caller, req, id),
        (_, []) => Ok(not_allowed("GET, HEAD, POST")),
        (_, ["import_csv"] | [_, "validate"]) => Ok(not_allowed("POST")),
        (_, [_] | [_, "items"]) => Ok(not_allowed("GET, HEAD")),
        _ => Err(not_found()),
    }
}

export!(Bulk);
