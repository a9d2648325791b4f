//! Bulk payouts by people: the list of batches with the CSV upload form
//! ([`crate::bulk_upload`]), a batch's page with its items as they are paid,
//! and its approval or rejection. Approving is the API's `validate`, through
//! the same scope check (`bulk:approve`) and the component's maker-checker
//! rule: a person is their own caller, and the person behind the keys they
//! made, so the batch's creator cannot approve it, here or with one of their
//! keys, where the merchant requires a second approver (always, in live).

use std::fmt::Write;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::{Value, json};

use crate::bulk_upload::{self, Uploaded};
use mmc_console_kit::api::Reading;
use mmc_console_kit::html::plain;
use mmc_console_kit::html::{self, esc, t, text};
use mmc_console_kit::sessions::Session;
use mmc_console_kit::web::{self, ConsoleError, Req, check_csrf};
use mmc_console_kit::{Console, api, blocking};
use mmc_console_kit::{format, outcomes};
use mmc_http::App;

type Resp = Response<Full<Bytes>>;

const BATCHES_PER_PAGE: u64 = 20;
const ITEMS_PER_PAGE: u64 = 50;
const ITEM_STATUSES: [&str; 4] = ["pending", "processing", "completed", "failed"];

/// `?page=`: a page number from 1, else 1.
fn page_number(req: &Req) -> u64 {
    req.param("page")
        .and_then(|p| p.parse::<u64>().ok())
        .filter(|p| (1..=1_000_000).contains(p))
        .unwrap_or(1)
}

/// The email of the person behind a caller id (`user_…`), else the id.
fn email_of(c: &Console, s: &Session, caller: &str) -> String {
    let Some(id) = caller.strip_prefix("user_") else {
        return caller.to_string();
    };
    blocking(|| c.users.list(&s.merchant_id))
        .ok()
        .and_then(|users| {
            users
                .into_iter()
                .find(|u| u.id.trim_start_matches("usr_") == id)
        })
        .map(|u| u.email)
        .unwrap_or_else(|| caller.to_string())
}

/// Who acted: a person in the console, a key with the person who made it,
/// or a service key alone.
fn who(c: &Console, s: &Session, key: &Value, person: &Value) -> String {
    let (key, person) = (text(key), text(person));
    if key.starts_with("user_") || key.is_empty() {
        return email_of(c, s, &key);
    }
    if person.is_empty() {
        return key;
    }
    format!("{key} ({})", email_of(c, s, &person))
}

async fn get(app: &Arc<App>, req: &Req, s: &Session, target: &str) -> Result<Value, ConsoleError> {
    let answer = api::call(app, s, "GET", target, None, None, &req.request_id).await?;
    match answer.status {
        200 => Ok(answer.value()),
        404 => Err(ConsoleError::NotFound),
        _ => Err(answer.refusal(req.lang)),
    }
}

/// `GET /console/bulk`: the batches, newest first, and the upload form for
/// those who may create one. `report` is a rejected upload's (status, HTML).
pub async fn list(
    app: &Arc<App>,
    req: &Req,
    s: &Session,
    report: Option<(u16, String)>,
) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let page = page_number(req);
    let found = get(
        app,
        req,
        s,
        &format!("/api/v1/bulk-payments/?page={page}&page_size={BATCHES_PER_PAGE}"),
    )
    .await?;
    let (status, mut body) = report.unwrap_or((200, String::new()));
    if s.role
        .scopes()
        .allow("POST", "/api/v1/bulk-payments/import_csv/")
        .is_ok()
    {
        body.push_str(&bulk_upload::form(req, s));
    }
    let _ = write!(
        body,
        "<h2>{}</h2><table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "bulk"),
        t(l, "name"),
        t(l, "status"),
        t(l, "amount"),
        t(l, "items"),
        t(l, "created"),
    );
    let batches = found["results"].as_array().cloned().unwrap_or_default();
    for b in &batches {
        let _ = write!(
            body,
            "<tr><td><a href=\"/console/bulk/{id}\">{name}</a></td><td>{status}</td><td class=\"num\">{total}</td><td>{n}</td><td>{created}</td></tr>",
            id = esc(&text(&b["id"])),
            name = esc(&text(&b["name"])),
            status = esc(&outcomes::status(l, &text(&b["status"]))),
            total = esc(&format::money(
                l,
                b["total_amount"].as_i64().unwrap_or(0),
                &text(&b["currency"])
            )),
            n = esc(&text(&b["item_count"])),
            created = esc(&format::when_text(s.zone, &text(&b["created_at"]))),
        );
    }
    body.push_str("</tbody></table>");
    if batches.is_empty() {
        let _ = write!(body, "<p>{}</p>", t(l, "none"));
    }
    body.push_str(&pager(l, "/console/bulk?", page, !found["next"].is_null()));
    Ok(web::page_response(
        status,
        html::page(l, Some(s), t(l, "bulk"), &body),
    ))
}

