//! Requests and responses: headers, query parameters, the API version,
//! JSON bodies (unknown fields refused) and JSON responses.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::mmc::api::http_types::{Request, Response};
use crate::{API_VERSION, ApiError};

pub fn json_response(status: u16, body: &impl Serialize) -> Response {
    mmc_api_kit::Answer::json(status, body).into()
}

pub fn header<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    mmc_domain::http::header(&req.headers, name)
}

pub fn query_param<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    mmc_domain::http::query_param(&req.query, name)
}

/// `Api-Version`: absent or `2026-06`.
pub fn check_api_version(req: &Request) -> Result<(), ApiError> {
    match header(req, "api-version") {
        None => Ok(()),
        Some(v) if v.trim() == API_VERSION => Ok(()),
        Some(v) => Err(ApiError::invalid(
            "api_version_unsupported",
            "Api-Version",
            format!("Api-Version '{v}' is not supported; the supported version is {API_VERSION}."),
        )),
    }
}

/// `sync` accepts true/false and 1/0.
pub fn parse_bool_param(req: &Request, name: &str) -> Result<bool, ApiError> {
    match query_param(req, name) {
        None => Ok(false),
        Some("true") | Some("1") => Ok(true),
        Some("false") | Some("0") => Ok(false),
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid_boolean",
            name,
            format!("{name} must be true, false, 1 or 0."),
        )),
    }
}

pub fn body_object(req: &Request) -> Result<Map<String, Value>, ApiError> {
    mmc_domain::http::json_object(&req.body).map_err(body_error)
}

/// The shared body error, in this generation's codes.
fn body_error(e: mmc_domain::http::BodyError) -> ApiError {
    use mmc_domain::http::BodyError;
    match e {
        BodyError::Missing => {
            ApiError::bad_request("body_missing", "A JSON object body is required.")
        }
        BodyError::NotObject => {
            ApiError::bad_request("invalid_json", "The body must be a JSON object.")
        }
        BodyError::Invalid(e) => {
            ApiError::bad_request("invalid_json", format!("The body is not valid JSON: {e}."))
        }
    }
}

/// For endpoints whose body is optional: no body is an empty object. A JSON
/// `null` is not an object and is refused as any other non-object is: the
/// document says the body is an object, and a client sending `null` has a bug.
pub fn optional_body_object(req: &Request) -> Result<Map<String, Value>, ApiError> {
    if req.body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    body_object(req)
}

pub fn reject_unknown(m: &Map<String, Value>, known: &[&str]) -> Result<(), ApiError> {
    match m.keys().find(|k| !known.contains(&k.as_str())) {
        Some(unknown) => Err(ApiError::invalid(
            "parameter_unknown",
            unknown,
            format!("Unknown parameter '{unknown}'."),
        )),
        None => Ok(()),
    }
}
