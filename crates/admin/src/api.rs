//! `/admin/v1`: deploy, roll back and list adapters; read, change and roll
//! back the routes; read a payment's adapter calls. Authenticated with the
//! admin token, never a merchant key.

use serde_json::json;

use super::{Admin, AdminError};
use mmc_http::errors::{self, ApiError};
use mmc_http::native::{NativeRequest, NativeResponse};

impl From<AdminError> for ApiError {
    fn from(e: AdminError) -> Self {
        match &e {
            AdminError::BadName => ApiError::invalid("parameter_invalid", "name", e.to_string()),
            AdminError::Refused(_) => ApiError::bad_request("component_refused", e.to_string()),
            AdminError::Routes(_) => ApiError::bad_request("routes_invalid", e.to_string()),
            AdminError::Unknown(_) => ApiError::no_such("adapter_not_found", e.to_string()),
            AdminError::NothingToRollBack(_) => {
                ApiError::state("nothing_to_roll_back", e.to_string())
            }
            AdminError::Storage(_) => ApiError::internal(e.to_string()),
        }
    }
}

fn view(l: &mmc_runtime::Loaded) -> serde_json::Value {
    json!({
        "name": l.name,
        "hash": l.hash,
        "loaded_at_ms": l.loaded_at_ms,
        "operators": l.operators.iter().map(|o| o.slug.clone()).collect::<Vec<_>>(),
    })
}

/// Checked on the headers alone, before any body is read: an anonymous
/// client cannot make the host buffer a 64 MiB upload.
pub fn authorize(admin: &Admin, authorization: Option<&str>) -> Result<(), ApiError> {
    let token = authorization
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
        .unwrap_or_default();
    if token.is_empty() || !admin.token_matches(token) {
        return Err(ApiError::new(
            401,
            "authentication_error",
            "invalid_admin_token",
            "An admin token is required (Authorization: Bearer <admin token>).",
            None,
        ));
    }
    Ok(())
}

/// A request [`authorize`] let through.
pub async fn handle(admin: &Admin, req: NativeRequest) -> Result<NativeResponse, ApiError> {
    let path = req.path.trim_end_matches('/');
    let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).skip(2).collect(); // after /admin/v1
    match (req.method.as_str(), segments.as_slice()) {
        ("GET", ["adapters"]) => Ok(NativeResponse::json(
            200,
            json!({"object": "list", "data": req.blocking(|| admin.list())?}),
        )),
        ("PUT", ["adapters", name]) => {
            if req.body.is_empty() {
                return Err(ApiError::bad_request(
                    "body_missing",
                    "The body must be the component (.wasm) bytes.",
                ));
            }
            // Compilation takes a while: off the async workers.
            let loaded = req.blocking(|| admin.deploy(name, &req.body))?;
            Ok(NativeResponse::json(200, view(&loaded)))
        }
        ("POST", ["adapters", name, "rollback"]) => {
            let loaded = req.blocking(|| admin.rollback(name))?;
            Ok(NativeResponse::json(200, view(&loaded)))
        }
        ("GET", ["routes"]) => {
            let (specs, version, health) = admin.routes();
            Ok(NativeResponse::json(
                200,
                json!({"object": "routes", "version": version, "routes": specs, "health": health}),
            ))
        }
        ("GET", ["routes", "versions"]) => Ok(NativeResponse::json(
            200,
            json!({"object": "list", "data": req.blocking(|| admin.route_versions())?}),
        )),
        ("PUT", ["routes", environment, operator]) => {
            let (spec, note) = super::routes::spec_from_json(&req.body)?;
            let specs =
                req.blocking(|| admin.set_route(environment, operator, Some(spec), note))?;
            Ok(NativeResponse::json(
                200,
                json!({"object": "routes", "routes": specs}),
            ))
        }
        ("DELETE", ["routes", environment, operator]) => {
            let specs = req.blocking(|| admin.set_route(environment, operator, None, None))?;
            Ok(NativeResponse::json(
                200,
                json!({"object": "routes", "routes": specs}),
            ))
        }
        ("POST", ["routes", "rollback"]) => {
            let specs = req.blocking(|| admin.rollback_routes())?;
            Ok(NativeResponse::json(
                200,
                json!({"object": "routes", "routes": specs}),
            ))
        }
        ("GET", ["payments", id, "route"]) => match req.blocking(|| admin.payment_route(id))? {
            Some(route) => Ok(NativeResponse::json(200, route)),
            None => Err(ApiError::no_such(
                "resource_not_found",
                format!("No payment {id}."),
            )),
        },
        ("GET", ["payments", id, "calls"]) => {
            let calls = req
                .blocking(|| admin.runtime.services.audit.calls_for(id))
                .map_err(|e| ApiError::internal(e.to_string()))?;
            Ok(NativeResponse::json(
                200,
                json!({"object": "list", "data": calls}),
            ))
        }
        (_, ["adapters", ..] | ["payments", ..] | ["routes", ..]) => {
            Err(errors::method_not_allowed(&req.method))
        }
        _ => Err(ApiError::no_such(
            "resource_not_found",
            format!("No such endpoint: {} {}", req.method, req.path),
        )),
    }
}
