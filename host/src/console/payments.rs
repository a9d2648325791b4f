//! Payments: the filtered list (newest first, paged), its CSV, a payment's
//! page with its timeline, and refund and cancel behind a confirmation
//! step. Every read and action goes through the API ([`super::api`]).

use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::{Value, json};

use super::api::{self, Answer};
use super::html::{self, esc, t, tf, when};
use super::sessions::Session;
use super::web::{self, ConsoleError, Req, check_csrf};
use super::{Console, blocking};
use crate::http::App;

type Resp = Response<Full<Bytes>>;

const PAGE: usize = 50;
/// Pages of 100 read to find payments by phone (the API has no such filter).
const PHONE_SCAN_PAGES: usize = 20;
/// Rows a CSV export holds at most.
const CSV_MAX_ROWS: usize = 10_000;
const STATUSES: [&str; 9] = [
    "pending",
    "awaiting_otp",
    "awaiting_payment",
    "processing",
    "completed",
    "failed",
    "cancelled",
    "expired",
    "refunded",
];

/// `YYYY-MM-DD` as Unix seconds at 00:00 UTC.
pub(super) fn date_secs(s: &str) -> Option<u64> {
    let mut it = s.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (it.next()??, it.next()??, it.next()??);
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Days from civil (H. Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(((era * 146_097 + doe - 719_468) * 86_400) as u64)
}

/// The list's filters as the console's query has them, and as the API's.
struct Filters {
    console: Vec<(&'static str, String)>,
    api: Vec<(&'static str, String)>,
    phone: Option<String>,
}

fn filters(req: &Req) -> Result<Filters, ConsoleError> {
    let mut f = Filters {
        console: Vec::new(),
        api: Vec::new(),
        phone: None,
    };
    for name in ["status", "operator", "reference"] {
        if let Some(v) = req.param(name) {
            f.console.push((name, v.clone()));
            f.api.push((name, v));
        }
    }
    for (name, api_name, shift) in [("from", "created[gte]", 0), ("to", "created[lt]", 86_400)] {
        if let Some(v) = req.param(name) {
            let secs = date_secs(&v).ok_or_else(|| {
                ConsoleError::Refused(400, format!("{name}: a date as YYYY-MM-DD, not '{v}'."))
            })?;
            f.console.push((name, v));
            f.api.push((api_name, (secs + shift).to_string()));
        }
    }
    if let Some(v) = req.param("phone") {
        let digits: String = v.chars().filter(char::is_ascii_digit).collect();
        if digits.len() < 4 {
            return Err(ConsoleError::Refused(
                400,
                "phone: at least 4 digits.".into(),
            ));
        }
        f.console.push(("phone", v));
        f.phone = Some(digits);
    }
    Ok(f)
}

fn encode(pairs: &[(&str, String)]) -> String {
    let mut s = url::form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}

fn phone_of(p: &Value) -> String {
    p["customer"]["phone"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Up to `want` payments matching the filters, newest first, after `after`;
/// and the id to continue after, when more may follow.
async fn fetch(
    app: &Arc<App>,
    s: &Session,
    req: &Req,
    f: &Filters,
    mut after: Option<String>,
    want: usize,
) -> Result<(Vec<Value>, Option<String>), ConsoleError> {
    let mut out = Vec::new();
    let limit = if f.phone.is_some() {
        100
    } else {
        want.min(100)
    };
    let max_pages = if f.phone.is_some() {
        PHONE_SCAN_PAGES
    } else {
        want.div_ceil(limit)
    };
    for _ in 0..max_pages {
        let mut q = f.api.clone();
        q.push(("limit", limit.to_string()));
        if let Some(a) = &after {
            q.push(("starting_after", a.clone()));
        }
        let target = format!("/api/v1/collect/payments?{}", encode(&q));
        let answer = api::call(app, s, "GET", &target, None, None, &req.request_id).await?;
        if !answer.ok() {
            return Err(answer.refusal());
        }
        let body = answer.json();
        let data = body["data"].as_array().cloned().unwrap_or_default();
        let more = body["has_more"].as_bool().unwrap_or(false);
        after = data
            .last()
            .and_then(|p| p["id"].as_str())
            .map(str::to_string);
        for p in data {
            if f.phone
                .as_ref()
                .is_none_or(|d| phone_of(&p).ends_with(d.as_str()))
            {
                out.push(p);
            }
        }
        if !more {
            return Ok((out, None));
        }
        if out.len() >= want {
            break;
        }
    }
    out.truncate(want);
    let next = if f.phone.is_some() {
        after
    } else {
        out.last()
            .and_then(|p| p["id"].as_str())
            .map(str::to_string)
    };
    Ok((out, next))
}

fn filter_form(l: html::Lang, f: &Filters) -> String {
    let get = |k: &str| {
        f.console
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| esc(v))
            .unwrap_or_default()
    };
    let status = get("status");
    let options: String = STATUSES
        .iter()
        .map(|s| {
            format!(
                "<option{}>{s}</option>",
                if status == *s { " selected" } else { "" }
            )
        })
        .collect();
    format!(
        "<form method=\"get\" action=\"/console/payments\"><fieldset>\
         <label>{st}<select name=\"status\"><option value=\"\">{any}</option>{options}</select></label>\
         <label>{op}<input name=\"operator\" value=\"{o}\" placeholder=\"mtn-bj\"></label>\
         <label>{from}<input name=\"from\" type=\"date\" value=\"{fr}\"></label>\
         <label>{to}<input name=\"to\" type=\"date\" value=\"{tv}\"></label>\
         <label>{rf}<input name=\"reference\" value=\"{r}\"></label>\
         <label>{ph}<input name=\"phone\" type=\"tel\" value=\"{p}\"></label>\
         <button>{filter}</button></fieldset></form>",
        st = t(l, "status"),
        any = t(l, "any"),
        op = t(l, "operator"),
        o = get("operator"),
        from = t(l, "from"),
        fr = get("from"),
        to = t(l, "to"),
        tv = get("to"),
        rf = t(l, "reference"),
        r = get("reference"),
        ph = t(l, "phone"),
        p = get("phone"),
        filter = t(l, "filter"),
    )
}

pub async fn list(app: &Arc<App>, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let f = match filters(req) {
        Ok(f) => f,
        Err(ConsoleError::Refused(status, m)) => {
            let body = format!(
                "{}{}",
                html::notice(&m, true),
                filter_form(
                    l,
                    &Filters {
                        console: Vec::new(),
                        api: Vec::new(),
                        phone: None
                    }
                )
            );
            return Ok(web::page_response(
                status,
                html::page(l, Some(s), t(l, "payments"), &body),
            ));
        }
        Err(e) => return Err(e),
    };
    let mut body = filter_form(l, &f);
    let (payments, next) = match fetch(app, s, req, &f, req.param("after"), PAGE).await {
        Ok(found) => found,
        Err(ConsoleError::Refused(400, m)) => {
            body.insert_str(0, &html::notice(&m, true));
            return Ok(web::page_response(
                400,
                html::page(l, Some(s), t(l, "payments"), &body),
            ));
        }
        Err(e) => return Err(e),
    };
    let _ = write!(
        body,
        "<p><a href=\"/console/payments.csv?{}\">{}</a></p>",
        esc(&encode(&f.console)),
        t(l, "export_csv")
    );
    if payments.is_empty() {
        let _ = write!(body, "<p>{}</p>", t(l, "none"));
    } else {
        let _ = write!(
            body,
            "<table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
            t(l, "created"),
            t(l, "reference"),
            t(l, "status"),
            t(l, "amount"),
            t(l, "operator"),
            t(l, "phone")
        );
        for p in &payments {
            let id = p["id"].as_str().unwrap_or_default();
            let _ = write!(
                body,
                "<tr><td>{}</td><td><a href=\"/console/payments/{}\">{}</a></td><td>{}</td><td>{} {}</td><td>{}</td><td>{}</td></tr>",
                esc(p["created_at"].as_str().unwrap_or_default()),
                esc(id),
                esc(p["reference"].as_str().unwrap_or(id)),
                esc(p["status"].as_str().unwrap_or_default()),
                p["amount"],
                esc(p["currency"].as_str().unwrap_or_default()),
                esc(p["operator"].as_str().unwrap_or_default()),
                esc(&phone_of(p)),
            );
        }
        body.push_str("</tbody></table>");
    }
    if let Some(next) = next {
        let mut q = f.console.clone();
        q.push(("after", next));
        let _ = write!(
            body,
            "<p><a rel=\"next\" href=\"/console/payments?{}\">{} →</a></p>",
            esc(&encode(&q)),
            t(l, "older")
        );
    }
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "payments"), &body),
    ))
}

