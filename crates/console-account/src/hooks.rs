//! Webhooks for `developer` and `owner`: endpoints (add, disable or enable,
//! rotate the signing secret, shown once) and events with their deliveries
//! (the request sent, each attempt's answer) and resend. Each action is the
//! API's, under scope `webhooks:manage` ([`mmc_console_kit::api`]).

use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::{Value, json};

use crate::keys::{developer, opening, tabs};
use mmc_console_kit::api::{self, Answer, Reading};
use mmc_console_kit::audit::Outcome;
use mmc_console_kit::html::{self, esc, t, text};
use mmc_console_kit::sessions::Session;
use mmc_console_kit::web::{self, ConsoleError, Req, check_csrf};
use mmc_console_kit::{Console, blocking};
use mmc_http::App;

type Resp = Response<Full<Bytes>>;

async fn call(
    app: &Arc<App>,
    req: &Req,
    s: &Session,
    method: &str,
    target: &str,
    body: Option<&Value>,
) -> Result<Answer, ConsoleError> {
    developer(s)?;
    api::call(app, s, method, target, body, None, &req.request_id).await
}

/// The form for a new endpoint; `req` refills it after a refusal.
fn add_form(l: html::Lang, s: &Session, req: Option<&Req>) -> String {
    let value = |name: &str| req.and_then(|r| r.field(name)).unwrap_or_default();
    format!(
        "<h2>{add}</h2><form method=\"post\" action=\"/console/developers/webhooks\">{csrf}<fieldset>\
         <label>{url}<input name=\"url\" type=\"url\" required value=\"{u}\"></label>\
         <label>{events}<input name=\"enabled_events\" value=\"{e}\"></label>\
         <label>{description}<input name=\"description\" maxlength=\"200\" value=\"{d}\"></label></fieldset>\
         <button>{add}</button></form>",
        add = t(l, "add_endpoint"),
        csrf = html::csrf_field(s),
        url = t(l, "url"),
        u = esc(&value("url")),
        events = t(l, "events"),
        e = esc(&req
            .and_then(|r| r.field("enabled_events"))
            .unwrap_or_else(|| "*".into())),
        description = t(l, "description"),
        d = esc(&value("description")),
    )
}

fn endpoint_row(l: html::Lang, s: &Session, e: &Value) -> String {
    let id = esc(&text(&e["id"]));
    let disabled = e["disabled"].as_bool().unwrap_or(false);
    let events: Vec<String> = e["enabled_events"]
        .as_array()
        .into_iter()
        .flatten()
        .map(text)
        .collect();
    format!(
        "<tr><td><code>{id}</code></td><td>{url}</td><td>{events}</td><td>{state}</td><td>\
         <form method=\"post\" action=\"/console/developers/webhooks/{id}/disabled\" class=\"inline\">{csrf}\
         <input type=\"hidden\" name=\"disabled\" value=\"{flip}\"><button>{toggle}</button></form> \
         <form method=\"post\" action=\"/console/developers/webhooks/{id}/rotate\" class=\"inline\">{csrf}\
         <button class=\"danger\">{rotate}</button></form></td></tr>",
        url = esc(&text(&e["url"])),
        events = esc(&events.join(", ")),
        state = t(l, if disabled { "disabled" } else { "enabled" }),
        csrf = html::csrf_field(s),
        flip = !disabled,
        toggle = t(l, if disabled { "enable" } else { "disable" }),
        rotate = t(l, "rotate"),
    )
}

