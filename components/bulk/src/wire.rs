//! Wire formats: request helpers (headers, query, JSON body, pagination)
//! and the JSON shapes of batches, items and list pages.

use mmc_domain::time;
use serde_json::{Map, Value, json};

use crate::mmc::api::http_types::{Request, Response};
use crate::store::{Batch, Held, Item};
use crate::{API_VERSION, ApiError};

pub const DEFAULT_PAGE_SIZE: u32 = 20;
pub const MAX_PAGE_SIZE: u32 = 100;

pub fn json_response(status: u16, body: &Value) -> Response {
    mmc_api_kit::Answer::json(status, body).into()
}

pub fn header<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    mmc_domain::http::header(&req.headers, name)
}

/// The media type of the body, lower-cased, without parameters.
pub fn media_type(req: &Request) -> String {
    header(req, "content-type")
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// A query parameter, percent-decoded (`+` is a space, as forms send it).
pub fn query_param(req: &Request, name: &str) -> Result<Option<String>, ApiError> {
    let Some(raw) = mmc_domain::http::query_param(&req.query, name) else {
        return Ok(None);
    };
    percent_decode(raw).map(Some).ok_or_else(|| {
        ApiError::invalid(
            "parameter_invalid",
            name,
            format!("{name} is not a valid URL-encoded UTF-8 value."),
        )
    })
}

fn percent_decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = (bytes.next()? as char).to_digit(16)?;
                let lo = (bytes.next()? as char).to_digit(16)?;
                out.push((hi * 16 + lo) as u8);
            }
            b => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

/// `Idempotency-Key`: required on both ways of creating a batch (a retry
/// after a lost response must not pay everyone twice), a UUID, returned in
/// its canonical hyphenated form. Same codes and messages as for payments.
pub fn idempotency_key(req: &Request) -> Result<String, ApiError> {
    let Some(k) = header(req, "idempotency-key") else {
        return Err(ApiError::invalid(
            "idempotency_key_missing",
            "Idempotency-Key",
            "The Idempotency-Key header is required (a UUID).",
        ));
    };
    Ok(uuid::Uuid::parse_str(k.trim())
        .map_err(|_| {
            ApiError::invalid(
                "idempotency_key_invalid",
                "Idempotency-Key",
                "Idempotency-Key must be a UUID.",
            )
        })?
        .hyphenated()
        .to_string())
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

/// The JSON object body; `empty_ok` accepts an empty body as `{}`.
pub fn body_object(req: &Request, empty_ok: bool) -> Result<Map<String, Value>, ApiError> {
    use mmc_domain::http::BodyError;
    match mmc_domain::http::json_object(&req.body) {
        Ok(m) => Ok(m),
        // No body at all; a body of blanks is not JSON.
        Err(BodyError::Missing) if empty_ok && req.body.is_empty() => Ok(Map::new()),
        Err(BodyError::Missing) if empty_ok => Err(ApiError::bad_request(
            "invalid_json",
            "The body must be a JSON object, or no body at all.",
        )),
        Err(BodyError::Missing) => Err(ApiError::bad_request(
            "body_missing",
            "A JSON object body is required.",
        )),
        Err(BodyError::NotObject) => Err(ApiError::bad_request(
            "invalid_json",
            "The body must be a JSON object.",
        )),
        Err(BodyError::Invalid(e)) => Err(ApiError::bad_request(
            "invalid_json",
            format!("The body is not valid JSON: {e}."),
        )),
    }
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

/// An optional string of at most `max` characters (`null` is absent).
pub fn opt_string(
    m: &Map<String, Value>,
    field: &str,
    max: usize,
) -> Result<Option<String>, ApiError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => check_text(field, s, max).map(Some),
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid_string",
            field,
            format!("{field} must be a string."),
        )),
    }
}

/// Trimmed `s`, at most `max` characters.
pub fn check_text(field: &str, s: &str, max: usize) -> Result<String, ApiError> {
    let s = s.trim();
    if s.chars().count() > max {
        return Err(ApiError::invalid(
            "parameter_too_long",
            field,
            format!("{field} must be at most {max} characters."),
        ));
    }
    Ok(s.to_string())
}

/// Batch `name`: required, 1 to 100 characters.
pub fn batch_name(name: Option<String>) -> Result<String, ApiError> {
    match name {
        Some(n) if !n.is_empty() => Ok(n),
        _ => Err(ApiError::invalid(
            "parameter_missing",
            "name",
            "name is required: a label for the batch, e.g. \"Salaries June\".",
        )),
    }
}

/// `?page=&page_size=`: 1-based page, 1 to 100 per page (default 20).
#[derive(Debug, Clone, Copy)]
pub struct Page {
    pub page: u64,
    pub size: u32,
}

impl Page {
    pub fn offset(&self) -> u64 {
        (self.page - 1).saturating_mul(self.size as u64)
    }
}

pub fn page(req: &Request) -> Result<Page, ApiError> {
    let number = |name: &str, default: u64, max: u64| -> Result<u64, ApiError> {
        match query_param(req, name)? {
            None => Ok(default),
            Some(v) => v
                .parse::<u64>()
                .ok()
                .filter(|n| (1..=max).contains(n))
                .ok_or_else(|| {
                    ApiError::invalid(
                        "parameter_out_of_range",
                        name,
                        format!("{name} must be an integer from 1 to {max}."),
                    )
                }),
        }
    };
    Ok(Page {
        page: number("page", 1, 1_000_000)?,
        size: number("page_size", DEFAULT_PAGE_SIZE as u64, MAX_PAGE_SIZE as u64)? as u32,
    })
}