/// `POST /console/bulk/upload`: the CSV to the bulk component's import; the
/// batch's page, or the list again with the report of what is wrong.
pub async fn upload(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
) -> Result<Resp, ConsoleError> {
    match bulk_upload::upload(app, c, req, s).await? {
        Uploaded::Batch(resp) => Ok(resp),
        Uploaded::Refused(status, report) => list(app, req, s, Some((status, report))).await,
    }
}

/// Newer and older page links (`base` ends with `?` or `&`).
fn pager(l: html::Lang, base: &str, page: u64, more: bool) -> String {
    let mut out = String::from("<p>");
    if page > 1 {
        let _ = write!(
            out,
            "<a rel=\"prev\" href=\"{}page={}\">{}</a> ",
            esc(base),
            page - 1,
            t(l, "newer")
        );
    }
    if more {
        let _ = write!(
            out,
            "<a rel=\"next\" href=\"{}page={}\">{}</a>",
            esc(base),
            page + 1,
            t(l, "older")
        );
    }
    out.push_str("</p>");
    out
}

/// What the batch is, and how far its payment has gone.
fn facts(c: &Console, l: html::Lang, s: &Session, b: &Value) -> String {
    let mut body = String::from("<dl>");
    for (label, value) in [
        ("name", text(&b["name"])),
        ("description", text(&b["description"])),
        ("status", outcomes::status(l, &text(&b["status"]))),
        (
            "amount",
            format::money(
                l,
                b["total_amount"].as_i64().unwrap_or(0),
                &text(&b["currency"]),
            ),
        ),
        ("items", text(&b["item_count"])),
        (
            "created",
            format::when_text(s.zone, &text(&b["created_at"])),
        ),
        (
            "created_by",
            who(c, s, &b["created_by_key_id"], &b["created_by_user_id"]),
        ),
        (
            "approved_by",
            who(c, s, &b["validated_by_key_id"], &b["validated_by_user_id"]),
        ),
        ("reason", text(&b["rejection_reason"])),
    ] {
        if !value.trim().is_empty() {
            let _ = write!(body, "<dt>{}</dt><dd>{}</dd>", t(l, label), esc(&value));
        }
    }
    let counts = &b["items_by_status"];
    let _ = write!(body, "<dt>{}</dt><dd>", t(l, "progress"));
    for st in ITEM_STATUSES {
        let _ = write!(
            body,
            "<span class=\"count\">{}: <strong>{}</strong></span> ",
            esc(&outcomes::status(l, st)),
            esc(&text(&counts[st]))
        );
    }
    body.push_str("</dd>");
    // Items that wait (no route now) or whose outcome cannot be read now:
    // how many, since when, and why, where a person looks first.
    for (label, summary) in [
        ("held_items", &b["held"]),
        ("unconfirmed_items", &b["unconfirmed"]),
    ] {
        if summary.is_null() {
            continue;
        }
        let _ = write!(
            body,
            "<dt>{}</dt><dd><strong>{}</strong> ({} {})<ul>",
            t(l, label),
            esc(&text(&summary["count"])),
            t(l, "since"),
            esc(&format::when_text(s.zone, &text(&summary["since"])))
        );
        for r in summary["reasons"].as_array().into_iter().flatten() {
            let _ = write!(
                body,
                "<li>{} × {}</li>",
                esc(&text(&r["count"])),
                esc(&text(&r["reason"]))
            );
        }
        body.push_str("</ul></dd>");
    }
    // Held before anything was sent: the wallets that would pay it hold too little.
    let float = &b["insufficient_float"];
    if !float.is_null() {
        let _ = write!(
            body,
            "<dt>{}</dt><dd>({} {})<ul>",
            t(l, "insufficient_float"),
            t(l, "since"),
            esc(&format::when_text(s.zone, &text(&float["since"])))
        );
        for w in float["wallets"].as_array().into_iter().flatten() {
            let _ = write!(
                body,
                "<li>{} · {}: {} {} / {}</li>",
                esc(&text(&w["account"])),
                esc(&text(&w["wallet"])),
                t(l, "holds"),
                esc(&format::money(
                    l,
                    w["available"].as_i64().unwrap_or(0),
                    &text(&w["currency"])
                )),
                esc(&format::money(
                    l,
                    w["needed"].as_i64().unwrap_or(0),
                    &text(&w["currency"])
                )),
            );
        }
        body.push_str("</ul></dd>");
    }
    body.push_str("</dl>");
    body
}

