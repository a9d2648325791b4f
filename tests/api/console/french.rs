//! The console in French: every page a person opens reads in French, with
//! no word of the English interface left and none missing from the tables
//! (a missing word shows as `⟦?⟧`).

use mmc_console_kit::users::Role;
use serde_json::json;

use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

/// Words of the console's English that French never uses: any one of them
/// on a French page is a word left untranslated.
const ENGLISH: &[&str] = &[
    "payments",
    "payment",
    "refund",
    "refunds",
    "refunded",
    "cancel",
    "cancelled",
    "amount",
    "created",
    "back",
    "nothing",
    "failed",
    "completed",
    "pending",
    "processing",
    "approve",
    "approved",
    "reject",
    "rejected",
    "save",
    "filter",
    "export",
    "older",
    "newer",
    "balance",
    "balances",
    "wallet",
    "available",
    "reserved",
    "sign",
    "team",
    "audit",
    "security",
    "developers",
    "overview",
    "links",
    "link",
    "the",
    "and",
    "with",
    "your",
    "this",
    "from",
    "was",
    "were",
    "are",
    "not",
    "any",
    "who",
    "what",
    "when",
    "where",
    "reason",
    "operator",
    "phone",
    "reference",
    "email",
    "password",
    "owner",
    "developer",
    "invited",
    "remove",
    "resend",
    "deliveries",
    "attempts",
    "timeline",
    "calls",
    "books",
    "fee",
    "fees",
    "days",
    "show",
    "opened",
    "closed",
    "account",
    "category",
    "record",
    "kind",
    "matched",
    "missing",
    "duplicate",
    "items",
    "batch",
    "batches",
    "progress",
    "since",
    "upload",
    "file",
    "keys",
    "revoke",
    "revoked",
    "never",
    "endpoint",
    "endpoints",
    "events",
    "event",
    "rotate",
    "disable",
    "enable",
    "disabled",
    "enabled",
    "switch",
    "expires",
    "expired",
    "successful",
    "success",
    "rate",
    "today",
    "yesterday",
    "week",
    "month",
    "previous",
    "period",
    "chart",
    "new",
    "last",
    "used",
    "name",
    "scope",
    "scopes",
    "recovery",
    "again",
    "customer",
    "country",
    "status",
    "outcome",
    "done",
    "refused",
    "unknown",
    "held",
    "holds",
    "float",
    "insufficient",
    "wait",
    "waiting",
    "approval",
    "line",
    "review",
    "beneficiary",
    "provider",
    "reconciled",
    "reconcile",
    "statement",
    "settlement",
    "settled",
    "case",
    "cases",
    "drift",
    "download",
    "help",
];

/// What a reader sees of a page: its text, and the attributes that are
/// read out or shown (labels, placeholders, alternatives), without the
/// values a person typed or the service made (codes, ids, emails, URLs).
fn seen(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        out.push_str(&rest[..open]);
        out.push(' ');
        let close = rest[open..].find('>').map_or(rest.len(), |c| open + c + 1);
        let tag = &rest[open..close];
        for attr in ["aria-label", "alt", "placeholder", "title", "data-label"] {
            let marker = format!("{attr}=\"");
            if let Some(at) = tag.find(&marker) {
                let value = &tag[at + marker.len()..];
                out.push(' ');
                out.push_str(value.split('"').next().unwrap_or_default());
                out.push(' ');
            }
        }
        rest = &rest[close..];
        // What a person or the service wrote, not the interface's words.
        for quoted in ["<code", "<pre", "<title"] {
            if tag.starts_with(quoted) {
                let end = format!("</{}>", &quoted[1..]);
                if let Some(e) = rest.find(&end) {
                    rest = &rest[e..];
                }
            }
        }
    }
    out.push_str(rest);
    out.replace("&#39;", "'")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}

/// The English words on a page, with their surroundings.
fn english_on(page: &str) -> Vec<String> {
    let text = seen(page);
    let tokens: Vec<&str> = text
        .split(|c: char| !(c.is_alphanumeric() || "._-@/:'’+".contains(c)))
        .filter(|w| !w.is_empty())
        .collect();
    tokens
        .iter()
        .enumerate()
        .filter(|(_, w)| ENGLISH.contains(&w.to_lowercase().as_str()))
        .map(|(i, w)| {
            let from = i.saturating_sub(4);
            format!(
                "{w} (in: {})",
                tokens[from..(i + 4).min(tokens.len())].join(" ")
            )
        })
        .collect()
}

