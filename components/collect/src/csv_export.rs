//! `GET /payments/export`: a period's payments as CSV for accounting.
//!
//! Oldest first: a period reads as a ledger. One call answers one page (at
//! most [`MAX_SCANNED`] payments read, the list's scan and filters) and, when the period goes on, names the next
//! page in the `mmc-continue` response header: the query to call again
//! with. The host streams the pages one after another into one response
//! (`crates/http/src/paged.rs`), so neither side ever holds more than a page,
//! whatever the period's size. The first page (no `starting_after`) starts
//! with the header row; a client may resume an interrupted export with
//! `starting_after=<the last id it received>`.

use mmc_domain::{Status, time};

use crate::ApiError;
use crate::listing::{self, MAX_SCANNED, Order, Range};
use crate::mmc::api::http_types::{Caller, Request, Response};
use crate::mmc::platform::clock;
use crate::store::Payment;

/// The response header that asks the host for another page.
pub const CONTINUE_HEADER: &str = "mmc-continue";

/// New columns go at the end: a sheet that reads them by position keeps working.
const COLUMNS: [&str; 17] = [
    "id",
    "reference",
    "created_at",
    "status",
    "country",
    "operator",
    "mode",
    "amount",
    "currency",
    "refunded_amount",
    "completed_at",
    "failed_at",
    "failure_code",
    "psp_reference",
    "description",
    "expected_fee",
    "net_amount",
];

pub fn export_payments(caller: &Caller, req: &Request) -> Result<Response, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let gte = listing::seconds(req, "created[gte]")?.ok_or_else(|| {
        ApiError::invalid(
            "parameter_missing",
            "created[gte]",
            "created[gte] (Unix seconds) is required: the start of the period to export.",
        )
    })?;
    // Without an end, the period ends now: fixed by the first page and
    // carried by the next ones, so payments created while the export runs
    // do not stretch it.
    let lt = match listing::seconds(req, "created[lt]")? {
        Some(lt) => lt,
        None => clock::now_ms() / 1000 + 1,
    };
    let after = listing::cursor(req, "starting_after")?;
    let filters = listing::filters(req)?;

    let page = listing::scan_payments(
        &Range {
            env,
            merchant,
            after: after.as_deref(),
            gte: Some(gte),
            lt: Some(lt),
        },
        &filters,
        MAX_SCANNED,
        Order::Asc,
    )?;
    let mut body = String::with_capacity(200 * (page.payments.len() + 1));
    if after.is_none() {
        row(&mut body, COLUMNS.iter().map(|c| Cell::Ours(c)));
    }
    for p in &page.payments {
        payment_row(&mut body, p);
    }
    let mut headers = vec![
        (
            "content-type".to_string(),
            "text/csv; charset=utf-8".to_string(),
        ),
        (
            "content-disposition".to_string(),
            format!(
                "attachment; filename=\"payments-{}-{}.csv\"",
                compact_time(gte),
                compact_time(lt)
            ),
        ),
        ("cache-control".to_string(), "no-store".to_string()),
    ];
    if let (true, Some(next)) = (page.has_more, page.next) {
        headers.push((
            CONTINUE_HEADER.to_string(),
            next_query(&req.query, lt, &next),
        ));
    }
    Ok(Response {
        status: 200,
        headers,
        body: body.into_bytes(),
    })
}

/// `1780272000` → `20260601T000000Z` (a file name cannot hold `:`).
fn compact_time(secs: u64) -> String {
    let t = time::rfc3339(secs * 1000);
    // `2026-06-01T00:00:00.000Z`: drop the separators and the milliseconds.
    let t = t.split('.').next().unwrap_or_default();
    format!("{}Z", t.replace(['-', ':'], ""))
}

/// The query of the next page: the client's own, with the period's end and
/// the cursor set.
fn next_query(query: &str, lt: u64, next: &str) -> String {
    let mut pairs: Vec<&str> = query
        .split('&')
        .filter(|kv| !kv.is_empty())
        .filter(|kv| {
            let name = mmc_domain::http::decode_component(kv.split('=').next().unwrap_or(kv));
            name != "starting_after" && name != "created[lt]"
        })
        .collect();
    let tail = format!("created%5Blt%5D={lt}&starting_after={next}");
    pairs.push(&tail);
    pairs.join("&")
}

