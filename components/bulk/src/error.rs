//! Errors of the bulk API, in the current generation's shape
//! `{error:{type,code,message,param,doc_url}}`. Batch validation adds
//! `errors`: one entry per bad item or CSV line, so a client fixes every
//! problem in one round.

use serde_json::{Value, json};

use crate::mmc::api::http_types::Response;

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub code: &'static str,
    pub message: String,
    pub param: Option<String>,
    /// Every problem found, for batch validation (empty otherwise).
    pub errors: Vec<Value>,
}

impl ApiError {
    fn new(
        status: u16,
        kind: &'static str,
        code: &'static str,
        message: impl Into<String>,
        param: Option<&str>,
    ) -> ApiError {
        ApiError {
            status,
            kind,
            code,
            message: message.into(),
            param: param.map(str::to_string),
            errors: Vec::new(),
        }
    }

    /// 400 naming the offending parameter.
    pub fn invalid(code: &'static str, param: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_request_error", code, message, Some(param))
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_request_error", code, message, None)
    }

    /// 400 listing every problem of every bad item or line (`rows` of them);
    /// nothing was created.
    pub fn invalid_items(
        code: &'static str,
        param: &str,
        noun: &str,
        rows: usize,
        errors: Vec<Value>,
    ) -> ApiError {
        let (plural, verb) = if rows == 1 { ("", "is") } else { ("s", "are") };
        let mut e = ApiError::invalid(
            code,
            param,
            format!(
                "{rows} {noun}{plural} {verb} invalid; nothing was created. Every problem is listed in `errors`."
            ),
        );
        e.errors = errors;
        e
    }

    /// 413: a batch or a file beyond a configured limit.
    pub fn too_large(code: &'static str, param: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(413, "invalid_request_error", code, message, Some(param))
    }

    pub fn unsupported_media_type(message: impl Into<String>) -> ApiError {
        ApiError::new(
            415,
            "invalid_request_error",
            "unsupported_media_type",
            message,
            Some("Content-Type"),
        )
    }

    pub fn unauthenticated() -> ApiError {
        ApiError::new(
            401,
            "authentication_error",
            "missing_api_key",
            "An API key is required.",
            None,
        )
    }

    pub fn not_found(message: &str) -> ApiError {
        ApiError::new(404, "not_found_error", "resource_not_found", message, None)
    }

    pub fn batch_not_found(id: &str) -> ApiError {
        ApiError::new(
            404,
            "not_found_error",
            "bulk_payment_not_found",
            format!("No bulk payment with id '{id}'."),
            Some("id"),
        )
    }

    /// The 405 answer, with the `Allow` header RFC 9110 requires: the
    /// methods the path answers. A response, not an error, so the header
    /// does not grow every `ApiError`.
    pub fn method_not_allowed(method: &str, allow: &str, base_url: &str) -> Response {
        let mut resp = ApiError::new(
            405,
            "invalid_request_error",
            "method_not_allowed",
            format!("Method {method} is not allowed on this path; it answers {allow}."),
            None,
        )
        .into_response(base_url);
        resp.headers.push(("allow".into(), allow.into()));
        resp
    }

    pub fn idempotency(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(409, "idempotency_error", code, message, None)
    }

    pub fn state(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(409, "state_error", code, message, None)
    }

    /// 403: the rule says another key must do this.
    pub fn forbidden(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(403, "permission_error", code, message, None)
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "api_error", "internal_error", message, None)
    }

    pub fn into_response(self, base_url: &str) -> Response {
        let mut error = json!({
            "type": self.kind,
            "code": self.code,
            "message": self.message,
            "param": self.param,
            "doc_url": format!("{base_url}/docs/errors#{}", self.code),
        });
        if !self.errors.is_empty() {
            error["errors"] = Value::Array(self.errors);
        }
        let mut resp = crate::wire::json_response(self.status, &json!({ "error": error }));
        // Storage unavailable: worth retrying soon.
        if self.status == 503 {
            resp.headers.push(("retry-after".into(), "1".into()));
        }
        resp
    }
}

impl From<crate::mmc::platform::types::CapabilityError> for ApiError {
    fn from(e: crate::mmc::platform::types::CapabilityError) -> Self {
        use crate::mmc::platform::types::CapabilityError;
        crate::mmc::platform::log::log(
            crate::mmc::platform::log::Level::Error,
            &format!("storage: {e:?}"),
        );
        // Unavailable (a database restarting, a lock not free in time) is
        // the client's to retry: 503, with `Retry-After`.
        let status = if matches!(e, CapabilityError::Unavailable(_)) {
            503
        } else {
            500
        };
        ApiError {
            status,
            ..ApiError::internal(
                "Storage is temporarily unavailable. Retry with the same Idempotency-Key; no batch is created twice.",
            )
        }
    }
}
