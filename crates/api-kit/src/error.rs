//! Errors of the current generation, `{error:{type,code,message,param,doc_url}}`,
//! for every API component that speaks it (`collect`, `bulk`), built in this
//! one place. `doc_url` points at the errors chapter's row of the code.

use serde_json::{Value, json};

use crate::Answer;

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub kind: &'static str,
    pub code: &'static str,
    pub message: String,
    pub param: Option<String>,
    /// Methods for the `Allow` header of a 405 (RFC 9110 requires it).
    pub allow: Option<&'static str>,
    /// Every problem found, for a batch's validation: one entry per bad
    /// item or CSV line, so a client fixes them all in one round. (A boxed
    /// slice: every `Result` of the components carries an `ApiError`.)
    pub errors: Box<[Value]>,
    /// Storage rolled the transaction back for crossing another writer
    /// (see [`ApiError::storage_conflict`]): running it again may succeed.
    pub conflict: bool,
}

impl ApiError {
    pub fn new(
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
            allow: None,
            errors: Box::default(),
            conflict: false,
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
        e.errors = errors.into_boxed_slice();
        e
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

    /// 401 to an operator's notification that failed its authenticity check.
    pub fn callback_unauthenticated() -> ApiError {
        ApiError::new(
            401,
            "authentication_error",
            "callback_unauthenticated",
            "The notification failed its authenticity check.",
            None,
        )
    }

    /// 403: the rule says another key must do this.
    pub fn forbidden(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(403, "permission_error", code, message, None)
    }

    pub fn not_found(message: &str) -> ApiError {
        ApiError::new(404, "not_found_error", "resource_not_found", message, None)
    }

    /// 404 with a code of its own (`adapter_not_found`, `account_not_found`...).
    pub fn no_such(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(404, "not_found_error", code, message, None)
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

    pub fn refund_not_found(id: &str) -> ApiError {
        ApiError::new(
            404,
            "not_found_error",
            "refund_not_found",
            format!("No refund '{id}' for this merchant and environment."),
            None,
        )
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

    /// 405, with the methods the path answers for its `Allow` header.
    pub fn method_not_allowed(method: &str, allow: &'static str) -> ApiError {
        ApiError {
            allow: Some(allow),
            ..ApiError::new(
                405,
                "invalid_request_error",
                "method_not_allowed",
                format!("Method {method} is not allowed on this path; use {allow}."),
                None,
            )
        }
    }

    pub fn idempotency(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(409, "idempotency_error", code, message, None)
    }

    pub fn state(code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError::new(409, "state_error", code, message, None)
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

    pub fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "api_error", "internal_error", message, None)
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

    /// 503 (with `Retry-After`): what it needs (storage, a lock) is not
    /// free now; the same request again in a moment may succeed.
    pub fn unavailable(message: impl Into<String>) -> ApiError {
        ApiError::new(503, "api_error", "internal_error", message, None)
    }

    /// Storage failed: 503 when it is unavailable for now (a database
    /// restarting, a lock not free in time), which the client retries; 500
    /// otherwise.
    pub fn storage(unavailable: bool) -> ApiError {
        ApiError {
            status: if unavailable { 503 } else { 500 },
            ..ApiError::internal(
                "Storage is temporarily unavailable. Retry with the same Idempotency-Key; it will not charge twice.",
            )
        }
    }

    /// Storage rolled the transaction back to end a wait with another
    /// writer (two transactions each waiting for what the other holds):
    /// nothing was written. [`again_on_conflict`] runs the transaction again;
    /// a client that still gets it retries like any 503.
    pub fn storage_conflict() -> ApiError {
        ApiError {
            conflict: true,
            ..ApiError::storage(true)
        }
    }

    /// The answer: its JSON body, `Retry-After` on a 503 (each is worth
    /// retrying soon: storage, a busy operator slot, a notification not
    /// processed) and `Allow` on a 405.
    pub fn into_answer(self, base_url: &str) -> Answer {
        let mut error = json!({
            "type": self.kind,
            "code": self.code,
            "message": self.message,
            "param": self.param,
            "doc_url": format!("{base_url}/docs/errors#{}", self.code),
        });
        if !self.errors.is_empty() {
            error["errors"] = Value::Array(self.errors.into_vec());
        }
        let mut answer = Answer::json(self.status, &json!({ "error": error }));
        if self.status == 503 {
            answer = answer.with_header("retry-after", "1");
        }
        if let Some(allow) = self.allow {
            answer = answer.with_header("allow", allow);
        }
        answer
    }
}

/// How many times [`again_on_conflict`] runs a transaction in all.
pub const CONFLICT_ATTEMPTS: u32 = 5;

/// Runs `transaction` — one whole storage transaction, begun and committed
/// inside it — again while storage rolls it back as a conflict with another
/// writer, up to [`CONFLICT_ATTEMPTS`] runs. Each run starts afresh on
/// current data, so `transaction` must only read and write storage (no call
/// to an operator, no other side effect): in a component, the transaction
/// that records an operator's answer is this closure, the call that got the
/// answer stays outside it — so an answer is never lost to a conflict, and
/// never asked for twice.
pub fn again_on_conflict<T>(
    mut transaction: impl FnMut() -> Result<T, ApiError>,
) -> Result<T, ApiError> {
    let mut attempt = 1;
    loop {
        match transaction() {
            Err(e) if e.conflict && attempt < CONFLICT_ATTEMPTS => attempt += 1,
            out => return out,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(a: &Answer) -> Value {
        serde_json::from_slice(&a.body).unwrap()
    }

    #[test]
    fn an_error_is_its_json_with_a_link_to_its_row() {
        let a =
            ApiError::invalid("amount_invalid", "amount", "Too small.").into_answer("https://x");
        assert_eq!(a.status, 400);
        assert_eq!(
            body(&a),
            json!({"error": {"type": "invalid_request_error", "code": "amount_invalid",
                "message": "Too small.", "param": "amount",
                "doc_url": "https://x/docs/errors#amount_invalid"}})
        );
        assert_eq!(
            a.headers,
            [("content-type".to_string(), "application/json".to_string())]
        );
    }

    #[test]
    fn a_405_says_what_is_allowed_and_a_503_when_to_retry() {
        let a = ApiError::method_not_allowed("PUT", "GET, POST").into_answer("");
        assert!(a.headers.contains(&("allow".into(), "GET, POST".into())));
        let a = ApiError::storage(true).into_answer("");
        assert_eq!(a.status, 503);
        assert!(a.headers.contains(&("retry-after".into(), "1".into())));
        assert_eq!(ApiError::storage(false).into_answer("").status, 500);
    }

    #[test]
    fn a_transaction_rolled_back_as_a_conflict_runs_again_and_nothing_else_does() {
        let mut runs = 0;
        let out = again_on_conflict(|| {
            runs += 1;
            if runs < 3 {
                Err(ApiError::storage_conflict())
            } else {
                Ok(runs)
            }
        });
        assert_eq!(out, Ok(3));

        let mut runs = 0;
        let out: Result<(), _> = again_on_conflict(|| {
            runs += 1;
            Err(ApiError::storage_conflict())
        });
        assert_eq!(runs, CONFLICT_ATTEMPTS);
        let e = out.unwrap_err();
        assert!(e.conflict);
        assert_eq!(e.into_answer("").status, 503, "the client may retry");

        let mut runs = 0;
        let out: Result<(), _> = again_on_conflict(|| {
            runs += 1;
            Err(ApiError::storage(true))
        });
        assert_eq!((runs, out.unwrap_err().conflict), (1, false));
    }

    #[test]
    fn a_batch_lists_every_problem() {
        let e = ApiError::invalid_items(
            "items_invalid",
            "items",
            "item",
            2,
            vec![json!(1), json!(2)],
        );
        let b = body(&e.into_answer(""));
        assert_eq!(b["error"]["errors"], json!([1, 2]));
        assert!(
            b["error"]["message"]
                .as_str()
                .unwrap()
                .starts_with("2 items are invalid")
        );
    }
}
