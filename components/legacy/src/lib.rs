//! The legacy generation, deprecated: `/collect/mobile-money/` and
//! `/collect/operators/`. A facade: it translates the flat, minor-unit,
//! uppercase legacy shapes to and from the typed `payments` interface that
//! `collect` exports, so the rules (state machine, idempotency, limits) exist
//! once. Only translation and the legacy error codes live here.

wit_bindgen::generate!({
    path: ["../../wit/platform", "../../wit/adapter", "../../wit/api"],
    world: "mmc:api/facade",
    generate_all,
});

mod errors;
mod response;
mod wire;

use exports::mmc::api::handler::Guest;
use mmc::api::http_types::{Caller, Request, Response};
use mmc::api::payment_types::{CreateRequest, Customer, Generation};
use mmc::api::payments;
use mmc::platform::config;

use errors::LegacyError;

struct Legacy;

impl Guest for Legacy {
    fn handle(caller: Option<Caller>, req: Request) -> Response {
        let base = caller
            .as_ref()
            .map(|c| c.base_url.clone())
            .unwrap_or_default();
        let mut resp = match route(caller.as_ref(), &req) {
            Ok(r) => r,
            Err(e) => e.into_response(),
        };
        response::add_deprecation_headers(&mut resp, &base);
        resp
    }
}

/// The OpenAPI 3.1 document of this generation (served without a key; fuzzed by the tests).
const OPENAPI: &str = include_str!("../api/openapi.json");

fn route(caller: Option<&Caller>, req: &Request) -> Result<Response, LegacyError> {
    let path = req.path.trim_end_matches('/');
    if path == "/api/v1/collect/mobile-money/openapi.json" {
        return match req.method.as_str() {
            "GET" => Ok(Response {
                status: 200,
                headers: vec![("content-type".into(), "application/json".into())],
                body: OPENAPI.as_bytes().to_vec(),
            }),
            _ => Err(LegacyError::method_not_allowed("GET")),
        };
    }
    let caller =
        caller.ok_or_else(|| LegacyError::new(401, "unauthorized", "An API key is required."))?;
    let method = req.method.as_str();
    if path == "/api/v1/collect/operators" {
        return match method {
            "GET" => Ok(response::json(200, &wire::catalogue(&caller.environment))),
            _ => Err(LegacyError::method_not_allowed("GET")),
        };
    }
    let rest = path
        .strip_prefix("/api/v1/collect/mobile-money")
        .unwrap_or(path);
    let segments = mmc_domain::http::path_segments(rest);
    let segments: Vec<&str> = segments.iter().map(|s| s.as_ref()).collect();
    match (method, segments.as_slice()) {
        ("POST", []) => initiate(caller, req),
        ("POST", ["confirm"]) => confirm(caller, req),
        ("GET", [reference]) => read(caller, req, reference),
        (_, [] | ["confirm"]) => Err(LegacyError::method_not_allowed("POST")),
        (_, [_]) => Err(LegacyError::method_not_allowed("GET")),
        _ => Err(LegacyError::new(404, "not_found", "No such endpoint.")),
    }
}

fn initiate(caller: &Caller, req: &Request) -> Result<Response, LegacyError> {
    let key = wire::header(req, "idempotency-key").map(str::trim);
    if key.is_some_and(|k| k.is_empty() || k.len() > 255) {
        return Err(LegacyError::invalid(
            "Idempotency-Key must be 1 to 255 characters.",
        ));
    }
    let required = config::get("require_idempotency_key").is_some_and(|v| v == "true" || v == "1");
    if key.is_none() && required {
        return Err(LegacyError::new(
            400,
            "missing_idempotency_key",
            "The Idempotency-Key header is required.",
        ));
    }
    let body = wire::Initiate::parse(&req.body)?;
    let request = CreateRequest {
        reference: body.reference,
        amount: body.amount_minor / 100,
        currency: body.currency,
        country: body.country,
        mode: "direct".into(),
        operator: Some(body.operator),
        customer: Some(Customer {
            phone: Some(body.phone),
            first_name: body.first_name,
            last_name: body.last_name,
        }),
        description: body.description,
        idempotency_key: key.map(wire::key_as_uuid),
        generation: Generation::Legacy,
    };
    match payments::create(caller, &request) {
        Ok(created) => Ok(response::json(
            if created.replay { 200 } else { 201 },
            &wire::collection(&created.payment, created.replay),
        )),
        Err(f) => Err(errors::from_create(f)),
    }
}

fn confirm(caller: &Caller, req: &Request) -> Result<Response, LegacyError> {
    let (reference, otp) = wire::parse_confirm(&req.body)?;
    match payments::confirm(caller, &reference, &otp) {
        Ok(p) => Ok(response::json(200, &wire::collection(&p, false))),
        Err(f) => Err(errors::from_confirm(f)),
    }
}

fn read(caller: &Caller, req: &Request, reference: &str) -> Result<Response, LegacyError> {
    let sync = match wire::query_param(req, "sync") {
        None | Some("false" | "0" | "no") => false,
        Some("true" | "1" | "yes") => true,
        Some(_) => {
            return Err(LegacyError::invalid(
                "sync must be true, 1 or yes (or false, 0, no).",
            ));
        }
    };
    match payments::get(caller, reference, sync) {
        Ok(p) => Ok(response::json(200, &wire::collection(&p, false))),
        Err(f) => Err(errors::from_read(f)),
    }
}

export!(Legacy);
