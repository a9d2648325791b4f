//! A payment's page: what it is, its refunds, and its timeline (every
//! event of the payment and its refunds with their webhook deliveries, and
//! every call made to the operator).

use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::Value;

use crate::payments::{operator_name, phone_of};
use mmc_console_kit::api::{self, Reading};
use mmc_console_kit::blocking;
use mmc_console_kit::format::{self, Zone};
use mmc_console_kit::html::{self, esc, t};
use mmc_console_kit::outcomes;
use mmc_console_kit::sessions::Session;
use mmc_console_kit::users::Role;
use mmc_console_kit::web::{self, ConsoleError, Req};
use mmc_http::App;

mod route;

use mmc_console_kit::format::event_ms;
use route::route_section;

type Resp = Response<Full<Bytes>>;

pub(super) async fn get_payment(
    app: &Arc<App>,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Value, ConsoleError> {
    let answer = api::call(
        app,
        s,
        "GET",
        &format!("/api/v1/collect/payments/{id}"),
        None,
        None,
        &req.request_id,
    )
    .await?;
    match answer.status {
        200 => Ok(answer.value()),
        404 => Err(ConsoleError::NotFound),
        _ => Err(answer.refusal(req.lang)),
    }
}

/// What the payment is: reference, status (with a failure's reason and
/// what to do next), amount, operator, phone, times in the merchant's zone.
fn facts(l: html::Lang, zone: Zone, p: &Value) -> String {
    let text = |key: &str| p[key].as_str().unwrap_or_default().to_string();
    let mut rows: Vec<(&str, String)> = vec![
        ("reference", esc(&text("reference"))),
        ("status", outcomes::status_cell(l, p)),
        ("amount", esc(&format::money_of(l, p))),
        ("operator", esc(operator_name(&text("operator")))),
        ("phone", esc(&phone_of(p))),
        (
            "created",
            esc(&format::when_text(zone, &text("created_at"))),
        ),
    ];
    if let Some(done) = p["completed_at"].as_str() {
        rows.push(("completed_at", esc(&format::when_text(zone, done))));
    }
    if let Some(desc) = p["description"].as_str().filter(|d| !d.is_empty()) {
        rows.push(("description", esc(desc)));
    }
    let mut body = outcomes::failure_block(l, p);
    body.push_str("<dl class=\"facts\">");
    for (label, value) in rows {
        let _ = write!(body, "<dt>{}</dt><dd>{value}</dd>", t(l, label));
    }
    body.push_str("</dl>");
    body
}

/// A payment's refunds in figures: what was refunded, what is on its way,
/// and what may still be refunded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RefundTotals {
    pub refunded: u64,
    pub in_progress: u64,
    pub remaining: u64,
}

impl RefundTotals {
    pub(super) fn of(p: &Value, refunds: &[Value]) -> RefundTotals {
        let sum = |status: &str| -> u64 {
            refunds
                .iter()
                .filter(|r| r["status"].as_str() == Some(status))
                .filter_map(|r| r["amount"].as_u64())
                .sum()
        };
        let (refunded, in_progress) = (sum("completed"), sum("pending"));
        let amount = p["amount"].as_u64().unwrap_or(0);
        RefundTotals {
            refunded,
            in_progress,
            remaining: amount.saturating_sub(refunded + in_progress),
        }
    }
}

fn refunds_section(
    l: html::Lang,
    zone: Zone,
    p: &Value,
    refunds: &[Value],
    totals: RefundTotals,
) -> String {
    let currency = p["currency"].as_str().unwrap_or_default();
    let money = |a: u64| esc(&format::money(l, a as i64, currency));
    let mut body = format!(
        "<h2>{}</h2><dl class=\"totals\"><dt>{}</dt><dd>{}</dd><dt>{}</dt><dd>{}</dd><dt>{}</dt><dd>{}</dd></dl>",
        t(l, "refunds"),
        t(l, "refunded_total"),
        money(totals.refunded),
        t(l, "refund_in_progress"),
        money(totals.in_progress),
        t(l, "refund_remaining"),
        money(totals.remaining),
    );
    if refunds.is_empty() {
        return body;
    }
    let _ = write!(
        body,
        "<table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "created"),
        t(l, "amount"),
        t(l, "status"),
        t(l, "reason"),
    );
    for r in refunds {
        let _ = write!(
            body,
            "<tr><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
            esc(&format::when_text(
                zone,
                r["created_at"].as_str().unwrap_or_default()
            )),
            esc(&format::money_of(l, r)),
            outcomes::status_cell(l, r),
            esc(&outcomes::refund_reason(
                l,
                r["reason"].as_str().unwrap_or_default()
            )),
        );
    }
    body.push_str("</tbody></table>");
    body
}

