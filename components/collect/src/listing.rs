//! What a merchant lists: payments in creation order, with filters and a
//! cursor; a payment's refunds; one refund.
//!
//! Payment ids are UUIDv7, so the `payments` table (keyed
//! `env/merchant/id`) is itself the index by creation time: a page is one
//! ordered range scan, `created[gte|lt]` narrows the range by the ids' time
//! prefix, `reference` is one lookup in `refs`. `status`, `operator` and
//! `country` are checked on the payments of the range, at most
//! [`MAX_SCANNED`] per request: a page may then hold fewer than `limit`
//! payments while `has_more` is true; `next_starting_after` says where the
//! next page starts.

use serde::Serialize;

use mmc_domain::{Status, operators};

use crate::ApiError;
use crate::mmc::api::http_types::{Caller, Request, Response};
use crate::mmc::platform::storage;
use crate::refunds::refund_json;
use crate::store::{self, Payment, scope};
use crate::wire::{self, PaymentView, json_response};

const DEFAULT_LIMIT: u32 = 10;
const MAX_LIMIT: u32 = 100;
/// Payments read at most per request when filters drop some.
pub const MAX_SCANNED: u32 = 1000;

const STATUSES: [Status; 9] = [
    Status::Pending,
    Status::Processing,
    Status::AwaitingOtp,
    Status::AwaitingPayment,
    Status::Completed,
    Status::Failed,
    Status::Cancelled,
    Status::Expired,
    Status::Refunded,
];

#[derive(Serialize)]
struct Page<T> {
    object: &'static str,
    data: Vec<T>,
    has_more: bool,
    /// Where the next page starts (`starting_after`), when there is one.
    next_starting_after: Option<String>,
}

fn page_response<T: Serialize>(
    data: Vec<T>,
    has_more: bool,
    next_starting_after: Option<String>,
) -> Response {
    json_response(
        200,
        &Page {
            object: "list",
            data,
            has_more,
            next_starting_after,
        },
    )
}

pub struct Filters {
    status: Option<Status>,
    operator: Option<&'static str>,
    country: Option<String>,
}

impl Filters {
    fn keep(&self, p: &Payment) -> bool {
        self.status.is_none_or(|s| p.status == s)
            && self
                .operator
                .is_none_or(|o| p.operator.as_deref() == Some(o))
            && self.country.as_deref().is_none_or(|c| p.country == c)
    }
}

pub fn param(req: &Request, name: &str) -> Option<String> {
    // Names may come percent-encoded (`created%5Bgte%5D`).
    let encoded = name.replace('[', "%5B").replace(']', "%5D");
    wire::query_param(req, name)
        .or_else(|| wire::query_param(req, &encoded))
        .map(mmc_domain::http::decode_component)
}

fn invalid(param: &str, message: String) -> ApiError {
    ApiError::invalid("parameter_invalid", param, message)
}