/// A CSV field, quoted when needed; a leading `= + - @` is defused so a
/// spreadsheet does not run it as a formula.
fn csv_field(v: &str) -> String {
    let v = if v.starts_with(['=', '+', '-', '@']) {
        format!("'{v}")
    } else {
        v.to_string()
    };
    if v.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v
    }
}

/// `GET /console/payments.csv`: the filtered list, as the page has it.
pub async fn csv(app: &Arc<App>, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    let f = filters(req)?;
    let (payments, more) = fetch(app, s, req, &f, None, CSV_MAX_ROWS).await?;
    let columns = [
        "id",
        "reference",
        "created_at",
        "status",
        "country",
        "operator",
        "mode",
        "amount",
        "currency",
        "phone",
        "completed_at",
        "failure_code",
        "psp_reference",
        "description",
    ];
    let mut out = columns.join(",");
    out.push_str("\r\n");
    for p in &payments {
        let row: Vec<String> = columns
            .iter()
            .map(|c| match *c {
                "phone" => csv_field(&phone_of(p)),
                c => csv_field(&match &p[c] {
                    Value::String(s) => s.clone(),
                    Value::Null => String::new(),
                    v => v.to_string(),
                }),
            })
            .collect();
        out.push_str(&row.join(","));
        out.push_str("\r\n");
    }
    let mut resp = web::body_response(200, "text/csv; charset=utf-8", out.into_bytes());
    let h = resp.headers_mut();
    h.insert(
        "content-disposition",
        hyper::header::HeaderValue::from_static("attachment; filename=\"payments.csv\""),
    );
    if more.is_some() {
        // More than the export holds: the client is told, not left to guess.
        h.insert(
            "x-mmc-truncated",
            hyper::header::HeaderValue::from_static("true"),
        );
    }
    Ok(resp)
}