/// Whether a payment of this API status may still be cancelled (as
/// `Status::is_cancellable` has them: only one still in progress).
pub(super) fn cancellable(status: &str) -> bool {
    matches!(
        status,
        "pending" | "awaiting_otp" | "awaiting_payment" | "processing"
    )
}

/// The actions the person may take on the payment as it stands: a refund
/// for a completed payment with something left to refund, a cancel for one
/// still in progress, each only for a role whose scopes allow it (the API
/// refuses the others all the same).
fn actions(l: html::Lang, s: &Session, p: &Value, totals: RefundTotals, id_e: &str) -> String {
    let scopes = s.role.scopes();
    let status = p["status"].as_str().unwrap_or_default();
    let mut links = Vec::new();
    if status == "completed"
        && totals.remaining > 0
        && scopes
            .allow("POST", "/api/v1/collect/payments/x/refunds")
            .is_ok()
    {
        links.push(format!(
            "<a class=\"button\" href=\"/console/payments/{id_e}/refund\">{}</a>",
            t(l, "refund")
        ));
    }
    if cancellable(status)
        && scopes
            .allow("POST", "/api/v1/collect/payments/x/cancel")
            .is_ok()
    {
        links.push(format!(
            "<a class=\"button danger\" href=\"/console/payments/{id_e}/cancel\">{}</a>",
            t(l, "cancel")
        ));
    }
    if links.is_empty() {
        String::new()
    } else {
        format!("<p class=\"actions\">{}</p>", links.join(" "))
    }
}

/// What the books say of the payment: the provider's fee by its rate card
/// and the net, and, once its day was reconciled, the category it landed in
/// (a link to its case for the people who settle them).
fn books_section(
    app: &App,
    l: html::Lang,
    s: &Session,
    p: &Value,
    adapter: &str,
) -> Result<String, ConsoleError> {
    let (Some(amount), Some(currency)) = (p["amount"].as_u64(), p["currency"].as_str()) else {
        return Ok(String::new());
    };
    let operator = p["operator"].as_str();
    let books = &app.books;
    let mut out = format!("<h2>{}</h2><ul>", t(l, "books"));
    match books.rate_card_fee(adapter, operator, mmc_books::Kind::Collection, amount) {
        Some(fee) => {
            let _ = write!(
                out,
                "<li>{}: {} · {}: {}</li>",
                t(l, "expected_fee"),
                esc(&format::money(l, fee as i64, currency)),
                t(l, "net"),
                esc(&format::money(
                    l,
                    amount.saturating_sub(fee) as i64,
                    currency
                )),
            );
        }
        None => {
            let _ = write!(out, "<li>{}</li>", t(l, "no_rate_card"));
        }
    }
    let created = p["created_at"].as_str().and_then(mmc_domain::time::ms_of);
    let id = p["id"].as_str().unwrap_or_default();
    if let Some(day) = created.map(mmc_reconciliation::Day::of_ms) {
        let line = blocking(|| books.line(adapter, day, id))
            .map_err(|e| ConsoleError::Unavailable(e.to_string()))?;
        match line {
            Some(line) => {
                let case = mmc_reconciliation::cases::case_id(adapter, id);
                let finance = matches!(s.role, Role::Finance | Role::Owner);
                let link = if line.category.is_mismatch() && finance {
                    format!(
                        " · <a href=\"/console/finance/cases/{case}\">{}</a>",
                        t(l, "the_case")
                    )
                } else {
                    String::new()
                };
                let _ = write!(
                    out,
                    "<li>{} {day}: <strong>{}</strong>{link}</li>",
                    t(l, "reconciled_on"),
                    t(l, line.category.as_str()),
                );
            }
            None => {
                let _ = write!(out, "<li>{}</li>", t(l, "not_reconciled_yet"));
            }
        }
    }
    out.push_str("</ul>");
    Ok(out)
}