/// `{count,next,previous,results}`; links keep the `keep` query parameters.
pub fn page_json(
    base_url: &str,
    path: &str,
    keep: &[(&str, &str)],
    page: Page,
    count: u64,
    results: Vec<Value>,
) -> Value {
    let link = |n: u64| {
        let mut query: Vec<String> = keep
            .iter()
            .map(|(k, v)| format!("{k}={}", percent_encode(v)))
            .collect();
        query.push(format!("page={n}"));
        query.push(format!("page_size={}", page.size));
        format!("{base_url}{path}?{}", query.join("&"))
    };
    let next = (page.offset() + (page.size as u64) < count).then(|| link(page.page + 1));
    let previous = (page.page > 1).then(|| {
        // From beyond the end, "previous" is the last page that has results.
        let last = count.div_ceil(page.size as u64).max(1);
        link((page.page - 1).min(last))
    });
    json!({"count": count, "next": next, "previous": previous, "results": results})
}

fn percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}

fn ts(ms: Option<u64>) -> Value {
    ms.map(|m| Value::String(time::rfc3339(m)))
        .unwrap_or(Value::Null)
}

pub fn batch_json(b: &Batch) -> Value {
    let c = &b.counts;
    json!({
        "object": "bulk_payment",
        "id": b.id,
        "name": b.name,
        "description": b.description,
        "status": b.status.as_str(),
        "source": b.source,
        "environment": b.environment,
        "currency": b.currency,
        "item_count": b.item_count,
        "total_amount": b.total_amount,
        "items_by_status": {
            "pending": c.pending,
            "processing": c.processing,
            "completed": c.completed,
            "failed": c.failed,
        },
        "amount_completed": b.amount_completed,
        "amount_failed": b.amount_failed,
        "amount_remaining": b.total_amount.saturating_sub(b.amount_completed + b.amount_failed),
        "requires_validation": b.requires_validation,
        "validation_threshold": b.validation_threshold,
        "rejection_reason": b.rejection_reason,
        "created_by_key_id": b.created_by_key,
        "validated_by_key_id": b.validated_by_key,
        "created_by_user_id": b.creator(),
        "validated_by_user_id": b.validated_by_person,
        "created_at": time::rfc3339(b.created_at_ms),
        "updated_at": time::rfc3339(b.updated_at_ms),
        "validated_at": ts(b.validated_at_ms),
        "processing_started_at": ts(b.processing_started_at_ms),
        "completed_at": ts(b.completed_at_ms),
        "rejected_at": ts(b.rejected_at_ms),
        "insufficient_float": b.float_hold.as_ref().map(|h| json!({
            "since": time::rfc3339(h.since_ms),
            "checked_at": time::rfc3339(h.checked_ms),
            "wallets": h.wallets.iter().map(|w| json!({
                "account": w.account,
                "wallet": w.wallet,
                "currency": w.currency,
                "available": w.available,
                "needed": w.needed,
            })).collect::<Vec<_>>(),
        })),
    })
}

/// A batch's held (or unconfirmed) items, summed up: how many, since when
/// (the earliest), and each reason with its count, the most frequent first.
pub fn summary_json(held: &[Held]) -> Value {
    let mut reasons: Vec<(&str, u32)> = Vec::new();
    for h in held {
        match reasons.iter_mut().find(|(r, _)| *r == h.reason) {
            Some((_, n)) => *n += 1,
            None => reasons.push((&h.reason, 1)),
        }
    }
    reasons.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let since = held.iter().map(|h| h.since_ms).min();
    json!({
        "count": held.len(),
        "since": ts(since),
        "reasons": reasons
            .iter()
            .map(|(reason, count)| json!({"reason": reason, "count": count}))
            .collect::<Vec<_>>(),
    })
}

pub fn item_json(i: &Item) -> Value {
    let mut v = json!({
        "object": "bulk_payment.item",
        "id": i.id,
        "bulk_payment_id": i.batch_id,
        "line": i.line,
        "reference": i.reference,
        "beneficiary_name": i.beneficiary_name,
        "phone": i.phone,
        "country": i.country,
        "operator": i.operator,
        "amount": i.amount,
        "currency": i.currency,
        "status": i.status.as_str(),
        "attempts": i.attempts,
        "psp_reference": i.psp_reference,
        "failure_code": i.failure.as_ref().map(|f| f.code.clone()),
        "failure_message": i.failure.as_ref().map(|f| f.message.clone()),
        "created_at": time::rfc3339(i.created_at_ms),
        "updated_at": time::rfc3339(i.updated_at_ms),
        "submitted_at": ts(i.submitted_at_ms),
        "completed_at": ts(i.completed_at_ms),
        "expected_fee": i.expected_fee,
    });
    // Only when flagged: an unflagged item's JSON is as it always was.
    if let Some(r) = &i.review {
        v["review"] = json!({"code": r.code, "message": r.message});
    }
    if let Some(h) = &i.held {
        v["held"] = json!({"reason": h.reason, "since": time::rfc3339(h.since_ms)});
    }
    if let Some(u) = &i.unconfirmed {
        v["unconfirmed"] = json!({"reason": u.reason, "since": time::rfc3339(u.since_ms)});
    }
    v
}