/// `GET /console/developers/webhooks`; `top` is a message above the list,
/// `refill` keeps what a refused form held.
pub async fn endpoints(
    app: &Arc<App>,
    req: &Req,
    s: &Session,
    top: Option<(u16, String)>,
    refill: bool,
) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let answer = call(app, req, s, "GET", "/api/v1/webhook-endpoints", None).await?;
    if !answer.ok() {
        return Err(answer.refusal(req.lang));
    }
    let (status, mut body) = opening(l, req, top);
    let _ = write!(
        body,
        "<h2>{}</h2><table><thead><tr><th>id</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "endpoints"),
        t(l, "url"),
        t(l, "events"),
        t(l, "status"),
        t(l, "action"),
    );
    for e in answer.value()["data"].as_array().into_iter().flatten() {
        body.push_str(&endpoint_row(l, s, e));
    }
    body.push_str("</tbody></table>");
    body.push_str(&add_form(l, s, refill.then_some(req)));
    Ok(web::page_response(
        status,
        html::page(l, Some(s), t(l, "endpoints"), &body),
    ))
}

/// The secret of an endpoint just made or rotated, shown this once.
fn secret_notice(l: html::Lang, e: &Value) -> String {
    format!(
        "{}<p><code>{}</code>: <code class=\"secret\">{}</code></p>",
        html::notice(t(l, "secret_once"), false),
        esc(&text(&e["id"])),
        esc(&text(&e["secret"]))
    )
}

/// `POST /console/developers/webhooks`: the API's endpoint creation.
pub async fn add(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    let l = req.lang;
    let events: Vec<String> = req
        .field("enabled_events")
        .unwrap_or_else(|| "*".into())
        .split([',', ' '])
        .filter(|e| !e.is_empty())
        .map(str::to_string)
        .collect();
    let mut payload =
        json!({"url": req.field("url").unwrap_or_default(), "enabled_events": events});
    if let Some(d) = req.field("description") {
        payload["description"] = json!(d);
    }
    developer(s)?;
    let url = req.field("url").unwrap_or_default();
    let request = call(
        app,
        req,
        s,
        "POST",
        "/api/v1/webhook-endpoints",
        Some(&payload),
    );
    let audit = ("endpoint.add", None, Some(url.as_str()));
    let (entry, answer) = match api::audited(app, c, req, s, audit, request).await? {
        Ok(accepted) => accepted,
        Err(refused) if refused.status == 400 => {
            let ConsoleError::Refused(_, m) = refused.refusal(req.lang) else {
                unreachable!("a refusal")
            };
            return endpoints(app, req, s, Some((400, html::notice(&m, true))), true).await;
        }
        Err(refused) => return Err(refused.refusal(req.lang)),
    };
    let e = answer.value();
    blocking(|| c.audit.finish(entry, Outcome::Done, e["id"].as_str(), None))?;
    endpoints(app, req, s, Some((201, secret_notice(l, &e))), false).await
}

/// `POST /console/developers/webhooks/{id}/disabled`: `disabled` true or false.
pub async fn set_disabled(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    developer(s)?;
    let disabled = req.field("disabled").as_deref() == Some("true");
    let action = api::Action {
        method: "POST",
        target: &format!("/api/v1/webhook-endpoints/{id}"),
        body: Some(&json!({"disabled": disabled})),
        audit: if disabled {
            "endpoint.disable"
        } else {
            "endpoint.enable"
        },
        subject: Some(id),
    };
    api::perform(app, c, req, s, action, |_| None).await?;
    Ok(web::redirect(&format!(
        "/console/developers/webhooks?done={}",
        if disabled { "disable" } else { "enable" }
    )))
}

/// `POST /console/developers/webhooks/{id}/rotate`: a new secret, shown once.
pub async fn rotate(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    developer(s)?;
    let action = api::Action {
        method: "POST",
        target: &format!("/api/v1/webhook-endpoints/{id}/rotate-secret"),
        body: None,
        audit: "endpoint.rotate_secret",
        subject: Some(id),
    };
    let answer = api::perform(app, c, req, s, action, |_| None).await?;
    let shown = secret_notice(req.lang, &answer.value());
    endpoints(app, req, s, Some((200, shown)), false).await
}

