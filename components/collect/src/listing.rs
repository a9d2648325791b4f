//! What a merchant lists: payments newest first (as Stripe's lists), with
//! filters and cursors both ways; a payment's refunds; one refund.
//!
//! Payment ids are UUIDv7, so the `payments` table (keyed
//! `env/merchant/id`) is itself the index by creation time: an unfiltered
//! page is one ordered range scan, `created[gte|lt]` narrows the range by
//! the ids' time prefix, `reference` is one lookup in `refs`. `status`,
//! `operator` and `country` are answered from the `listing` index (see
//! [`scan_payments`]).

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
/// The largest page one storage scan returns (the host's cap).
const SCAN_CAP: u32 = 1000;

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

pub struct Filters {
    status: Option<Status>,
    operator: Option<&'static str>,
    country: Option<String>,
}

impl Filters {
    fn is_empty(&self) -> bool {
        self.status.is_none() && self.operator.is_none() && self.country.is_none()
    }

    /// The `listing` prefixes holding every payment these filters keep:
    /// each status (as keyed: [`store::listed_status`]), country and
    /// operator (or none chosen yet) they allow.
    fn prefixes(&self, env: &str, merchant: &str) -> Vec<String> {
        let mut statuses: Vec<Status> = match self.status {
            Some(s) => vec![s],
            None => STATUSES.to_vec(),
        };
        statuses
            .iter_mut()
            .for_each(|s| *s = store::listed_status(*s));
        statuses.dedup(); // in progress first in STATUSES: one `pending`
        let mut routes: Vec<(&str, Option<&str>)> = Vec::new();
        for country in operators::Country::ALL {
            let code = country.code();
            if self.country.as_deref().is_some_and(|c| c != code) {
                continue;
            }
            if self.operator.is_none() {
                routes.push((code, None));
            }
            for op in operators::OPERATORS.iter().filter(|o| o.country == country) {
                if self.operator.is_none_or(|want| want == op.slug) {
                    routes.push((code, Some(op.slug)));
                }
            }
        }
        let mut out = Vec::with_capacity(statuses.len() * routes.len());
        for &status in &statuses {
            for &(country, operator) in &routes {
                out.push(store::listing_prefix(
                    env, merchant, status, country, operator,
                ));
            }
        }
        out
    }

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

/// A payment or refund id given as a cursor (`starting_after`,
/// `ending_before`): a UUID.
pub fn cursor(req: &Request, name: &str) -> Result<Option<String>, ApiError> {
    match param(req, name) {
        None => Ok(None),
        Some(v) => uuid::Uuid::parse_str(&v)
            .map(|u| Some(u.hyphenated().to_string()))
            .map_err(|_| {
                invalid(
                    name,
                    format!("{name} must be a payment or refund id (a UUID)."),
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
            .filter(|p| p.reference == reference && filters.keep(p))
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
        return under_review(env, merchant, &filters, limit, cursor.as_deref());
    }

    let mut page = scan_payments(
        &Range {
            env,
            merchant,
            after: cursor.as_deref(),
            gte,
            lt,
        },
        &filters,
        limit,
        order,
    )?;
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
/// `starting_after` and the other filters; `created` and `ending_before` are
/// not combined with it.
fn under_review(
    env: &str,
    merchant: &str,
    filters: &Filters,
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
        if !filters.keep(&p) {
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

/// Which way a scan reads: `Asc` from the oldest (the export, and a list's
/// `ending_before`), `Desc` from the newest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

/// Where a scan of a merchant's payments runs: past a cursor (in the scan's
/// order), within a creation-time range (Unix seconds, `lt` exclusive).
pub struct Range<'a> {
    pub env: &'a str,
    pub merchant: &'a str,
    pub after: Option<&'a str>,
    pub gte: Option<u64>,
    pub lt: Option<u64>,
}

/// One page of a scan: the payments kept (in the scan's order), whether the
/// range goes on, and where the next page starts.
pub struct ScanPage {
    pub payments: Vec<Payment>,
    pub has_more: bool,
    pub next: Option<String>,
}

/// Up to `limit` payments of `range` that pass `filters`, in `order`,
/// reading at most [`MAX_SCANNED`] entries: the list's pages and the CSV
/// export's.
///
/// Without `status`, `operator` or `country`, the payments table is the
/// index (ids are UUIDv7: key order is creation order). With them, the
/// `listing` index: one prefix per (status, country, operator) the filters
/// allow, each in id order, merged. Until `listing` is backfilled (a
/// database from before it), the filters are checked on the payments table.
pub fn scan_payments(
    range: &Range<'_>,
    filters: &Filters,
    limit: u32,
    order: Order,
) -> Result<ScanPage, ApiError> {
    let chunk = (limit + 1).min(SCAN_CAP);
    if filters.is_empty() || !store::listing_ready()? {
        let prefix = scope(range.env, range.merchant, "");
        // Checking filters on records (before the backfill): larger chunks.
        let chunk = if filters.is_empty() {
            chunk
        } else {
            chunk.max(100)
        };
        let run = Run::new("payments", &prefix, range, order, chunk);
        return merge(vec![run], range, filters, limit, order);
    }
    let runs = filters
        .prefixes(range.env, range.merchant)
        .iter()
        .map(|prefix| Run::new("listing", prefix, range, order, chunk.min(101)))
        .collect();
    merge(runs, range, filters, limit, order)
}

/// One key range of one table, read a chunk at a time in the scan's order.
struct Run {
    table: &'static str,
    /// `[lo, hi)`, narrowed as chunks are read.
    lo: String,
    hi: String,
    order: Order,
    chunk: u32,
    buf: std::collections::VecDeque<storage::Entry>,
    done: bool,
}

impl Run {
    /// The keys under `prefix` (ending in `/`, followed by a payment id)
    /// within `range`.
    fn new(table: &'static str, prefix: &str, range: &Range<'_>, order: Order, chunk: u32) -> Run {
        let mut lo = match range.gte {
            Some(s) => format!("{prefix}{}", id_floor(s * 1000)),
            None => prefix.to_string(),
        };
        // `a/b0` is the first key after every `a/b/…`.
        let mut hi = match range.lt {
            Some(s) => format!("{prefix}{}", id_floor(s * 1000)),
            None => format!("{}0", prefix.trim_end_matches('/')),
        };
        if let Some(c) = range.after {
            match order {
                Order::Asc => lo = lo.max(format!("{prefix}{c}\u{1}")),
                Order::Desc => hi = hi.min(format!("{prefix}{c}")),
            }
        }
        Run {
            table,
            lo,
            hi,
            order,
            chunk,
            buf: Default::default(),
            done: false,
        }
    }

    /// The next entry's payment id, reading a chunk when the buffer is empty.
    fn peek(&mut self) -> Result<Option<&str>, ApiError> {
        if self.buf.is_empty() && !self.done {
            self.fill()?;
        }
        Ok(self.buf.front().map(|e| entry_id(&e.key)))
    }

    fn fill(&mut self) -> Result<(), ApiError> {
        if self.lo >= self.hi {
            self.done = true;
            return Ok(());
        }
        let rows = match self.order {
            Order::Asc => storage::scan(self.table, &self.lo, &self.hi, self.chunk)?,
            Order::Desc => storage::scan_desc(self.table, &self.lo, &self.hi, self.chunk)?,
        };
        self.done = (rows.len() as u32) < self.chunk;
        if let Some(last) = rows.last() {
            match self.order {
                Order::Asc => self.lo = format!("{}\u{1}", last.key),
                Order::Desc => self.hi = last.key.clone(),
            }
        }
        self.buf.extend(rows);
        Ok(())
    }
}

fn entry_id(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or_default()
}

/// Merges `runs` by payment id in `order` into one page. A `payments` entry
/// carries its record; a `listing` entry is a key, whose record is read and
/// checked (a filter's answer is the record's, never the index's alone).
fn merge(
    mut runs: Vec<Run>,
    range: &Range<'_>,
    filters: &Filters,
    limit: u32,
    order: Order,
) -> Result<ScanPage, ApiError> {
    let mut payments: Vec<Payment> = Vec::new();
    let mut scanned = 0;
    let mut last_scanned: Option<String> = None;
    while payments.len() < limit as usize && scanned < MAX_SCANNED {
        // The run whose next id comes first in `order`.
        let mut best: Option<(usize, String)> = None;
        for (i, run) in runs.iter_mut().enumerate() {
            if let Some(id) = run.peek()? {
                let first = best.as_ref().is_none_or(|(_, b)| match order {
                    Order::Asc => id < b.as_str(),
                    Order::Desc => id > b.as_str(),
                });
                if first {
                    best = Some((i, id.to_string()));
                }
            }
        }
        let Some((i, id)) = best else { break };
        let entry = runs[i].buf.pop_front().expect("peeked");
        scanned += 1;
        // One payment under two prefixes: its entry moved between the reads
        // of two prefixes (or an old one was left). Merge order puts the two
        // side by side: the second is skipped.
        if last_scanned.as_deref() == Some(id.as_str()) {
            continue;
        }
        let record = if runs[i].table == "payments" {
            Some(store::decode_payment(&entry.value)?)
        } else {
            store::read_payment(range.env, range.merchant, &id)?
        };
        if let Some(p) = record.filter(|p| p.id == id && filters.keep(p)) {
            payments.push(p);
        }
        last_scanned = Some(id);
    }
    let mut has_more = false;
    for run in &mut runs {
        has_more |= run.peek()?.is_some();
    }
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