async fn get_payment(
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
        _ => Err(answer.refusal()),
    }
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
        esc(&phone_of(&p))
    );
    let id_e = esc(p["id"].as_str().unwrap_or(id));
    let _ = write!(
        body,
        "<p><a href=\"/console/payments/{id_e}/refund\">{}</a> · <a href=\"/console/payments/{id_e}/cancel\">{}</a></p>",
        t(l, "refund"),
        t(l, "cancel")
    );
    let _ = write!(body, "<h2>{}</h2><ul>", t(l, "refunds"));
    let refund_list = refunds.json()["data"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for r in &refund_list {
        let _ = write!(
            body,
            "<li>{} · {} {} · {} · {}</li>",
            esc(r["id"].as_str().unwrap_or_default()),
            r["amount"],
            esc(r["currency"].as_str().unwrap_or_default()),
            esc(r["status"].as_str().unwrap_or_default()),
            esc(r["created_at"].as_str().unwrap_or_default())
        );
    }
    body.push_str("</ul>");
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

/// Events (each status change of the payment and of its refunds) with
/// their webhook deliveries, and the calls made to the operator, oldest first.
fn timeline(
    app: &Arc<App>,
    l: html::Lang,
    s: &Session,
    subjects: &[String],
) -> Result<String, ConsoleError> {
    let mut out = format!("<h2>{}</h2><ol>", t(l, "timeline"));
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
    events.sort_by(|a, b| b["created_at"].as_str().cmp(&a["created_at"].as_str()));
    for e in events.iter().rev() {
        let eid = e["id"].as_str().unwrap_or_default();
        let _ = write!(
            out,
            "<li>{} · <strong>{}</strong>",
            esc(e["created_at"].as_str().unwrap_or_default()),
            esc(e["type"].as_str().unwrap_or_default())
        );
        if let Ok(full) = blocking(|| app.webhooks.event(&s.merchant_id, s.environment, eid)) {
            let deliveries = full["deliveries"].as_array().cloned().unwrap_or_default();
            if !deliveries.is_empty() {
                let _ = write!(out, "<ul aria-label=\"{}\">", t(l, "deliveries"));
                for d in deliveries {
                    let last = d["attempts"]
                        .as_array()
                        .and_then(|a| a.last().cloned())
                        .unwrap_or(Value::Null);
                    let _ = write!(
                        out,
                        "<li>{} → {} ({} × {}, HTTP {})</li>",
                        esc(d["url"].as_str().unwrap_or_default()),
                        esc(d["status"].as_str().unwrap_or_default()),
                        d["attempt_count"],
                        t(l, "deliveries"),
                        last["status_code"]
                    );
                }
                out.push_str("</ul>");
            }
        }
        out.push_str("</li>");
    }
    out.push_str("</ol>");
    let calls: Vec<_> = subjects
        .iter()
        .flat_map(|id| blocking(|| app.runtime.services.audit.calls_for(id)).unwrap_or_default())
        .collect();
    let _ = write!(out, "<h2>{}</h2><ol>", t(l, "operator_calls"));
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
    Ok(out)
}

fn reason_select(l: html::Lang, chosen: &str) -> String {
    let options: String = [
        "requested_by_customer",
        "duplicate",
        "fraudulent",
        "customer_dispute",
        "other",
    ]
    .iter()
    .map(|r| {
        format!(
            "<option{}>{r}</option>",
            if *r == chosen { " selected" } else { "" }
        )
    })
    .collect();
    format!(
        "<label>{}<select name=\"reason\">{options}</select></label>",
        t(l, "reason")
    )
}

/// `GET /console/payments/{id}/refund`: the amount and reason.
pub async fn refund_form(
    app: &Arc<App>,
    req: &Req,
    s: &Session,
    id: &str,
    error: Option<(u16, &str)>,
) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let p = get_payment(app, req, s, id).await?;
    let body = format!(
        "{msg}<form method=\"post\" action=\"/console/payments/{id}/refund\">{csrf}<input type=\"hidden\" name=\"step\" value=\"review\">\
         <label>{amount} ({max} {cur})<input name=\"amount\" inputmode=\"numeric\" value=\"{a}\"></label>{reason}<button>{refund}</button></form>",
        msg = error
            .map(|(_, m)| html::notice(m, true))
            .unwrap_or_default(),
        id = esc(id),
        csrf = html::csrf_field(s),
        amount = t(l, "amount_blank"),
        max = p["amount"],
        cur = esc(p["currency"].as_str().unwrap_or_default()),
        a = esc(&req.field("amount").unwrap_or_default()),
        reason = reason_select(l, &req.field("reason").unwrap_or_default()),
        refund = t(l, "refund"),
    );
    Ok(web::page_response(
        error.map_or(200, |(st, _)| st),
        html::page(l, Some(s), t(l, "refund"), &body),
    ))
}