/// Why an item is where it is: its failure, or what a person should check,
/// or why it waits or is not confirmed yet.
fn item_note(l: html::Lang, zone: format::Zone, i: &Value) -> String {
    if let Some(code) = i["failure_code"].as_str().filter(|c| !c.is_empty()) {
        let (why, next) = outcomes::reason(l, code);
        return format!("{} {}", esc(&why), esc(next));
    }
    if let Some(m) = i["failure_message"].as_str() {
        return esc(m);
    }
    let mut notes = Vec::new();
    if let Some(m) = i["review"]["message"].as_str() {
        notes.push(format!("<strong>{}</strong>: {}", t(l, "review"), esc(m)));
    }
    for (label, key) in [("held_items", "held"), ("unconfirmed_items", "unconfirmed")] {
        if let Some(r) = i[key]["reason"].as_str() {
            notes.push(format!(
                "{}: {} ({} {})",
                t(l, label),
                esc(r),
                t(l, "since"),
                esc(&format::when_text(zone, &text(&i[key]["since"])))
            ));
        }
    }
    notes.join("<br>")
}

/// Approve and reject, while the batch waits for them, for a role that may
/// (the API refuses the others all the same); approving goes through a
/// confirmation. The batch's creator is not offered to approve it where the
/// merchant requires a second approver.
fn decision(l: html::Lang, s: &Session, id: &str, own: bool) -> String {
    let mut out = String::new();
    let may = s
        .role
        .scopes()
        .allow("POST", "/api/v1/bulk-payments/x/validate")
        .is_ok();
    if !may {
        return out;
    }
    let ide = esc(id);
    if own && s.require_second_approver {
        out.push_str(&html::notice(t(l, "maker_checker"), false));
    } else {
        let _ = write!(
            out,
            "<p class=\"actions\"><a class=\"button\" href=\"/console/bulk/{ide}/approve\">{}</a></p>",
            t(l, "approve")
        );
    }
    let _ = write!(
        out,
        "<form method=\"post\" action=\"/console/bulk/{ide}/validate\">{csrf}<input type=\"hidden\" name=\"action\" value=\"reject\">\
         <label>{reason}<input name=\"reason\" maxlength=\"255\"></label><button class=\"danger\">{reject}</button></form>",
        csrf = html::csrf_field(s),
        reason = t(l, "reason"),
        reject = t(l, "reject"),
    );
    out
}

/// `GET /console/bulk/{id}/approve`: what approving pays, then the
/// confirming form (with a fresh code from the authenticator in live).
pub async fn approve_form(
    app: &Arc<App>,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let b = get(app, req, s, &format!("/api/v1/bulk-payments/{id}")).await?;
    let ide = esc(id);
    if b["status"] != "pending_validation" {
        let why = plain(
            l,
            "not_waiting",
            &[&outcomes::status(l, &text(&b["status"]))],
        );
        let body = format!(
            "{}<p><a href=\"/console/bulk/{ide}\">{}</a></p>",
            html::notice(&why, true),
            t(l, "back")
        );
        return Ok(web::page_response(
            409,
            html::page(l, Some(s), t(l, "approve"), &body),
        ));
    }
    let code = if s.environment == mmc_accounts::Environment::Live {
        mmc_console_kit::step_up::field(l)
    } else {
        String::new()
    };
    let total = format::money(
        l,
        b["total_amount"].as_i64().unwrap_or(0),
        &text(&b["currency"]),
    );
    let body = format!(
        "<p>{q}</p><form method=\"post\" action=\"/console/bulk/{ide}/validate\">{csrf}<input type=\"hidden\" name=\"action\" value=\"approve\">\
         {code}<button>{confirm}</button> <a href=\"/console/bulk/{ide}\">{back}</a></form>",
        q = html::tf(
            l,
            "confirm_approve",
            &[&text(&b["name"]), &text(&b["item_count"]), &total]
        ),
        csrf = html::csrf_field(s),
        confirm = t(l, "approve"),
        back = t(l, "back"),
    );
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "approve"), &body),
    ))
}

