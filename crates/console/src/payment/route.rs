//! The route a payment went through, on its page: the router's reason,
//! each route it asked before, and the router's notes in the reader's words.

use std::fmt::Write;

use serde_json::Value;

use mmc_console_kit::html::{self, esc, t};
use mmc_console_kit::outcomes;

/// A word of the router's (a reason or a verdict) in the reader's language;
/// the router's own when the console has none for it.
fn route_word(l: html::Lang, prefix: &str, code: &str) -> String {
    let key = format!("{prefix}{code}");
    match t(l, &key) {
        "⟦?⟧" => code.to_string(),
        w => w.to_string(),
    }
}

/// The router's note on a route (English, with its figures) in the
/// reader's language: each of the router's sentences, figures kept.
pub(crate) fn route_note(l: html::Lang, note: &str) -> String {
    if l == html::Lang::En {
        return note.to_string();
    }
    let nums: Vec<&str> = note
        .split(|c: char| !c.is_ascii_digit())
        .filter(|n| !n.is_empty())
        .collect();
    let n = |i: usize| nums.get(i).copied().unwrap_or("?");
    let after = |marker: &str| note.split_once(marker).map_or("", |(_, r)| r);
    if note.starts_with("healthy:") {
        format!(
            "en bonne santé : {} échecs sur ses {} derniers appels",
            n(0),
            n(1)
        )
    } else if note.starts_with("circuit open:") {
        format!(
            "circuit ouvert : {} échecs sur ses {} derniers appels",
            n(0),
            n(1)
        )
    } else if note.starts_with("recovering") {
        "en reprise : un essai peut partir".into()
    } else if note.starts_with("slow:") {
        format!("lent : répond en {} ms en moyenne", n(0))
    } else if note.starts_with("delayed") {
        "retardé, selon son fournisseur".into()
    } else if note.starts_with("closed") {
        "fermé, selon son fournisseur".into()
    } else if note.starts_with("already tried") {
        "déjà essayé : il a répondu que rien n'a été fait".into()
    } else if note.starts_with("not loaded") {
        format!("non chargé, ou ne sert pas {}", after("does not serve "))
    } else if note.starts_with("takes ") {
        format!("accepte de {} à {}, pas {}", n(0), n(1), n(2))
    } else if note.starts_with("insufficient float") {
        format!(
            "provision insuffisante : {}",
            after("its wallet ")
                .replace(" holds ", " détient ")
                .replace(", not ", ", pas ")
        )
    } else {
        note.to_string()
    }
}

/// The provider route the payment went through, why, and the routes that
/// answered before it that nothing was done.
pub(super) fn route_section(l: html::Lang, r: &Value) -> String {
    let Some(adapter) = r["adapter"].as_str() else {
        return String::new();
    };
    let e = &r["explanation"];
    let reason = e["reason"].as_str().unwrap_or_default();
    let mut out = format!(
        "<h2>{}</h2><p><strong>{}</strong> · {} · <code>{}</code></p><ul>",
        t(l, "route"),
        esc(adapter),
        esc(&route_word(l, "route_why_", reason)),
        esc(e["rule"].as_str().unwrap_or_default())
    );
    for c in e["candidates"].as_array().into_iter().flatten() {
        let verdict = c["verdict"].as_str().unwrap_or_default().replace(' ', "_");
        let _ = write!(
            out,
            "<li>{} · {} · {}</li>",
            esc(c["adapter"].as_str().unwrap_or_default()),
            esc(&route_word(l, "route_verdict_", &verdict)),
            esc(&route_note(l, c["note"].as_str().unwrap_or_default()))
        );
    }
    out.push_str("</ul>");
    let tried = r["tried"].as_array().map(Vec::as_slice).unwrap_or_default();
    if !tried.is_empty() {
        let _ = write!(out, "<p>{}</p><ul>", t(l, "route_tried"));
        for tr in tried {
            let _ = write!(
                out,
                "<li>{} · {}</li>",
                esc(tr["adapter"].as_str().unwrap_or_default()),
                esc(&outcomes::reason(l, tr["code"].as_str().unwrap_or_default()).0)
            );
        }
        out.push_str("</ul>");
    }
    out
}
