//! Legacy error bodies `{error, code}` and the mapping from the current
//! generation's codes (which the shared rules produce) to the legacy table.

use serde_json::json;

use crate::mmc::api::http_types::Response;
use crate::mmc::api::payment_types::Failure;

#[derive(Debug)]
pub struct LegacyError {
    /// Methods for the `Allow` header of a 405.
    pub allow: Option<&'static str>,
    pub status: u16,
    pub code: &'static str,
    pub message: String,
}

impl LegacyError {
    pub fn new(status: u16, code: &'static str, message: impl Into<String>) -> LegacyError {
        LegacyError {
            allow: None,
            status,
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> LegacyError {
        LegacyError::new(400, "invalid_request", message)
    }

    pub fn method_not_allowed(allow: &'static str) -> LegacyError {
        LegacyError {
            allow: Some(allow),
            ..LegacyError::new(
                405,
                "method_not_allowed",
                format!("Method not allowed on this path; use {allow}."),
            )
        }
    }

    pub fn into_response(self) -> Response {
        let mut resp = crate::response::json(
            self.status,
            &json!({"error": self.message, "code": self.code}),
        );
        if let Some(allow) = self.allow {
            resp.headers.push(("allow".into(), allow.into()));
        }
        resp
    }
}

/// Codes shared by every operation.
fn common(f: &Failure) -> Option<LegacyError> {
    let code = match f.code.as_str() {
        "operator_not_supported"
        | "operator_country_mismatch"
        | "country_not_supported"
        | "operator_unavailable"
        | "mode_not_supported" => "invalid_operator",
        "phone_invalid" => "invalid_phone",
        "amount_too_small" => "amount_too_low",
        "payment_not_found" => return Some(LegacyError::new(404, "not_found", f.message.clone())),
        "idempotency_key_reused" | "reference_already_used" | "idempotency_request_in_progress" => {
            return Some(LegacyError::new(
                409,
                "duplicate_request",
                f.message.clone(),
            ));
        }
        _ if f.param.as_deref() == Some("customer.phone") => "invalid_phone",
        _ => return None,
    };
    Some(LegacyError::new(400, code, f.message.clone()))
}

pub fn from_create(f: Failure) -> LegacyError {
    common(&f).unwrap_or_else(|| match f.status {
        400..=499 => LegacyError::invalid(f.message),
        _ => LegacyError::new(
            500,
            "collect_failed",
            "The collection could not be initiated; retry with the same Idempotency-Key.",
        ),
    })
}

pub fn from_confirm(f: Failure) -> LegacyError {
    let code = match f.code.as_str() {
        "invalid_otp" | "otp_invalid_length" => Some("invalid_otp"),
        // The legacy table answers 400 where the current generation says 409.
        "otp_not_required" => Some("otp_not_required"),
        _ => None,
    };
    if let Some(code) = code {
        return LegacyError::new(400, code, f.message);
    }
    common(&f).unwrap_or_else(|| match f.status {
        400..=499 => LegacyError::invalid(f.message),
        _ => LegacyError::new(
            500,
            "collect_confirm_failed",
            "The confirmation could not be processed; retry.",
        ),
    })
}

pub fn from_read(f: Failure) -> LegacyError {
    common(&f).unwrap_or_else(|| match f.status {
        400..=499 => LegacyError::invalid(f.message),
        _ => LegacyError::new(
            500,
            "collect_failed",
            "The collection could not be read; retry.",
        ),
    })
}