/// `limit`: 1 to 100, 10 when absent.
fn limit(req: &Request) -> Result<u32, ApiError> {
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

/// A payment or refund id given as a cursor: a UUID.
pub fn cursor(req: &Request) -> Result<Option<String>, ApiError> {
    match param(req, "starting_after") {
        None => Ok(None),
        Some(v) => uuid::Uuid::parse_str(&v)
            .map(|u| Some(u.hyphenated().to_string()))
            .map_err(|_| {
                invalid(
                    "starting_after",
                    "starting_after must be a payment id (a UUID).".into(),
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

/// The smallest UUIDv7 (as text) created at `ms`: ids sort by their time prefix.
fn id_floor(ms: u64) -> String {
    format!("{:08x}-{:04x}", ms >> 16, ms & 0xffff)
}

pub fn filters(req: &Request) -> Result<Filters, ApiError> {
    let status = match param(req, "status") {
        None => None,
        Some(v) => Some(
            STATUSES
                .into_iter()
                .find(|s| s.as_str() == v)
                .ok_or_else(|| {
                    invalid(
                        "status",
                        format!(
                            "status must be one of {}.",
                            STATUSES.map(Status::as_str).join(", ")
                        ),
                    )
                })?,
        ),
    };
    let operator = match param(req, "operator") {
        None => None,
        Some(v) => Some(
            operators::find(&v)
                .map(|o| o.slug)
                .ok_or_else(|| invalid("operator", format!("Unknown operator '{v}'.")))?,
        ),
    };
    let country = match param(req, "country") {
        None => None,
        Some(v) => Some(
            operators::Country::parse(&v)
                .map(|_| v.to_ascii_uppercase())
                .ok_or_else(|| {
                    ApiError::invalid(
                        "country_not_supported",
                        "country",
                        "country must be one of BJ, TG, CI.",
                    )
                })?,
        ),
    };
    Ok(Filters {
        status,
        operator,
        country,
    })
}

/// `GET /payments`: the merchant's payments, oldest first.
pub fn list_payments(caller: &Caller, req: &Request) -> Result<Response, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let limit = limit(req)?;
    let after = cursor(req)?;
    let gte = seconds(req, "created[gte]")?;
    let lt = seconds(req, "created[lt]")?;
    let filters = filters(req)?;

    if let Some(reference) = param(req, "reference") {
        if reference.is_empty() || reference.chars().count() > 100 {
            return Err(invalid(
                "reference",
                "reference must be 1 to 100 characters.".into(),
            ));
        }
        // One lookup; the other filters still apply.
        let found = store::read_payment(env, merchant, &reference)?
            .filter(|p| p.reference == reference && filters.keep(p))
            .filter(|p| gte.is_none_or(|s| p.created_at_ms >= s * 1000))
            .filter(|p| lt.is_none_or(|s| p.created_at_ms < s * 1000))
            .filter(|p| after.as_deref().is_none_or(|a| p.id.as_str() > a));
        let data: Vec<PaymentView> = found.iter().map(|p| PaymentView::new(p, false)).collect();
        return Ok(page_response(data, false, None));
    }

    let page = scan_payments(
        &Range {
            env,
            merchant,
            after: after.as_deref(),
            gte,
            lt,
        },
        &filters,
        limit,
    )?;
    let data: Vec<PaymentView> = page
        .payments
        .iter()
        .map(|p| PaymentView::new(p, false))
        .collect();
    Ok(page_response(data, page.has_more, page.next))
}

/// Where a scan of a merchant's payments runs: after a cursor, within a
/// creation-time range (Unix seconds, `lt` exclusive).
pub struct Range<'a> {
    pub env: &'a str,
    pub merchant: &'a str,
    pub after: Option<&'a str>,
    pub gte: Option<u64>,
    pub lt: Option<u64>,
}

/// One page of a scan: the payments kept, whether the range goes on, and
/// where the next page starts.
pub struct ScanPage {
    pub payments: Vec<Payment>,
    pub has_more: bool,
    pub next: Option<String>,
}

/// Up to `limit` payments of `range` that pass `filters`, oldest first,
/// reading at most [`MAX_SCANNED`]: the list's pages and the CSV export's.
pub fn scan_payments(
    range: &Range<'_>,
    filters: &Filters,
    limit: u32,
) -> Result<ScanPage, ApiError> {
    let Range {
        env,
        merchant,
        after,
        gte,
        lt,
    } = *range;
    let prefix = scope(env, merchant, "");
    let mut start = match (after, gte) {
        (Some(a), Some(s)) => format!("{prefix}{}", a.max(&id_floor(s * 1000))),
        (Some(a), None) => format!("{prefix}{a}"),
        (None, Some(s)) => format!("{prefix}{}", id_floor(s * 1000)),
        (None, None) => prefix.clone(),
    };
    // `env/merchant0` is the first key after every `env/merchant/…`.
    let end = match lt {
        Some(s) => format!("{prefix}{}", id_floor(s * 1000)),
        None => format!("{}0", prefix.trim_end_matches('/')),
    };
    let mut payments: Vec<Payment> = Vec::new();
    let mut scanned = 0;
    let mut last_scanned: Option<String> = None;
    let mut range_done = false;
    while payments.len() <= limit as usize && scanned < MAX_SCANNED {
        let want = (limit + 1).min(MAX_SCANNED - scanned);
        let rows = storage::scan("payments", &start, &end, want)?;
        range_done = (rows.len() as u32) < want;
        for storage::Entry { key, value } in rows {
            let id = key.rsplit('/').next().unwrap_or_default().to_string();
            start = format!("{key}\u{1}");
            if after == Some(id.as_str()) {
                continue; // `starting_after` itself
            }
            scanned += 1;
            last_scanned = Some(id);
            let p: Payment = serde_json::from_slice(&value)
                .map_err(|e| ApiError::internal(format!("corrupt record: {e}")))?;
            if filters.keep(&p) {
                payments.push(p);
                if payments.len() > limit as usize {
                    break;
                }
            }
        }
        if range_done {
            break;
        }
    }
    let has_more = payments.len() > limit as usize || !range_done;
    payments.truncate(limit as usize);
    let next = if !has_more {
        None
    } else if payments.len() == limit as usize {
        payments.last().map(|p| p.id.clone())
    } else {
        last_scanned
    };
    Ok(ScanPage {
        payments,
        has_more,
        next,
    })
}

/// `GET /payments/{reference_or_id}/refunds`: the payment's refunds, oldest first.
pub fn payment_refunds(caller: &Caller, req: &Request, id: &str) -> Result<Response, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let limit = limit(req)?;
    let after = cursor(req)?;
    let p =
        store::read_payment(env, merchant, id)?.ok_or_else(|| ApiError::payment_not_found(id))?;
    let refunds = store::read_payment_refunds(env, merchant, &p.id, after.as_deref(), limit + 1)?;
    let has_more = refunds.len() > limit as usize;
    let data: Vec<_> = refunds
        .iter()
        .take(limit as usize)
        .map(refund_json)
        .collect();
    let next_starting_after = has_more.then(|| refunds[limit as usize - 1].id.clone());
    Ok(page_response(data, has_more, next_starting_after))
}

/// `GET /refunds/{id}`.
pub fn get_refund(caller: &Caller, id: &str) -> Result<Response, ApiError> {
    let r = store::read_refund(&caller.environment, &caller.merchant_id, id)?
        .ok_or_else(|| ApiError::refund_not_found(id))?;
    Ok(json_response(200, &refund_json(&r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_floor_sorts_with_the_ids_of_its_millisecond() {
        let ms = 1_795_575_620_731u64;
        let floor = id_floor(ms);
        let id = uuid::Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            ms / 1000,
            ((ms % 1000) * 1_000_000) as u32,
        ))
        .hyphenated()
        .to_string();
        assert!(id.starts_with(&floor), "{id} {floor}");
        assert!(id_floor(ms - 1) < id && id < id_floor(ms + 1));
    }
}