/// The payment and its refunds (its first 100, newest first), as the API
/// gives them to the person.
pub(super) async fn payment_with_refunds(
    app: &Arc<App>,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<(Value, Vec<Value>), ConsoleError> {
    let p = get_payment(app, req, s, id).await?;
    let refunds = api::call(
        app,
        s,
        "GET",
        &format!("/api/v1/collect/payments/{id}/refunds?limit=100"),
        None,
        None,
        &req.request_id,
    )
    .await?;
    let list = refunds.value()["data"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok((p, list))
}

pub async fn show(app: &Arc<App>, req: &Req, s: &Session, id: &str) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let (p, refund_list) = payment_with_refunds(app, req, s, id).await?;
    let mut body = String::new();
    if let Some(done) = req.param("done") {
        let said = match done.as_str() {
            "cancelled" => t(l, "payment_cancelled"),
            "resend" => t(l, "resent"),
            _ => t(l, "refund_asked"),
        };
        body.push_str(&html::notice(said, false));
    }
    body.push_str(&facts(l, s.zone, &p));
    let id_e = esc(p["id"].as_str().unwrap_or(id));
    let totals = RefundTotals::of(&p, &refund_list);
    body.push_str(&actions(l, s, &p, totals, &id_e));
    body.push_str(&refunds_section(l, s.zone, &p, &refund_list, totals));
    let route = api::call(
        app,
        s,
        "GET",
        &format!("/api/v1/collect/payments/{id}/route"),
        None,
        None,
        &req.request_id,
    )
    .await?;
    if route.status == 200 {
        let route = route.value();
        body.push_str(&route_section(l, &route));
        if let Some(adapter) = route["adapter"].as_str() {
            body.push_str(&books_section(app, l, s, &p, adapter)?);
        }
    }
    let mut subjects = vec![p["id"].as_str().unwrap_or(id).to_string()];
    subjects.extend(
        refund_list
            .iter()
            .filter_map(|r| r["id"].as_str())
            .map(str::to_string),
    );
    body.push_str(&timeline(app, l, s, &subjects)?);
    Ok(web::page_response(
        200,
        html::page(
            l,
            Some(s),
            &format!(
                "{} {}",
                t(l, "payments"),
                p["reference"].as_str().unwrap_or(id)
            ),
            &body,
        ),
    ))
}

/// The last answer of a delivery: its HTTP status, else what went wrong.
pub(super) fn answer_of(attempt: &Value, delivery: &Value) -> String {
    match attempt["status_code"].as_u64() {
        Some(code) => format!("HTTP {code}"),
        None => attempt["error"]
            .as_str()
            .or(delivery["last_error"].as_str())
            .unwrap_or("–")
            .to_string(),
    }
}

/// An event's webhook deliveries: where, how it went, the last answer.
fn deliveries_list(l: html::Lang, list: &[Value]) -> String {
    if list.is_empty() {
        return String::new();
    }
    let mut out = format!("<ul aria-label=\"{}\">", t(l, "deliveries"));
    for d in list {
        let last = d["attempts"]
            .as_array()
            .and_then(|a| a.last().cloned())
            .unwrap_or(Value::Null);
        let _ = write!(
            out,
            "<li>{} → {} · {} {} · {}</li>",
            esc(d["url"].as_str().unwrap_or_default()),
            esc(&outcomes::word_of(
                l,
                "dl_",
                d["status"].as_str().unwrap_or_default()
            )),
            esc(&d["attempt_count"].to_string()),
            t(l, "attempts"),
            esc(&answer_of(&last, d))
        );
    }
    out.push_str("</ul>");
    out
}

/// The calls made to the operator for the payment and its refunds.
fn operator_calls(app: &Arc<App>, l: html::Lang, zone: Zone, subjects: &[String]) -> String {
    let calls: Vec<_> = subjects
        .iter()
        .flat_map(|id| blocking(|| app.runtime.services.audit.calls_for(id)).unwrap_or_default())
        .collect();
    let mut out = format!("<h2>{}</h2><ol>", t(l, "operator_calls"));
    for call in calls {
        let _ = write!(
            out,
            "<li>{} · {} · {} · {} ({:.0} ms)</li>",
            zone.when(call.at_ms),
            esc(&call.operator),
            esc(&outcomes::word_of(l, "op_", &call.operation)),
            esc(&outcomes::word_of(l, "oc_", &call.outcome)),
            call.duration_ms
        );
    }
    out.push_str("</ol>");
    out
}

/// Events (each status change of the payment and of its refunds) with
/// their webhook deliveries, and the calls made to the operator, oldest first.
fn timeline(
    app: &Arc<App>,
    l: html::Lang,
    s: &Session,
    subjects: &[String],
) -> Result<String, ConsoleError> {
    let mut out = format!("<h2>{}</h2><ol>", t(l, "timeline"));
    let scopes = s.role.scopes();
    let may_resend = scopes.allow("POST", "/api/v1/events/e/resend").is_ok();
    let may_read_deliveries = scopes.allow("GET", "/api/v1/events/e").is_ok();
    let mut events = Vec::new();
    for subject in subjects {
        let (found, _) = blocking(|| {
            app.webhooks.list_events(
                &s.merchant_id,
                s.environment,
                None,
                Some(subject),
                None,
                100,
            )
        })
        .map_err(|e| ConsoleError::Unavailable(e.to_string()))?;
        events.extend(found);
    }
    // RFC 3339 times of one format sort as text: newest first, as listed,
    // then read backwards.
    events.sort_by_key(|e| std::cmp::Reverse(event_ms(e)));
    // Where webhooks go and what they answered is the webhooks scope's
    // to see, as `GET /api/v1/events/{id}` is; read for every event at once.
    let mut deliveries = if may_read_deliveries {
        let ids: Vec<&str> = events.iter().filter_map(|e| e["id"].as_str()).collect();
        blocking(|| app.webhooks.deliveries_of(&s.merchant_id, &ids))
            .map_err(|e| ConsoleError::Unavailable(e.to_string()))?
    } else {
        Default::default()
    };
    for e in events.iter().rev() {
        let eid = e["id"].as_str().unwrap_or_default();
        let _ = write!(
            out,
            "<li>{} · <strong>{}</strong>",
            s.zone.when(event_ms(e)),
            esc(e["type"].as_str().unwrap_or_default())
        );
        if may_resend {
            let _ = write!(
                out,
                " <form method=\"post\" action=\"/console/events/{}/resend\" class=\"inline\">{}\
                 <input type=\"hidden\" name=\"payment\" value=\"{}\"><button>{}</button></form>",
                esc(eid),
                html::csrf_field(s),
                esc(&subjects[0]),
                t(l, "resend")
            );
        }
        if let Some(list) = deliveries.remove(eid) {
            out.push_str(&deliveries_list(l, &list));
        }
        out.push_str("</li>");
    }
    out.push_str("</ol>");
    out.push_str(&operator_calls(app, l, s.zone, subjects));
    Ok(out)
}

/// `POST /console/events/{id}/resend`: the event's deliveries, queued again
/// by the API's resend (scope `webhooks:resend` or `webhooks:manage`).
pub async fn resend(
    app: &Arc<App>,
    c: &mmc_console_kit::Console,
    req: &Req,
    s: &Session,
    event_id: &str,
) -> Result<Resp, ConsoleError> {
    let action = api::Action {
        method: "POST",
        target: &format!("/api/v1/events/{event_id}/resend"),
        body: None,
        audit: "event.resend",
        subject: Some(event_id),
    };
    api::perform(app, c, req, s, action, |answer| {
        Some(format!(
            "{} deliveries",
            answer.value()["deliveries_queued"]
        ))
    })
    .await?;
    let plain_id = event_id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if req.field("back").as_deref() == Some("events") && plain_id {
        return Ok(web::redirect(&format!(
            "/console/developers/events/{event_id}?done=resend"
        )));
    }
    let back = match req.field("payment") {
        Some(p)
            if p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') =>
        {
            format!("/console/payments/{p}?done=resend")
        }
        _ => "/console/payments".to_string(),
    };
    Ok(web::redirect(&back))
}