/// `GET /console/developers/events`: the latest events, 20 a page.
pub async fn events(app: &Arc<App>, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let mut target = "/api/v1/events?limit=20".to_string();
    if let Some(after) = req.param("after") {
        target.push_str(&format!(
            "&starting_after={}",
            url::form_urlencoded::byte_serialize(after.as_bytes()).collect::<String>()
        ));
    }
    let answer = call(app, req, s, "GET", &target, None).await?;
    if !answer.ok() {
        return Err(answer.refusal(req.lang));
    }
    let list = answer.value();
    let mut body = tabs(l);
    let _ = write!(
        body,
        "<table><thead><tr><th>{}</th><th>{}</th><th>id</th></tr></thead><tbody>",
        t(l, "when"),
        t(l, "what")
    );
    let data = list["data"].as_array().cloned().unwrap_or_default();
    for e in &data {
        let id = esc(&text(&e["id"]));
        let _ = write!(
            body,
            "<tr><td>{}</td><td>{}</td><td><a href=\"/console/developers/events/{id}\">{id}</a></td></tr>",
            s.zone.when(mmc_console_kit::format::event_ms(e)),
            esc(&text(&e["type"])),
        );
    }
    body.push_str("</tbody></table>");
    if list["has_more"] == true
        && let Some(last) = data.last()
    {
        let _ = write!(
            body,
            "<p><a rel=\"next\" href=\"/console/developers/events?after={}\">{}</a></p>",
            esc(&text(&last["id"])),
            t(l, "older")
        );
    }
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "deliveries"), &body),
    ))
}

/// `GET /console/developers/events/{id}`: the request sent (the event) and
/// each delivery's attempts with the answer they got; resend.
pub async fn event(app: &Arc<App>, req: &Req, s: &Session, id: &str) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let answer = call(app, req, s, "GET", &format!("/api/v1/events/{id}"), None).await?;
    match answer.status {
        200 => {}
        404 => return Err(ConsoleError::NotFound),
        _ => return Err(answer.refusal(req.lang)),
    }
    let mut e = answer.value();
    let deliveries = e["deliveries"].take();
    if let Some(o) = e.as_object_mut() {
        o.remove("deliveries");
    }
    let mut body = tabs(l);
    if let Some(done) = req.param("done") {
        body.push_str(&html::notice(&format!("{} ({done})", t(l, "done")), false));
    }
    let _ = write!(
        body,
        "<form method=\"post\" action=\"/console/events/{ide}/resend\">{csrf}<input type=\"hidden\" name=\"back\" value=\"events\">\
         <button>{resend}</button></form><h2>{request}</h2><pre>{json}</pre><h2>{answers}</h2>",
        ide = esc(id),
        csrf = html::csrf_field(s),
        resend = t(l, "resend"),
        request = t(l, "request"),
        json = esc(&serde_json::to_string_pretty(&e).unwrap_or_default()),
        answers = t(l, "deliveries"),
    );
    for d in deliveries.as_array().into_iter().flatten() {
        let _ = write!(
            body,
            "<h3>{} · {}</h3><table><thead><tr><th>{}</th><th>HTTP</th><th>ms</th><th>{}</th></tr></thead><tbody>",
            esc(&text(&d["url"])),
            esc(&mmc_console_kit::outcomes::word_of(
                l,
                "dl_",
                &text(&d["status"])
            )),
            t(l, "when"),
            t(l, "answer"),
        );
        for a in d["attempts"].as_array().into_iter().flatten() {
            let _ = write!(
                body,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                s.zone.when(a["at_ms"].as_u64().unwrap_or_default()),
                esc(&text(&a["status_code"])),
                esc(&text(&a["latency_ms"])),
                esc(&text(&a["error"])),
            );
        }
        body.push_str("</tbody></table>");
    }
    Ok(web::page_response(
        200,
        html::page(
            l,
            Some(s),
            &format!("{} {}", t(l, "events"), text(&e["type"])),
            &body,
        ),
    ))
}