#[test]
fn the_check_finds_english_and_ignores_codes() {
    let page = "<p>Remboursé le <code>collect.payment.completed</code></p>\
                <td data-label=\"Amount\">1 500 FCFA</td><a href=\"/console/payments\">Paiements</a>";
    let found = english_on(page);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].starts_with("Amount"), "{found:?}");
    assert!(english_on("<p>collect.payment.failed order-1 awa@shop.bj</p>").is_empty());
}

#[service_test]
async fn every_console_page_reads_in_french() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Boutique Awa");
    let (paid, _) = completed_payment(&app, &key).await;
    let (failed, _) = app.create_ok(&key, &direct_payment("+2290166000002")).await;
    let (_, synced) = app
        .get(&key, &format!("/api/v1/collect/payments/{failed}?sync=1"))
        .await;
    assert_eq!(synced["status"], "failed", "{synced}");
    let (status, _) = app
        .post(
            &key,
            "/api/v1/webhook-endpoints",
            json!({"url": "http://127.0.0.1:9/hook"}),
        )
        .await;
    assert_eq!(status, 201);
    let batch = batch_by_key(&app, &key, "paie-1").await;
    let owner = person(&app, &merchant, "owner@awa.bj", Role::Owner).await;
    let support = person(&app, &merchant, "aide@awa.bj", Role::Support).await;
    assert_eq!(owner.get("/console/overview?lang=fr").await.status, 200);
    assert_eq!(support.get("/console/payments?lang=fr").await.status, 200);
    let made = owner
        .submit(
            "/console/links",
            "/console/links",
            &[
                ("idempotency_key", &new_key()),
                ("amount", "2 500"),
                ("description", "Robe en wax"),
                ("days", "7"),
                ("country", "BJ"),
            ],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.body);
    let link = made.location().to_string();
    let (_, events) = app
        .get(&key, &format!("/api/v1/events?payment={paid}"))
        .await;
    let event = id_of(&events["data"][0]);
    let team = owner.get("/console/team").await;
    let support_id = member_id(&team.body, "aide@awa.bj");

    let mut pages: Vec<(&Browser, String)> = [
        "/console/overview",
        "/console/payments",
        "/console/payments?status=failed",
        &format!("/console/payments/{paid}"),
        &format!("/console/payments/{failed}"),
        &format!("/console/payments/{paid}/refund"),
        &format!("/console/payments/{paid}/cancel"),
        &format!("/console/payments/{failed}/refund"),
        "/console/links",
        &link,
        "/console/bulk",
        &format!("/console/bulk/{batch}"),
        &format!("/console/bulk/{batch}/approve"),
        "/console/developers",
        "/console/developers/webhooks",
        "/console/developers/events",
        &format!("/console/developers/events/{event}"),
        "/console/finance",
        "/console/team",
        "/console/audit",
        "/console/security",
        "/console/payments/pay_nothing_here",
        "/console/payments?from=hier",
    ]
    .into_iter()
    .map(|p| (&owner, p.to_string()))
    .collect();
    pages.push((&owner, format!("/console/team/{support_id}/remove")));
    pages.push((&owner, format!("/console/team/{support_id}/reset")));
    // Pages a support person meets: refused ones included.
    for p in ["/console/payments", "/console/developers", "/console/audit"] {
        pages.push((&support, p.to_string()));
    }
    pages.push((&support, format!("/console/payments/{paid}/refund")));
    let mut found = Vec::new();
    for (who, path) in &pages {
        let page = who.get(path).await;
        assert!(
            page.body.contains("<html lang=\"fr\">"),
            "{path}: {}",
            page.body
        );
        assert!(
            !page.body.contains('⟦'),
            "{path}: a word is missing: {}",
            page.body
        );
        for w in english_on(&page.raw) {
            found.push(format!("{path}: {w}"));
        }
    }
    assert!(
        found.is_empty(),
        "English on French pages:\n{}",
        found.join("\n")
    );
}

/// The id of the member `email` on the team page (from their remove link).
pub fn member_id(team_page: &str, email: &str) -> String {
    let row = team_page
        .split("<tr")
        .find(|row| row.contains(email))
        .unwrap_or_else(|| panic!("{email} not on {team_page}"));
    let at = row.find("/console/team/").expect("a remove link") + "/console/team/".len();
    row[at..].split('/').next().unwrap().to_string()
}
