//! Payment links: a hosted payment made by a person (amount, description,
//! expiry up to 30 days, an operator fixed or left to the customer), its
//! checkout link and QR code to send by WhatsApp or SMS, and the list of
//! links with their status. Creating one is the API's
//! `POST /api/v1/collect/payments` in hosted mode, with the form's
//! Idempotency-Key; the list is the audit log's `link.create` entries, each
//! payment read through the API as it is now.

use mmc_console_kit::api::Reading;
use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use mmc_domain::operators::{Country, OPERATORS};
use serde_json::{Value, json};

use crate::payment::get_payment;
use mmc_console_kit::audit::Filter;
use mmc_console_kit::html::{self, esc, t, text};
use mmc_console_kit::sessions::Session;
use mmc_console_kit::web::{self, ConsoleError, Req, check_csrf};
use mmc_console_kit::{Console, api, blocking};
use mmc_console_kit::{format, outcomes};
use mmc_http::App;

type Resp = Response<Full<Bytes>>;

const ACTION: &str = "link.create";
const MAX_DAYS: u64 = 30;

fn form(l: html::Lang, s: &Session, req: &Req) -> String {
    let value = |name: &str| esc(&req.field(name).unwrap_or_default());
    let countries: String = Country::ALL
        .iter()
        .map(|c| format!("<option>{}</option>", c.code()))
        .collect();
    let operators: String = OPERATORS
        .iter()
        .map(|o| {
            format!(
                "<option value=\"{}\">{} ({})</option>",
                o.slug,
                esc(o.name),
                o.country.code()
            )
        })
        .collect();
    format!(
        "<h2>{create}</h2><form method=\"post\" action=\"/console/links\">{csrf}\
         <input type=\"hidden\" name=\"idempotency_key\" value=\"{key}\"><fieldset>\
         <label>{amount} ({cur})<input name=\"amount\" inputmode=\"numeric\" required value=\"{a}\"></label>\
         <label>{description}<input name=\"description\" maxlength=\"200\" required value=\"{d}\"></label>\
         <label>{days}<input name=\"days\" inputmode=\"numeric\" value=\"{n}\"></label>\
         <label>{country}<select name=\"country\">{countries}</select></label>\
         <label>{operator}<select name=\"operator\"><option value=\"\">{any}</option>{operators}</select></label>\
         </fieldset><button>{create}</button></form>",
        create = t(l, "create_link"),
        csrf = html::csrf_field(s),
        key = uuid::Uuid::new_v4(),
        amount = t(l, "amount"),
        cur = if l == html::Lang::Fr { "FCFA" } else { "XOF" },
        a = value("amount"),
        description = t(l, "description"),
        d = value("description"),
        days = t(l, "expires_days"),
        n = req.field("days").map_or_else(|| "7".into(), |d| esc(&d)),
        country = t(l, "country"),
        operator = t(l, "operator"),
        any = t(l, "any_operator"),
    )
}

/// `GET /console/links`: the links made here, newest first, as they are now.
pub async fn list(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
    top: Option<(u16, String)>,
) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let filter = Filter {
        action: Some(ACTION.into()),
        email: None,
        outcome: None,
        since_ms: None,
        until_ms: None,
        before_id: req.param("before").and_then(|b| b.parse().ok()),
    };
    let (entries, more) = blocking(|| c.audit.list(&s.merchant_id, &filter))?;
    let (status, mut body) = top.unwrap_or((200, String::new()));
    if s.role
        .scopes()
        .allow("POST", "/api/v1/collect/payments")
        .is_ok()
    {
        body.push_str(&form(l, s, req));
    }
    let _ = write!(
        body,
        "<h2>{}</h2><table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "links"),
        t(l, "description"),
        t(l, "amount"),
        t(l, "status"),
        t(l, "expires"),
        t(l, "who"),
    );
    for e in entries
        .iter()
        .filter(|e| e.environment == s.environment.as_str() && e.outcome == "done")
    {
        let Some(id) = &e.subject else { continue };
        // A payment the API no longer shows (retention) is left out.
        let Ok(p) = get_payment(app, req, s, id).await else {
            continue;
        };
        let _ = write!(
            body,
            "<tr><td><a href=\"/console/links/{ide}\">{desc}</a></td><td class=\"num\">{amount}</td><td>{status}</td><td>{exp}</td><td>{who}</td></tr>",
            ide = esc(id),
            desc = esc(&text(&p["description"])),
            amount = esc(&format::money_of(l, &p)),
            status = outcomes::status_cell(l, &p),
            exp = esc(&format::when_text(s.zone, &text(&p["expires_at"]))),
            who = esc(&e.email),
        );
    }
    body.push_str("</tbody></table>");
    if more && let Some(last) = entries.last() {
        let _ = write!(
            body,
            "<p><a rel=\"next\" href=\"/console/links?before={}\">{}</a></p>",
            last.id,
            t(l, "older")
        );
    }
    Ok(web::page_response(
        status,
        html::page(l, Some(s), t(l, "links"), &body),
    ))
}