enum Cell<'a> {
    /// A value the service made (ids, times, amounts, enums).
    Ours(&'a str),
    /// Text someone else chose (the merchant's reference and description,
    /// an operator's reference or code): a spreadsheet must not run it.
    Theirs(&'a str),
}

fn payment_row(out: &mut String, p: &Payment) {
    let time = |ms: Option<u64>| ms.map(time::rfc3339).unwrap_or_default();
    let failed_at = if p.status == Status::Failed {
        // A failed payment never changes again: its last change is the failure.
        Some(p.updated_at_ms)
    } else {
        None
    };
    let (amount, refunded) = (p.amount.to_string(), p.refunded_amount.to_string());
    let fee = p.expected_fee.map(|f| f.to_string()).unwrap_or_default();
    let net = p.net_amount().map(|n| n.to_string()).unwrap_or_default();
    let (created, completed, failed) = (
        time(Some(p.created_at_ms)),
        time(p.completed_at_ms),
        time(failed_at),
    );
    row(
        out,
        [
            Cell::Ours(&p.id),
            Cell::Theirs(&p.reference),
            Cell::Ours(&created),
            Cell::Ours(p.status.as_str()),
            Cell::Ours(&p.country),
            Cell::Ours(p.operator.as_deref().unwrap_or_default()),
            Cell::Ours(p.mode.as_str()),
            Cell::Ours(&amount),
            Cell::Ours(&p.currency),
            Cell::Ours(&refunded),
            Cell::Ours(&completed),
            Cell::Ours(&failed),
            Cell::Theirs(
                p.failure
                    .as_ref()
                    .map(|f| f.code.as_str())
                    .unwrap_or_default(),
            ),
            Cell::Theirs(p.psp_reference.as_deref().unwrap_or_default()),
            Cell::Theirs(p.description.as_deref().unwrap_or_default()),
            Cell::Ours(&fee),
            Cell::Ours(&net),
        ],
    );
}

/// One CSV record (RFC 4180: CRLF, quoted when needed, quotes doubled).
fn row<'a>(out: &mut String, cells: impl IntoIterator<Item = Cell<'a>>) {
    for (i, cell) in cells.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let (text, neutralise) = match cell {
            Cell::Ours(t) => (t, false),
            Cell::Theirs(t) => (t, true),
        };
        // A cell a spreadsheet would read as a formula gets a leading `'` (OWASP).
        let formula = neutralise && text.starts_with(['=', '+', '-', '@', '\t', '\r']);
        let quote = text.contains([',', '"', '\r', '\n']);
        if quote {
            out.push('"');
        }
        if formula {
            out.push('\'');
        }
        if quote {
            out.push_str(&text.replace('"', "\"\""));
            out.push('"');
        } else {
            out.push_str(text);
        }
    }
    out.push_str("\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(cells: Vec<Cell<'_>>) -> String {
        let mut s = String::new();
        row(&mut s, cells);
        s
    }

    #[test]
    fn cells_are_escaped_and_formulas_neutralised() {
        assert_eq!(
            line(vec![
                Cell::Ours("a"),
                Cell::Theirs("b,c"),
                Cell::Theirs("say \"hi\""),
                Cell::Theirs("two\nlines"),
            ]),
            "a,\"b,c\",\"say \"\"hi\"\"\",\"two\nlines\"\r\n"
        );
        assert_eq!(
            line(vec![
                Cell::Theirs("=HYPERLINK(\"x\")"),
                Cell::Theirs("+1"),
                Cell::Theirs("-2"),
                Cell::Theirs("@SUM(A1)"),
                Cell::Theirs("a=b"),
                Cell::Ours("-"),
            ]),
            "\"'=HYPERLINK(\"\"x\"\")\",'+1,'-2,'@SUM(A1),a=b,-\r\n"
        );
    }

    #[test]
    fn the_next_query_keeps_the_filters_and_sets_the_cursor() {
        assert_eq!(
            next_query(
                "created%5Bgte%5D=10&status=completed&starting_after=x",
                20,
                "id"
            ),
            "created%5Bgte%5D=10&status=completed&created%5Blt%5D=20&starting_after=id"
        );
        assert_eq!(
            next_query("created[gte]=10&created[lt]=30", 30, "id"),
            "created[gte]=10&created%5Blt%5D=30&starting_after=id"
        );
        assert_eq!(compact_time(1_780_272_000), "20260601T000000Z");
    }
}
