//! Legacy responses: JSON bodies, and the deprecation headers every
//! response of this generation carries.

use serde_json::Value;

use crate::mmc::api::http_types::Response;
use crate::mmc::platform::config;

/// When the current generation replaced this one (RFC 9745 `Deprecation`).
const DEPRECATED_SINCE: &str = "@1780272000"; // 1 June 2026
const DEFAULT_SUNSET: &str = "Wed, 30 Jun 2027 23:59:59 GMT";

mmc_api_kit::response_from_answer!(Response);

pub fn json(status: u16, body: &Value) -> Response {
    mmc_api_kit::Answer::json(status, body).into()
}

pub fn add_deprecation_headers(resp: &mut Response, base_url: &str) {
    let sunset = config::get("sunset").unwrap_or_else(|| DEFAULT_SUNSET.into());
    resp.headers
        .push(("deprecation".into(), DEPRECATED_SINCE.into()));
    resp.headers.push(("sunset".into(), sunset));
    resp.headers.push((
        "link".into(),
        format!(
            "<{base_url}/docs/legacy#migrating-from-the-legacy-generation>; rel=\"deprecation\"; type=\"text/html\", <{base_url}/api/v1/collect/openapi.json>; rel=\"successor-version\""
        ),
    ));
}
