//! `GET /console/audit`: the log as its owners read and filter it.

use std::fmt::Write;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;

use super::{ACTIONS, Entry, Filter, action_words};
use crate::format::{self, Zone};
use crate::html::{self, Lang, esc, t};
use crate::sessions::Session;
use crate::web::{self, ConsoleError, Req};
use crate::{Console, blocking};

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
            crate::payments::date_secs(&d)
                .map(|secs| (secs + shift) * 1000)
                .ok_or_else(|| {
                    ConsoleError::Refused(400, crate::payments::plain(l, "bad_date", &["date", &d]))
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
    let people = blocking(|| c.users.list(&s.merchant_id)).map_err(crate::auth::user_error)?;
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

/// The entries as a table: what each was about names its payment by the
/// merchant's reference and amount, linked to the payment's page.
pub(super) fn table(l: Lang, entries: &[Entry], zone: Zone) -> String {
    let mut out = format!(
        "<table><thead><tr><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "when"),
        t(l, "who"),
        t(l, "what"),
        t(l, "outcome"),
        t(l, "environment"),
        t(l, "where")
    );
    for e in entries {
        let outcome = match e.outcome.as_str() {
            "done" => t(l, "outcome_done"),
            "refused" => t(l, "outcome_refused"),
            "unknown" => t(l, "outcome_unknown"),
            _ => t(l, "outcome_pending"),
        };
        let mut about = about(l, e);
        // The detail as written: the API's status and code, ids and amounts,
        // in words where it is one of the console's own phrases.
        about.extend(e.detail.as_deref().map(|d| match detail_words(l, d) {
            Some(words) => esc(words),
            None => format!("<code>{}</code>", esc(d)),
        }));
        let about = if about.is_empty() {
            String::new()
        } else {
            format!("<br>{}", about.join(" · "))
        };
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{} <strong>{}</strong>{about}</td><td>{outcome}</td><td>{}</td><td>{}</td></tr>",
            zone.when(e.at_ms),
            esc(&e.email),
            esc(&action_words(l, &e.action)),
            esc(&e.action),
            esc(&e.environment),
            esc(e.client.as_deref().unwrap_or_default()),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// The console's own phrases in an entry's detail, in the reader's language.
fn detail_words(l: Lang, detail: &str) -> Option<&'static str> {
    let key = match detail {
        "with a password" => "ad_password",
        "with a second factor" => "ad_second_factor",
        "replaced: a new one to confirm" => "ad_replaced",
        "first password of an invitation" => "ad_first_invitation",
        "first password after a reset" => "ad_first_reset",
        "wrong password" => "ad_wrong_password",
        "wrong second-factor code" => "ad_wrong_code",
        _ => return None,
    };
    Some(t(l, key))
}

/// What an entry was about, as HTML: its payment (the reference, linked,
/// and the amount), else its subject's id.
fn about(l: Lang, e: &Entry) -> Vec<String> {
    let id = e.subject.as_deref().unwrap_or_default();
    let Some(p) = &e.payment else {
        return (!id.is_empty()).then(|| esc(id)).into_iter().collect();
    };
    let name = esc(p.reference.as_deref().unwrap_or(id));
    let mut out = vec![if id.is_empty() {
        name
    } else {
        format!("<a href=\"/console/payments/{}\">{name}</a>", esc(id))
    }];
    if let (Some(a), Some(cur)) = (p.amount, &p.currency) {
        out.push(esc(&format::money(l, a, cur)));
    }
    out
}
