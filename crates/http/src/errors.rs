//! Errors the host answers itself, mapped to HTTP in this one place, in the
//! error shape of the generation whose path was called.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use serde_json::json;

use mmc_config::Generation;
use mmc_runtime::CallError;

/// `Retry-After` of a 503 (storage or every instance slot unavailable):
/// soon, since a restarted database or a freed slot is back within seconds.
pub const RETRY_UNAVAILABLE_SECS: u64 = 1;

#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    #[error("No API key provided. Send it as 'Authorization: Bearer <key>' or 'X-API-Key: <key>'.")]
    MissingKey,
    #[error("Invalid or revoked API key.")]
    InvalidKey,
    #[error("No such endpoint: {method} {path}")]
    NoRoute { method: String, path: String },
    #[error("Request body larger than {0} bytes.")]
    PayloadTooLarge(usize),
    #[error("The request body could not be read.")]
    BadBody,
    #[error("The request body did not arrive in time.")]
    BodyTimeout,
    #[error("Too many request headers or headers too large.")]
    HeadersTooLarge,
    #[error("The service failed to process the request.")]
    Component(#[from] CallError),
    #[error("The service is temporarily unavailable.")]
    Unavailable(String),
    #[error("Too many requests for this API key; retry after the time in Retry-After.")]
    RateLimited(std::time::Duration),
    #[error("This API key lacks the scope for this request; it needs {0}.")]
    InsufficientScope(String),
}

impl HttpError {
    pub fn status(&self) -> StatusCode {
        match self {
            HttpError::MissingKey | HttpError::InvalidKey => StatusCode::UNAUTHORIZED,
            HttpError::NoRoute { .. } => StatusCode::NOT_FOUND,
            HttpError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            HttpError::BadBody => StatusCode::BAD_REQUEST,
            HttpError::BodyTimeout => StatusCode::REQUEST_TIMEOUT,
            HttpError::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            HttpError::Component(CallError::NotLoaded(_) | CallError::Busy(_)) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            HttpError::Component(_) => StatusCode::INTERNAL_SERVER_ERROR,
            HttpError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            HttpError::RateLimited(_) => StatusCode::TOO_MANY_REQUESTS,
            HttpError::InsufficientScope(_) => StatusCode::FORBIDDEN,
        }
    }

    /// The 403 for a key without any of `needed`.
    pub fn insufficient_scope(needed: &[mmc_accounts::scopes::Scope]) -> HttpError {
        let names: Vec<&str> = needed.iter().map(|s| s.as_str()).collect();
        HttpError::InsufficientScope(names.join(" or "))
    }

    /// (type, code) of the current generation's error body.
    fn current_kind(&self) -> (&'static str, &'static str) {
        match self {
            HttpError::MissingKey => ("authentication_error", "missing_api_key"),
            HttpError::InvalidKey => ("authentication_error", "invalid_api_key"),
            HttpError::NoRoute { .. } => ("not_found_error", "resource_not_found"),
            HttpError::PayloadTooLarge(_) => ("invalid_request_error", "payload_too_large"),
            HttpError::BadBody => ("invalid_request_error", "invalid_body"),
            HttpError::BodyTimeout => ("invalid_request_error", "request_timeout"),
            HttpError::HeadersTooLarge => ("invalid_request_error", "headers_too_large"),
            HttpError::Component(_) | HttpError::Unavailable(_) => ("api_error", "internal_error"),
            HttpError::RateLimited(_) => ("rate_limit_error", "rate_limited"),
            HttpError::InsufficientScope(_) => ("permission_error", "insufficient_scope"),
        }
    }

    /// Code of the legacy generation's `{error, code}` body.
    fn legacy_code(&self) -> &'static str {
        match self {
            HttpError::MissingKey | HttpError::InvalidKey => "unauthorized",
            HttpError::NoRoute { .. } => "not_found",
            HttpError::PayloadTooLarge(_) => "payload_too_large",
            HttpError::BadBody | HttpError::HeadersTooLarge | HttpError::BodyTimeout => {
                "invalid_request"
            }
            HttpError::Component(_) | HttpError::Unavailable(_) => "collect_failed",
            HttpError::RateLimited(_) => "rate_limited",
            HttpError::InsufficientScope(_) => "forbidden",
        }
    }

    pub fn into_response(self, generation: &Generation, docs_base: &str) -> Response<Full<Bytes>> {
        let status = self.status();
        let body = match generation {
            Generation::Current => {
                let (kind, code) = self.current_kind();
                json!({"error": {
                    "type": kind,
                    "code": code,
                    "message": self.to_string(),
                    "param": null,
                    "doc_url": format!("{docs_base}#{code}"),
                }})
            }
            Generation::Legacy => json!({"error": self.to_string(), "code": self.legacy_code()}),
        };
        let mut resp = Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .expect("static response parts are valid");
        if let HttpError::RateLimited(wait) = &self {
            let secs = wait.as_secs_f64().ceil().max(1.0) as u64;
            resp.headers_mut().insert("retry-after", secs.into());
        } else if status == StatusCode::SERVICE_UNAVAILABLE {
            resp.headers_mut()
                .insert("retry-after", RETRY_UNAVAILABLE_SECS.into());
        }
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert("www-authenticate", "Bearer".parse().expect("valid header"));
        }
        resp
    }
}

/// An error of a native (host-served) endpoint, in the current generation's
/// shape: the API components' own type, so every current-generation error is
/// built and rendered in one place (`mmc-api-kit`).
pub use mmc_api_kit::ApiError;

/// 405 from a catch-all that does not know which methods the path answers
/// (so without `Allow`).
pub fn method_not_allowed(method: &str) -> ApiError {
    ApiError::new(
        405,
        "invalid_request_error",
        "method_not_allowed",
        format!("Method {method} is not allowed on this path."),
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_503_says_when_to_retry() {
        for e in [
            HttpError::Unavailable("storage unavailable".into()),
            HttpError::Component(CallError::Busy("collect".into())),
        ] {
            let resp = e.into_response(&Generation::Current, "/docs");
            assert_eq!(resp.status(), StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(resp.headers()["retry-after"], "1");
        }
        let resp = HttpError::BadBody.into_response(&Generation::Legacy, "/docs");
        assert!(!resp.headers().contains_key("retry-after"));
    }
}
