//! Errors the host answers itself, mapped to HTTP in this one place, in the
//! error shape of the generation whose path was called.

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use serde_json::json;

use crate::config::Generation;
use crate::runtime::CallError;

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
    #[error("Too many request headers or headers too large.")]
    HeadersTooLarge,
    #[error("The service failed to process the request.")]
    Component(#[from] CallError),
    #[error("The service is temporarily unavailable.")]
    Unavailable(String),
}

impl HttpError {
    pub fn status(&self) -> StatusCode {
        match self {
            HttpError::MissingKey | HttpError::InvalidKey => StatusCode::UNAUTHORIZED,
            HttpError::NoRoute { .. } => StatusCode::NOT_FOUND,
            HttpError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            HttpError::BadBody => StatusCode::BAD_REQUEST,
            HttpError::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            HttpError::Component(CallError::NotLoaded(_)) => StatusCode::SERVICE_UNAVAILABLE,
            HttpError::Component(_) => StatusCode::INTERNAL_SERVER_ERROR,
            HttpError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// (type, code) of the current generation's error body.
    fn current_kind(&self) -> (&'static str, &'static str) {
        match self {
            HttpError::MissingKey => ("authentication_error", "missing_api_key"),
            HttpError::InvalidKey => ("authentication_error", "invalid_api_key"),
            HttpError::NoRoute { .. } => ("not_found_error", "resource_not_found"),
            HttpError::PayloadTooLarge(_) => ("invalid_request_error", "payload_too_large"),
            HttpError::BadBody => ("invalid_request_error", "invalid_body"),
            HttpError::HeadersTooLarge => ("invalid_request_error", "headers_too_large"),
            HttpError::Component(_) | HttpError::Unavailable(_) => ("api_error", "internal_error"),
        }
    }

    /// Code of the legacy generation's `{error, code}` body.
    fn legacy_code(&self) -> &'static str {
        match self {
            HttpError::MissingKey | HttpError::InvalidKey => "unauthorized",
            HttpError::NoRoute { .. } => "not_found",
            HttpError::PayloadTooLarge(_) => "payload_too_large",
            HttpError::BadBody | HttpError::HeadersTooLarge => "invalid_request",
            HttpError::Component(_) | HttpError::Unavailable(_) => "collect_failed",
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
        if status == StatusCode::UNAUTHORIZED {
            resp.headers_mut()
                .insert("www-authenticate", "Bearer".parse().expect("valid header"));
        }
        resp
    }
}
