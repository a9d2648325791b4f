//! The list's query parameters: names as given or percent-encoded, `limit`,
//! cursors and creation times.

use crate::ApiError;
use crate::mmc::api::http_types::Request;
use crate::wire;

pub(super) const DEFAULT_LIMIT: u32 = 10;
pub(super) const MAX_LIMIT: u32 = 100;

pub fn param(req: &Request, name: &str) -> Option<String> {
    // Names may come percent-encoded (`created%5Bgte%5D`).
    let encoded = name.replace('[', "%5B").replace(']', "%5D");
    wire::query_param(req, name)
        .or_else(|| wire::query_param(req, &encoded))
        .map(mmc_domain::http::decode_component)
}

pub(super) fn invalid(param: &str, message: String) -> ApiError {
    ApiError::invalid("parameter_invalid", param, message)
}

/// `limit`: 1 to 100, 10 when absent.
pub(super) fn limit(req: &Request) -> Result<u32, ApiError> {
    match param(req, "limit") {
        None => Ok(DEFAULT_LIMIT),
        Some(v) => v
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_LIMIT).contains(n))
            .ok_or_else(|| {
                invalid(
                    "limit",
                    format!("limit must be an integer from 1 to {MAX_LIMIT}."),
                )
            }),
    }
}

/// A payment or refund id given as a cursor (`starting_after`,
/// `ending_before`): a UUID.
pub fn cursor(req: &Request, name: &str) -> Result<Option<String>, ApiError> {
    match param(req, name) {
        None => Ok(None),
        Some(v) => uuid::Uuid::parse_str(&v)
            .map(|u| Some(u.hyphenated().to_string()))
            .map_err(|_| {
                invalid(
                    name,
                    format!("{name} must be a payment or refund id (a UUID)."),
                )
            }),
    }
}

/// `created[gte]` / `created[lt]`: Unix seconds.
pub fn seconds(req: &Request, name: &str) -> Result<Option<u64>, ApiError> {
    match param(req, name) {
        None => Ok(None),
        Some(v) => v
            .parse::<u64>()
            .ok()
            .filter(|s| *s <= 253_402_300_799) // 9999-12-31
            .map(Some)
            .ok_or_else(|| invalid(name, format!("{name} must be a time in Unix seconds."))),
    }
}