/// The items of one page, in file order, with how each one went.
fn items_table(l: html::Lang, zone: format::Zone, items: &[Value]) -> String {
    let mut out = format!(
        "<table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "line"),
        t(l, "status"),
        t(l, "beneficiary"),
        t(l, "phone"),
        t(l, "amount"),
        t(l, "reference"),
        t(l, "operator"),
        t(l, "note"),
    );
    for i in items {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&text(&i["line"])),
            esc(&outcomes::status(l, &text(&i["status"]))),
            esc(&text(&i["beneficiary_name"])),
            esc(&text(&i["phone"])),
            esc(&format::money_of(l, i)),
            esc(&text(&i["reference"])),
            esc(crate::payments::operator_name(&text(&i["operator"]))),
            item_note(l, zone, i),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// `GET /console/bulk/{id}`: the batch, its items page by page (`?status=`
/// keeps one item status), and while it waits, approve or reject.
pub async fn show(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
    id: &str,
) -> Result<Resp, ConsoleError> {
    let l = req.lang;
    let b = get(app, req, s, &format!("/api/v1/bulk-payments/{id}")).await?;
    let status = req
        .param("status")
        .filter(|st| ITEM_STATUSES.contains(&st.as_str()));
    let page = page_number(req);
    let mut items_query = format!("page={page}&page_size={ITEMS_PER_PAGE}");
    if let Some(st) = &status {
        items_query.push_str(&format!("&status={st}"));
    }
    let items = get(
        app,
        req,
        s,
        &format!("/api/v1/bulk-payments/{id}/items/?{items_query}"),
    )
    .await?;
    let mut body = String::new();
    if let Some(done) = req.param("done") {
        let said = match done.as_str() {
            "approve" => t(l, "batch_approved"),
            "reject" => t(l, "batch_rejected"),
            _ => t(l, "done"),
        };
        body.push_str(&html::notice(said, false));
    }
    body.push_str(&facts(c, l, s, &b));
    if b["status"] == "pending_validation" {
        let own = b["created_by_user_id"].as_str() == Some(&s.actor_id());
        body.push_str(&decision(l, s, id, own));
    }
    let ide = esc(id);
    let _ = write!(
        body,
        "<h2>{}</h2><p><a href=\"/console/bulk/{ide}\">{}</a>",
        t(l, "items"),
        t(l, "refresh")
    );
    for st in ITEM_STATUSES {
        let _ = write!(
            body,
            " · <a href=\"/console/bulk/{ide}?status={st}\">{}</a>",
            esc(&outcomes::status(l, st))
        );
    }
    body.push_str("</p>");
    let list = items["results"].as_array().cloned().unwrap_or_default();
    body.push_str(&items_table(l, s.zone, &list));
    let base = match &status {
        Some(st) => format!("/console/bulk/{id}?status={st}&"),
        None => format!("/console/bulk/{id}?"),
    };
    body.push_str(&pager(l, &base, page, !items["next"].is_null()));
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
    if action == "approve" && s.environment == mmc_accounts::Environment::Live {
        let purpose = format!("bulk.approve {id}");
        mmc_console_kit::step_up::check_audited(c, req, s, ("bulk.approve", id), &purpose)?;
    }
    let mut payload = json!({"action": action});
    if action == "reject"
        && let Some(reason) = req.field("reason")
    {
        payload["reason"] = json!(reason);
    }
    let audit = format!("bulk.{action}");
    let target = format!("/api/v1/bulk-payments/{id}/validate");
    let reason = req.field("reason");
    let validate = api::Action {
        method: "POST",
        target: &target,
        body: Some(&payload),
        audit: &audit,
        subject: Some(id),
    };
    api::perform(app, c, req, s, validate, |_| reason).await?;
    Ok(web::redirect(&format!("/console/bulk/{id}?done={action}")))
}
