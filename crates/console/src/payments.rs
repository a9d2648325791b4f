//! Payments: the filtered list (newest first, paged) and its CSV, read
//! through the API ([`mmc_console_kit::api`]) as a key with the person's scopes would.

use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::Value;

use mmc_console_kit::api::{self, Reading};
use mmc_console_kit::format::date_secs;
use mmc_console_kit::html::plain;
use mmc_console_kit::html::{self, esc, t};
use mmc_console_kit::sessions::Session;
use mmc_console_kit::web::{self, ConsoleError, Req};
use mmc_console_kit::{format, outcomes};
use mmc_http::App;

type Resp = Response<Full<Bytes>>;

const PAGE: usize = 50;
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

/// The list's filters as the console's query has them, and as the API's.
struct Filters {
    console: Vec<(&'static str, String)>,
    api: Vec<(&'static str, String)>,
}

fn filters(req: &Req) -> Result<Filters, ConsoleError> {
    let mut f = Filters {
        console: Vec::new(),
        api: Vec::new(),
    };
    // `reference` is one exact reference (a link from elsewhere).
    for name in ["status", "operator", "reference"] {
        if let Some(v) = req.param(name) {
            f.console.push((name, v.clone()));
            f.api.push((name, v));
        }
    }
    // The search box finds a payment by the start of its reference,
    // whatever its case, or by the end of its customer's phone (the API's
    // `search`); `phone` is the same search, from older links.
    if let Some(v) = req.param("q").or_else(|| req.param("phone")) {
        if v.chars().count() > 100 {
            return Err(ConsoleError::Refused(400, t(req.lang, "bad_search").into()));
        }
        f.console.push(("q", v.clone()));
        f.api.push(("search", v));
    }
    for (name, api_name, shift) in [("from", "created[gte]", 0), ("to", "created[lt]", 86_400)] {
        if let Some(v) = req.param(name) {
            let secs = date_secs(&v).ok_or_else(|| {
                ConsoleError::Refused(400, plain(req.lang, "bad_date", &[t(req.lang, name), &v]))
            })?;
            f.console.push((name, v));
            f.api.push((api_name, (secs + shift).to_string()));
        }
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

pub(super) fn phone_of(p: &Value) -> String {
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
    let limit = want.min(100);
    for _ in 0..want.div_ceil(limit) {
        let mut q = f.api.clone();
        q.push(("limit", limit.to_string()));
        if let Some(a) = &after {
            q.push(("starting_after", a.clone()));
        }
        let target = format!("/api/v1/collect/payments?{}", encode(&q));
        let answer = api::call(app, s, "GET", &target, None, None, &req.request_id).await?;
        if !answer.ok() {
            return Err(answer.refusal(req.lang));
        }
        let body = answer.value();
        let data = body["data"].as_array().cloned().unwrap_or_default();
        let more = body["has_more"].as_bool().unwrap_or(false);
        after = data
            .last()
            .and_then(|p| p["id"].as_str())
            .map(str::to_string);
        out.extend(data);
        if !more {
            return Ok((out, None));
        }
        if out.len() >= want {
            break;
        }
    }
    out.truncate(want);
    let next = out
        .last()
        .and_then(|p| p["id"].as_str())
        .map(str::to_string);
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
                "<option value=\"{s}\"{}>{}</option>",
                if status == *s { " selected" } else { "" },
                esc(&outcomes::status(l, s))
            )
        })
        .collect();
    let operator = get("operator");
    let operators: String = mmc_domain::operators::OPERATORS
        .iter()
        .map(|o| {
            format!(
                "<option value=\"{}\"{}>{}</option>",
                o.slug,
                if operator == o.slug { " selected" } else { "" },
                esc(o.name)
            )
        })
        .collect();
    format!(
        "<form method=\"get\" action=\"/console/payments\"><fieldset>\
         <label>{st}<select name=\"status\"><option value=\"\">{any}</option>{options}</select></label>\
         <label>{op}<select name=\"operator\"><option value=\"\">{any}</option>{operators}</select></label>\
         <label>{from}<input name=\"from\" type=\"date\" value=\"{fr}\"></label>\
         <label>{to}<input name=\"to\" type=\"date\" value=\"{tv}\"></label>\
         <label>{search}<input name=\"q\" type=\"search\" value=\"{q}\" placeholder=\"{hint}\"></label>\
         <button>{filter}</button></fieldset></form>",
        st = t(l, "status"),
        any = t(l, "any"),
        op = t(l, "operator"),
        from = t(l, "from"),
        fr = get("from"),
        to = t(l, "to"),
        tv = get("to"),
        search = t(l, "search"),
        q = get("q"),
        hint = t(l, "search_hint"),
        filter = t(l, "filter"),
    )
}

/// An operator's name as people know it (its code when it is not ours).
pub(super) fn operator_name(slug: &str) -> &str {
    mmc_domain::operators::OPERATORS
        .iter()
        .find(|o| o.slug == slug)
        .map_or(slug, |o| o.name)
}

/// The payments as a table (or a line saying there are none).
fn table(l: html::Lang, zone: format::Zone, payments: &[Value]) -> String {
    let mut body = String::new();
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
        for p in payments {
            let id = p["id"].as_str().unwrap_or_default();
            let _ = write!(
                body,
                "<tr><td>{}</td><td><a href=\"/console/payments/{}\">{}</a></td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td></tr>",
                esc(&format::when_text(
                    zone,
                    p["created_at"].as_str().unwrap_or_default()
                )),
                esc(id),
                esc(p["reference"].as_str().unwrap_or(id)),
                outcomes::status_cell(l, p),
                esc(&format::money_of(l, p)),
                esc(operator_name(p["operator"].as_str().unwrap_or_default())),
                esc(&phone_of(p)),
            );
        }
        body.push_str("</tbody></table>");
    }
    body
}

pub async fn list(app: &Arc<App>, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let f = match filters(req) {
        Ok(f) => f,
        Err(ConsoleError::Refused(status, m)) => {
            let empty = Filters {
                console: Vec::new(),
                api: Vec::new(),
            };
            let body = format!("{}{}", html::notice(&m, true), filter_form(l, &empty));
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
    body.push_str(&table(l, s.zone, &payments));
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
pub(super) fn csv_field(v: &str) -> String {
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
