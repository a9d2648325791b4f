//! A bulk batch's approval by a person: the batch's page shows what would be
//! paid, and approving or rejecting it is the API's `validate`, through the
//! same scope check (`bulk:approve`) and the component's maker-checker rule:
//! a person is their own caller, so the batch's creator cannot approve it
//! where the merchant requires a second approver.

use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::{Value, json};

use super::html::{self, esc, t};
use super::sessions::Session;
use super::web::{self, ConsoleError, Req, check_csrf};
use super::{Console, api, blocking};
use crate::http::App;

type Resp = Response<Full<Bytes>>;

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        v => v.to_string(),
    }
}

/// `GET /console/bulk/{id}`: the batch, and while it waits, approve or reject.
pub async fn show(app: &Arc<App>, req: &Req, s: &Session, id: &str) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let answer = api::call(
        app,
        s,
        "GET",
        &format!("/api/v1/bulk-payments/{id}"),
        None,
        None,
        &req.request_id,
    )
    .await?;
    match answer.status {
        200 => {}
        404 => return Err(ConsoleError::NotFound),
        _ => return Err(answer.refusal()),
    }
    let b = answer.json();
    let mut body = String::new();
    if let Some(done) = req.param("done") {
        body.push_str(&html::notice(&format!("{} ({done})", t(l, "done")), false));
    }
    body.push_str("<dl>");
    for key in [
        "id",
        "name",
        "status",
        "total_amount",
        "currency",
        "item_count",
        "created_by_key_id",
        "validated_by_key_id",
    ] {
        if !b[key].is_null() {
            let _ = write!(body, "<dt>{key}</dt><dd>{}</dd>", esc(&text(&b[key])));
        }
    }
    body.push_str("</dl>");
    if b["status"] == "pending_validation" {
        let _ = write!(
            body,
            "<form method=\"post\" action=\"/console/bulk/{ide}/validate\">{csrf}<input type=\"hidden\" name=\"action\" value=\"approve\">\
             <button>{approve}</button></form>\
             <form method=\"post\" action=\"/console/bulk/{ide}/validate\">{csrf}<input type=\"hidden\" name=\"action\" value=\"reject\">\
             <label>{reason}<input name=\"reason\" maxlength=\"500\"></label><button class=\"danger\">{reject}</button></form>",
            ide = esc(id),
            csrf = html::csrf_field(s),
            approve = t(l, "approve"),
            reason = t(l, "reason"),
            reject = t(l, "reject"),
        );
    }
    let title = format!("{} {}", t(l, "batch"), text(&b["name"]));
    Ok(web::page_response(
        200,
        html::page(l, Some(s), &title, &body),
    ))
}

/// `POST /console/bulk/{id}/validate`: `action` approve or reject (with a reason).
pub async fn validate(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    check_csrf(req, s)?;
    let action = match req.field("action").as_deref() {
        Some("approve") => "approve",
        Some("reject") => "reject",
        _ => {
            return Err(ConsoleError::Refused(400, t(req.lang, "bad_action").into()));
        }
    };
    let mut payload = json!({"action": action});
    if action == "reject"
        && let Some(reason) = req.field("reason")
    {
        payload["reason"] = json!(reason);
    }
    let path = format!("/api/v1/bulk-payments/{id}/validate");
    let answer = api::call(app, s, "POST", &path, Some(&payload), None, &req.request_id).await?;
    if !answer.ok() {
        return Err(answer.refusal());
    }
    let detail = req.field("reason");
    blocking(|| {
        c.audit.record(
            s,
            &format!("bulk.{action}"),
            Some(id),
            detail.as_deref(),
            req.client.as_deref(),
        )
    })?;
    Ok(web::redirect(&format!("/console/bulk/{id}?done={action}")))
}
