//! Errors of the current generation: `{error:{type,code,message,param,doc_url}}`,
//! built in this one place. `doc_url` points at the errors chapter's table.

use serde_json::json;

use crate::mmc::api::http_types::Response;

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    /// Methods for the `Allow` header of a 405.
    pub allow: Option<&'static str>,
    pub status: u16,
    pub kind: &'static str,
    pub code: &'static str,
    pub message: String,
    pub param: Option<String>,
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
            allow: None,
            status,
            kind,
            code,
            message: message.into(),
            param: param.map(str::to_string),
        }
    }

    /// 400 naming the offending parameter.
    pub fn invalid(code: &'static str, param: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_request_error", code, message, Some(param))
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid_request_error", code, message, None)
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

    pub fn refund_not_found(id: &str) -> ApiError {
        ApiError::new(
            404,
            "not_found_error",
            "refund_not_found",
            format!("No refund '{id}' for this merchant and environment."),
            None,
        )
    }

    pub fn payment_not_found(id: &str) -> ApiError {
        ApiError::new(
            404,
            "not_found_error",
            "payment_not_found",
            format!("No payment with id or reference '{id}'."),
            Some("reference_or_id"),
        )
    }

    pub fn method_not_allowed(method: &str, allow: &'static str) -> ApiError {
        let mut e = ApiError::new(
            405,
            "invalid_request_error",
            "method_not_allowed",
            format!("Method {method} is not allowed on this path; use {allow}."),
            None,
        );
        e.allow = Some(allow);
        e
    }

    pub fn idempotency(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(409, "idempotency_error", code, message, None)
    }

    pub fn state(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(409, "state_error", code, message, None)
    }

    pub fn operator(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(502, "operator_error", code, message, None)
    }

    /// 503: no adapter instance was free, nothing was sent; the same request
    /// again (same Idempotency-Key) sends it.
    pub fn busy() -> ApiError {
        ApiError::new(
            503,
            "api_error",
            "operator_busy",
            "The service is at capacity and sent nothing to the operator; retry this request (with the same Idempotency-Key) in a moment.",
            None,
        )
    }

    /// 503 to an operator's callback we could not process now: it is sent again.
    pub fn callback_not_processed() -> ApiError {
        ApiError::new(
            503,
            "api_error",
            "callback_not_processed",
            "The notification could not be processed now; send it again.",
            None,
        )
    }

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "api_error", "internal_error", message, None)
    }

    pub fn into_response(self, base_url: &str) -> Response {
        let body = json!({"error": {
            "type": self.kind,
            "code": self.code,
            "message": self.message,
            "param": self.param,
            "doc_url": format!("{base_url}/docs/errors#{}", self.code),
        }});
        let mut resp = crate::wire::json_response(self.status, &body);
        // Every 503 here (storage, a busy operator slot, a callback not
        // processed) is worth retrying soon.
        if self.status == 503 {
            resp.headers.push(("retry-after".into(), "1".into()));
        }
        if let Some(allow) = self.allow {
            resp.headers.push(("allow".into(), allow.into()));
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
                "Storage is temporarily unavailable. Retry with the same Idempotency-Key; it will not charge twice.",
            )
        }
    }
}