/// `POST /console/payments/{id}/refund`: `step=review` shows what will be
/// refunded, with a fresh Idempotency-Key in the form; `step=confirm` sends
/// it. A double submit carries the same key, so it is one refund.
pub async fn refund(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    let l = req.lang;
    let path = format!("/api/v1/collect/payments/{id}/refunds");
    // Refused before the confirmation, by the check the action itself passes.
    s.role.scopes().allow("POST", &path).map_err(|n| {
        ConsoleError::Forbidden(
            n.iter()
                .map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join(" or "),
        )
    })?;
    let amount = match req.field("amount") {
        None => None,
        Some(a) => match a.parse::<u64>() {
            Ok(n) if n >= 1 => Some(n),
            _ => {
                return refund_form(
                    app,
                    req,
                    s,
                    id,
                    Some((400, "amount: a whole number of at least 1.")),
                )
                .await;
            }
        },
    };
    let reason = req
        .field("reason")
        .unwrap_or_else(|| "requested_by_customer".into());
    if req.field("step").as_deref() != Some("confirm") {
        let p = get_payment(app, req, s, id).await?;
        let shown = match amount {
            Some(a) => format!("{a} {}", p["currency"].as_str().unwrap_or_default()),
            None => t(l, "amount_blank").to_string(),
        };
        let body = format!(
            "<p>{q}</p><form method=\"post\" action=\"/console/payments/{ide}/refund\">{csrf}\
             <input type=\"hidden\" name=\"step\" value=\"confirm\"><input type=\"hidden\" name=\"idempotency_key\" value=\"{key}\">\
             <input type=\"hidden\" name=\"amount\" value=\"{a}\"><input type=\"hidden\" name=\"reason\" value=\"{r}\">\
             <button class=\"danger\">{confirm}</button> <a href=\"/console/payments/{ide}\">{back}</a></form>",
            q = tf(
                l,
                "confirm_refund",
                &[&shown, p["reference"].as_str().unwrap_or(id)]
            ),
            ide = esc(id),
            csrf = html::csrf_field(s),
            key = uuid::Uuid::new_v4(),
            a = amount.map(|a| a.to_string()).unwrap_or_default(),
            r = esc(&reason),
            confirm = t(l, "confirm"),
            back = t(l, "back"),
        );
        return Ok(web::page_response(
            200,
            html::page(l, Some(s), t(l, "refund"), &body),
        ));
    }
    let key = req.field("idempotency_key").ok_or(ConsoleError::Csrf)?;
    let mut payload = json!({"reason": reason});
    if let Some(a) = amount {
        payload["amount"] = json!(a);
    }
    let answer: Answer = api::call(
        app,
        s,
        "POST",
        &path,
        Some(&payload),
        Some(&key),
        &req.request_id,
    )
    .await?;
    if !answer.ok() {
        let err = answer.refusal();
        return refund_form(app, req, s, id, Some((answer.status, &err.to_string()))).await;
    }
    let r = answer.json();
    let refund_id = r["id"].as_str().unwrap_or_default().to_string();
    if !r["idempotent_replay"].as_bool().unwrap_or(false) {
        let detail = format!("refund {refund_id} amount {} reason {reason}", r["amount"]);
        blocking(|| {
            c.audit.record(
                s,
                "payment.refund",
                Some(id),
                Some(&detail),
                req.client.as_deref(),
            )
        })?;
    }
    Ok(web::redirect(&format!(
        "/console/payments/{id}?done={refund_id}"
    )))
}

