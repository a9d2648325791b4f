//! The list endpoints: a merchant's payments (by reference, under review,
//! searched or scanned), a payment's refunds, one refund.

use serde::Serialize;

use crate::ApiError;
use crate::mmc::api::http_types::{Caller, Request, Response};
use crate::mmc::platform::storage;
use crate::refunds::refund_json;
use crate::store::{self, Payment};
use crate::wire::{PaymentView, json_response};

use super::filters::filters;
use super::params::{cursor, invalid, limit, param, seconds};
use super::scan::{MAX_SCANNED, Order, Range, scan_payments};
use super::search::{search, search_payments};

#[derive(Serialize)]
struct Page<T> {
    object: &'static str,
    data: Vec<T>,
    has_more: bool,
    /// Where the next older page starts (`starting_after`), when there is one.
    next_starting_after: Option<String>,
    /// Paging with `ending_before`: where the next newer page ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    next_ending_before: Option<String>,
}

/// A list page, newest first; `next` continues in the direction `order`
/// was read (`Desc`: older, `Asc`: newer).
fn page_response<T: Serialize>(
    data: Vec<T>,
    has_more: bool,
    next: Option<String>,
    order: Order,
) -> Response {
    let (next_starting_after, next_ending_before) = match order {
        Order::Desc => (next, None),
        Order::Asc => (None, next),
    };
    json_response(
        200,
        &Page {
            object: "list",
            data,
            has_more,
            next_starting_after,
            next_ending_before,
        },
    )
}

/// `GET /payments`: the merchant's payments, newest first (as Stripe's
/// lists): `starting_after` pages to older ones, `ending_before` to newer.
pub fn list_payments(caller: &Caller, req: &Request) -> Result<Response, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let limit = limit(req)?;
    let (cursor, order) = match (
        cursor(req, "starting_after")?,
        cursor(req, "ending_before")?,
    ) {
        (Some(_), Some(_)) => {
            return Err(invalid(
                "ending_before",
                "Give starting_after or ending_before, not both.".into(),
            ));
        }
        (None, Some(before)) => (Some(before), Order::Asc),
        (after, None) => (after, Order::Desc),
    };
    let gte = seconds(req, "created[gte]")?;
    let lt = seconds(req, "created[lt]")?;
    let filters = filters(req)?;
    let search = search(req)?;
    let searched = |p: &Payment| search.as_ref().is_none_or(|s| s.matches(p));
    // Checked before any branch answers, whichever parameters come with it.
    let review = match param(req, "review").as_deref() {
        None => false,
        Some("required") => true,
        Some(_) => {
            return Err(invalid(
                "review",
                "review must be required (the payments flagged for review).".into(),
            ));
        }
    };

    if let Some(reference) = param(req, "reference") {
        if reference.is_empty() || reference.chars().count() > 100 {
            return Err(invalid(
                "reference",
                "reference must be 1 to 100 characters.".into(),
            ));
        }
        // One lookup; the other filters still apply.
        let found = store::read_payment(env, merchant, &reference)?
            .filter(|p| p.reference == reference && filters.keep(p) && searched(p))
            .filter(|p| !review || p.review.is_some())
            .filter(|p| gte.is_none_or(|s| p.created_at_ms >= s * 1000))
            .filter(|p| lt.is_none_or(|s| p.created_at_ms < s * 1000))
            .filter(|p| {
                cursor.as_deref().is_none_or(|c| match order {
                    Order::Desc => p.id.as_str() < c,
                    Order::Asc => p.id.as_str() > c,
                })
            });
        let data: Vec<PaymentView> = found.iter().map(|p| PaymentView::new(p, false)).collect();
        return Ok(page_response(data, false, None, order));
    }

    if review {
        let keep = |p: &Payment| filters.keep(p) && searched(p);
        return under_review(env, merchant, &keep, limit, cursor.as_deref());
    }

    let range = Range {
        env,
        merchant,
        after: cursor.as_deref(),
        gte,
        lt,
    };
    let mut page = match &search {
        Some(search) => search_payments(&range, search, &filters, limit, order)?,
        None => scan_payments(&range, &filters, limit, order)?,
    };
    if order == Order::Asc {
        page.payments.reverse(); // newest first, whichever way it was read
    }
    let data: Vec<PaymentView> = page
        .payments
        .iter()
        .map(|p| PaymentView::new(p, false))
        .collect();
    Ok(page_response(data, page.has_more, page.next, order))
}

/// `review=required`: the payments an operator reported a success for
/// another amount or currency, newest first (few: each is an incident), with
/// `starting_after` and the other filters (`keep`); `created` and
/// `ending_before` are not combined with it.
fn under_review(
    env: &str,
    merchant: &str,
    keep: &dyn Fn(&Payment) -> bool,
    limit: u32,
    after: Option<&str>,
) -> Result<Response, ApiError> {
    let prefix = store::scope(env, merchant, "");
    let end = match after {
        Some(a) => format!("{prefix}{a}"),
        None => format!("{}0", prefix.trim_end_matches('/')),
    };
    let mut payments = Vec::new();
    let mut last = None;
    let mut has_more = false;
    for e in storage::scan_desc(crate::review::TABLE, &prefix, &end, MAX_SCANNED)? {
        let id = e.key.rsplit('/').next().unwrap_or_default().to_string();
        let Some(p) = store::read_payment(env, merchant, &id)? else {
            continue;
        };
        if !keep(&p) {
            continue;
        }
        if payments.len() == limit as usize {
            has_more = true;
            break;
        }
        last = Some(id);
        payments.push(p);
    }
    let data: Vec<PaymentView> = payments
        .iter()
        .map(|p| PaymentView::new(p, false))
        .collect();
    Ok(page_response(
        data,
        has_more,
        last.filter(|_| has_more),
        Order::Desc,
    ))
}

/// `GET /payments/{reference_or_id}/refunds`: the payment's refunds, newest
/// first (a payment has few: `starting_after` pages, no `ending_before`).
pub fn payment_refunds(caller: &Caller, req: &Request, id: &str) -> Result<Response, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let limit = limit(req)?;
    let after = cursor(req, "starting_after")?;
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
    Ok(page_response(
        data,
        has_more,
        next_starting_after,
        Order::Desc,
    ))
}

/// `GET /refunds/{id}`.
pub fn get_refund(caller: &Caller, id: &str) -> Result<Response, ApiError> {
    let r = store::read_refund(&caller.environment, &caller.merchant_id, id)?
        .ok_or_else(|| ApiError::refund_not_found(id))?;
    Ok(json_response(200, &refund_json(&r)))
}
