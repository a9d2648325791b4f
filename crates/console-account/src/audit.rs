//! `GET /console/audit`: the log as its owners read and filter it.

use std::fmt::Write;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;

use mmc_console_kit::audit::{ACTIONS, Filter, action_words, table};
use mmc_console_kit::html::{self, Lang, esc, t};
use mmc_console_kit::sessions::Session;
use mmc_console_kit::web::{self, ConsoleError, Req};
use mmc_console_kit::{Console, blocking};

type Resp = Response<Full<Bytes>>;

/// `GET /console/audit` (owners): newest first, filtered by person,
/// action, outcome and period, paged by `before`.
pub fn page(c: &Console, req: &Req, s: &Session) -> Result<Resp, ConsoleError> {
    if !s.role.manages_users() {
        return Err(ConsoleError::Forbidden("owner".into()));
    }
    let l = req.lang;
    let day = |v: Option<String>, shift: u64| -> Result<Option<u64>, ConsoleError> {
        v.map(|d| {
            mmc_console_kit::format::date_secs(&d)
                .map(|secs| (secs + shift) * 1000)
                .ok_or_else(|| {
                    ConsoleError::Refused(
                        400,
                        mmc_console_kit::html::plain(l, "bad_date", &["date", &d]),
                    )
                })
        })
        .transpose()
    };
    let filter = Filter {
        action: req.param("action"),
        email: req.param("email"),
        outcome: req.param("outcome"),
        since_ms: day(req.param("from"), 0)?,
        until_ms: day(req.param("to"), 86_400)?,
        before_id: req.param("before").and_then(|b| b.parse().ok()),
    };
    let people =
        blocking(|| c.users.list(&s.merchant_id)).map_err(mmc_console_kit::web::user_error)?;
    let emails: Vec<&str> = people.iter().map(|u| u.email.as_str()).collect();
    let (entries, more) = blocking(|| c.audit.list(&s.merchant_id, &filter))?;
    let mut body = filters(l, req, &emails);
    if entries.is_empty() {
        let _ = write!(body, "<p>{}</p>", t(l, "audit_none"));
    } else {
        body.push_str(&table(l, &entries, s.zone));
    }
    if more && let Some(last) = entries.last() {
        let mut q = url::form_urlencoded::Serializer::new(String::new());
        for name in ["email", "action", "outcome", "from", "to"] {
            if let Some(v) = req.param(name) {
                q.append_pair(name, &v);
            }
        }
        q.append_pair("before", &last.id.to_string());
        let _ = write!(
            body,
            "<p><a rel=\"next\" href=\"/console/audit?{}\">{} →</a></p>",
            esc(&q.finish()),
            t(l, "older")
        );
    }
    Ok(web::page_response(
        200,
        html::page(l, Some(s), t(l, "audit"), &body),
    ))
}

/// A `<select>` of `name`: "any" first, then each (value, words), the
/// query's value chosen.
fn choice(req: &Req, name: &str, any: &str, options: &[(&str, String)]) -> String {
    let current = req.param(name).unwrap_or_default();
    let mut out = format!(
        "<select name=\"{name}\"><option value=\"\">{}</option>",
        esc(any)
    );
    for (value, words) in options {
        let _ = write!(
            out,
            "<option value=\"{}\"{}>{}</option>",
            esc(value),
            if *value == current { " selected" } else { "" },
            esc(words)
        );
    }
    out.push_str("</select>");
    out
}

/// The log's filters, as the query has them: the team's people, the
/// actions, the outcomes and a period.
fn filters(l: Lang, req: &Req, emails: &[&str]) -> String {
    let people: Vec<(&str, String)> = emails.iter().map(|e| (*e, e.to_string())).collect();
    let actions: Vec<(&str, String)> = ACTIONS.iter().map(|a| (*a, action_words(l, a))).collect();
    let outcomes = [
        ("done", t(l, "outcome_done").to_string()),
        ("refused", t(l, "outcome_refused").to_string()),
        ("unknown", t(l, "audit_not_known").to_string()),
    ];
    let date = |name: &str| esc(req.param(name).as_deref().unwrap_or_default());
    format!(
        "<form method=\"get\" action=\"/console/audit\"><fieldset>\
         <label>{w}{people}</label><label>{a}{actions}</label><label>{o}{outcomes}</label>\
         <label>{f}<input name=\"from\" type=\"date\" value=\"{fv}\"></label>\
         <label>{to}<input name=\"to\" type=\"date\" value=\"{tv}\"></label>\
         <button>{filter}</button></fieldset></form>",
        w = t(l, "who"),
        people = choice(req, "email", t(l, "audit_everyone"), &people),
        a = t(l, "action"),
        actions = choice(req, "action", t(l, "audit_any_action"), &actions),
        o = t(l, "outcome"),
        outcomes = choice(req, "outcome", t(l, "audit_any_outcome"), &outcomes),
        f = t(l, "from"),
        fv = date("from"),
        to = t(l, "to"),
        tv = date("to"),
        filter = t(l, "filter"),
    )
}