/// `GET /console/payments/{id}/cancel`: the confirmation.
pub async fn cancel_form(
    app: &Arc<App>,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let p = get_payment(app, req, s, id).await?;
    let body = format!(
        "<p>{q}</p><form method=\"post\" action=\"/console/payments/{ide}/cancel\">{csrf}\
         <button class=\"danger\">{confirm}</button> <a href=\"/console/payments/{ide}\">{back}</a></form>",
        q = tf(
            l,
            "confirm_cancel",
            &[p["reference"].as_str().unwrap_or(id)]
        ),
        ide = esc(id),
        csrf = html::csrf_field(s),
        confirm = t(l, "confirm"),
        back = t(l, "back"),
    );
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "cancel"), &body),
    ))
}

pub async fn cancel(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    let path = format!("/api/v1/collect/payments/{id}/cancel");
    let answer = api::call(
        app,
        s,
        "POST",
        &path,
        Some(&json!({})),
        None,
        &req.request_id,
    )
    .await?;
    if !answer.ok() {
        return Err(answer.refusal());
    }
    blocking(|| {
        c.audit
            .record(s, "payment.cancel", Some(id), None, req.client.as_deref())
    })?;
    Ok(web::redirect(&format!(
        "/console/payments/{id}?done=cancelled"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_and_csv_fields() {
        assert_eq!(date_secs("1970-01-01"), Some(0));
        assert_eq!(date_secs("2026-12-01"), Some(1_796_083_200));
        assert_eq!(date_secs("2026-13-01"), None);
        assert_eq!(date_secs("yesterday"), None);
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("=SUM(A1)"), "'=SUM(A1)");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }
}