/// The form's amount, days and description, or the message for the form.
fn read(req: &Req) -> Result<(u64, u64, String), String> {
    let l = req.lang;
    let amount = req
        .field("amount")
        .and_then(|a| crate::refunds::typed_amount(l, &a))
        .ok_or_else(|| t(l, "bad_amount").to_string())?;
    let days = match req.field("days") {
        None => 7,
        Some(d) => d
            .parse::<u64>()
            .ok()
            .filter(|d| (1..=MAX_DAYS).contains(d))
            .ok_or_else(|| t(l, "bad_days").to_string())?,
    };
    let description = req
        .field("description")
        .filter(|d| d.chars().count() <= 200)
        .ok_or_else(|| t(l, "bad_description").to_string())?;
    Ok((amount, days, description))
}

/// `POST /console/links`: the hosted payment, then its page.
pub async fn create(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    api::permitted(
        app,
        c,
        req,
        s,
        ("POST", "/api/v1/collect/payments"),
        (ACTION, None),
    )
    .await?;
    let (amount, days, description) = match read(req) {
        Ok(v) => v,
        Err(m) => return list(app, c, req, s, Some((400, html::notice(&m, true)))).await,
    };
    let country = req
        .field("country")
        .and_then(|c| Country::parse(&c))
        .unwrap_or(Country::Bj);
    let key = req
        .field("idempotency_key")
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let mut payload = json!({
        // The key names the link: a double submit is the same payment.
        "reference": format!("link-{}", key.chars().filter(|c| c.is_ascii_alphanumeric()).take(32).collect::<String>()),
        "amount": amount,
        "currency": country.currency(),
        "country": country.code(),
        "mode": "hosted",
        "description": description,
        "expires_in_seconds": days * 86_400,
    });
    if let Some(op) = req.field("operator") {
        payload["operator"] = json!(op);
    }
    let asked = format!("{amount} {} {description}", country.currency());
    let request = api::call(
        app,
        s,
        "POST",
        "/api/v1/collect/payments",
        Some(&payload),
        Some(&key),
        &req.request_id,
    );
    let audit = (ACTION, None, Some(asked.as_str()));
    let (entry, answer) = match api::audited(app, c, req, s, audit, request).await? {
        Ok(accepted) => accepted,
        Err(refused) if matches!(refused.status, 400 | 422) => {
            let ConsoleError::Refused(_, m) = refused.refusal(req.lang) else {
                unreachable!("a refusal")
            };
            let top = Some((refused.status, html::notice(&m, true)));
            return list(app, c, req, s, top).await;
        }
        Err(refused) => return Err(refused.refusal(req.lang)),
    };
    let p = answer.value();
    let id = text(&p["id"]);
    let detail = format!(
        "{} {} {}",
        text(&p["amount"]),
        text(&p["currency"]),
        description
    );
    // A double submit is the same payment, listed once.
    blocking(|| c.audit.finish_once(entry, &id, &detail))?;
    Ok(web::redirect(&format!("/console/links/{id}")))
}

fn checkout_url(p: &Value) -> Result<String, ConsoleError> {
    p["checkout_url"]
        .as_str()
        .map(str::to_string)
        .ok_or(ConsoleError::NotFound)
}

/// `GET /console/links/{id}`: the link, its QR code and its status.
pub async fn show(app: &Arc<App>, req: &Req, s: &Session, id: &str) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let p = get_payment(app, req, s, id).await?;
    let url = checkout_url(&p)?;
    let ide = esc(id);
    let mut body = String::new();
    let _ = write!(
        body,
        "<p>{share}</p><p><a href=\"{u}\"><code>{u}</code></a></p>\
         <p><img src=\"/console/links/{ide}/qr.svg\" width=\"264\" height=\"264\" alt=\"{alt}\"></p><dl>",
        share = t(l, "link_share"),
        u = esc(&url),
        alt = t(l, "qr_alt"),
    );
    for (label, value) in [
        ("description", esc(&text(&p["description"]))),
        ("amount", esc(&format::money_of(l, &p))),
        ("status", outcomes::status_cell(l, &p)),
        (
            "operator",
            esc(crate::payments::operator_name(&text(&p["operator"]))),
        ),
        (
            "expires",
            esc(&format::when_text(s.zone, &text(&p["expires_at"]))),
        ),
        ("reference", esc(&text(&p["reference"]))),
    ] {
        let _ = write!(body, "<dt>{}</dt><dd>{value}</dd>", t(l, label));
    }
    let _ = write!(
        body,
        "</dl><p><a href=\"/console/payments/{ide}\">{}</a> · <a href=\"/console/links\">{}</a></p>",
        t(l, "timeline"),
        t(l, "links")
    );
    Ok(web::page_response(
        200,
        html::page(
            l,
            Some(s),
            &format!("{} {}", t(l, "link"), text(&p["reference"])),
            &body,
        ),
    ))
}

/// `GET /console/links/{id}/qr.svg`: the checkout link as a QR code.
pub async fn qr(app: &Arc<App>, req: &Req, s: &Session, id: &str) -> Result<Resp, ConsoleError> {
    let p = get_payment(app, req, s, id).await?;
    let svg = mmc_console_kit::qr::svg(&checkout_url(&p)?).ok_or(ConsoleError::NotFound)?;
    Ok(web::body_response(200, "image/svg+xml", svg.into_bytes()))
}
