//! A payment's page: what it is, its refunds, and its timeline (every
//! event of the payment and its refunds with their webhook deliveries, and
//! every call made to the operator).

use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::Value;

use super::api;
use super::blocking;
use super::html::{self, esc, t, when};
use super::payments::phone_of;
use super::sessions::Session;
use super::users::Role;
use super::web::{self, ConsoleError, Req};
use crate::http::App;

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
        200 => Ok(answer.json()),
        404 => Err(ConsoleError::NotFound),
        _ => Err(answer.refusal(req.lang)),
    }
}

/// What the payment is: reference, status, amount, operator, phone.
fn facts(l: html::Lang, p: &Value) -> String {
    let mut body = String::new();
    let _ = write!(body, "<dl>");
    for (label, key) in [
        ("reference", "reference"),
        ("status", "status"),
        ("amount", "amount"),
        ("operator", "operator"),
        ("created", "created_at"),
    ] {
        let v = match &p[key] {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            v => v.to_string(),
        };
        let _ = write!(body, "<dt>{}</dt><dd>{}</dd>", t(l, label), esc(&v));
    }
    let _ = write!(
        body,
        "<dt>{}</dt><dd>{}</dd></dl>",
        t(l, "phone"),
        esc(&phone_of(p))
    );
    body
}

fn refunds_section(l: html::Lang, refunds: &[Value]) -> String {
    let mut body = String::new();
    let _ = write!(body, "<h2>{}</h2><ul>", t(l, "refunds"));
    for r in refunds {
        let _ = write!(
            body,
            "<li>{} · {} {} · {} · {}</li>",
            esc(r["id"].as_str().unwrap_or_default()),
            esc(&r["amount"].to_string()),
            esc(r["currency"].as_str().unwrap_or_default()),
            esc(r["status"].as_str().unwrap_or_default()),
            esc(r["created_at"].as_str().unwrap_or_default())
        );
    }
    body.push_str("</ul>");
    body
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
                "<li>{}: {fee} {cur} · {}: {} {cur}</li>",
                t(l, "expected_fee"),
                t(l, "net"),
                amount.saturating_sub(fee),
                cur = esc(currency),
            );
        }
        None => {
            let _ = write!(out, "<li>{}</li>", t(l, "no_rate_card"));
        }
    }
    let created = p["created_at"].as_str().and_then(mmc_domain::time::ms_of);
    let id = p["id"].as_str().unwrap_or_default();
    if let Some(day) = created.map(crate::books::Day::of_ms) {
        let line = blocking(|| books.line(adapter, day, id))
            .map_err(|e| ConsoleError::Unavailable(e.to_string()))?;
        match line {
            Some(line) => {
                let case = crate::books::cases::case_id(adapter, id);
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

/// The provider route the payment went through, why, and the routes that
/// answered before it that nothing was done.
fn route_section(l: html::Lang, r: &Value) -> String {
    let Some(adapter) = r["adapter"].as_str() else {
        return String::new();
    };
    let e = &r["explanation"];
    let mut out = format!(
        "<h2>{}</h2><p><strong>{}</strong> · {} · {}</p><ul>",
        t(l, "route"),
        esc(adapter),
        esc(e["reason"].as_str().unwrap_or_default()),
        esc(e["rule"].as_str().unwrap_or_default())
    );
    for c in e["candidates"].as_array().into_iter().flatten() {
        let _ = write!(
            out,
            "<li>{} · {} · {}</li>",
            esc(c["adapter"].as_str().unwrap_or_default()),
            esc(c["verdict"].as_str().unwrap_or_default()),
            esc(c["note"].as_str().unwrap_or_default())
        );
    }
    out.push_str("</ul>");
    let tried = r["tried"].as_array().map(Vec::as_slice).unwrap_or_default();
    if !tried.is_empty() {
        let _ = write!(out, "<p>{}</p><ul>", t(l, "route_tried"));
        for tr in tried {
            let _ = write!(
                out,
                "<li>{} · {} · {}</li>",
                esc(tr["adapter"].as_str().unwrap_or_default()),
                esc(tr["code"].as_str().unwrap_or_default()),
                esc(tr["message"].as_str().unwrap_or_default())
            );
        }
        out.push_str("</ul>");
    }
    out
}

pub async fn show(app: &Arc<App>, req: &Req, s: &Session, id: &str) -> Result<Resp, ConsoleError> {
    let l = req.lang;
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
    let mut body = String::new();
    if let Some(done) = req.param("done") {
        body.push_str(&html::notice(&format!("{} ({done})", t(l, "done")), false));
    }
    body.push_str(&facts(l, &p));
    let id_e = esc(p["id"].as_str().unwrap_or(id));
    let _ = write!(
        body,
        "<p><a href=\"/console/payments/{id_e}/refund\">{}</a> · <a href=\"/console/payments/{id_e}/cancel\">{}</a></p>",
        t(l, "refund"),
        t(l, "cancel")
    );
    let refund_list = refunds.json()["data"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    body.push_str(&refunds_section(l, &refund_list));
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
        let route = route.json();
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

/// When an event happened: its envelope's `created`, in Unix seconds.
pub(super) fn event_ms(e: &Value) -> u64 {
    e["created"].as_u64().unwrap_or(0) * 1000
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
            esc(d["status"].as_str().unwrap_or_default()),
            esc(&d["attempt_count"].to_string()),
            t(l, "attempts"),
            esc(&answer_of(&last, d))
        );
    }
    out.push_str("</ul>");
    out
}

/// The calls made to the operator for the payment and its refunds.
fn operator_calls(app: &Arc<App>, l: html::Lang, subjects: &[String]) -> String {
    let calls: Vec<_> = subjects
        .iter()
        .flat_map(|id| blocking(|| app.runtime.services.audit.calls_for(id)).unwrap_or_default())
        .collect();
    let mut out = format!("<h2>{}</h2><ol>", t(l, "operator_calls"));
    for call in calls {
        let _ = write!(
            out,
            "<li>{} · {} · {} · {} ({:.0} ms)</li>",
            when(call.at_ms),
            esc(&call.operator),
            esc(&call.operation),
            esc(&call.outcome),
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
            when(event_ms(e)),
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
    out.push_str(&operator_calls(app, l, subjects));
    Ok(out)
}

/// `POST /console/events/{id}/resend`: the event's deliveries, queued again
/// by the API's resend (scope `webhooks:resend` or `webhooks:manage`).
pub async fn resend(
    app: &Arc<App>,
    c: &super::Console,
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
        Some(format!("{} deliveries", answer.json()["deliveries_queued"]))
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
