//! The audit log's entries as a table, as its page shows them.

use std::fmt::Write;

use super::{Entry, action_words};
use crate::format::{self, Zone};
use crate::html::{Lang, esc, t};

/// The entries as a table: what each was about names its payment by the
/// merchant's reference and amount, linked to the payment's page.
pub fn table(l: Lang, entries: &[Entry], zone: Zone) -> String {
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
