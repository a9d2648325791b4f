//! The developer pages: API keys named, shown once, listed with their
//! first characters and last use, and revoked once confirmed as `mmc keys`
//! revokes (a revoked key is refused by the API at once), webhook endpoints added,
//! disabled and given a new secret through the API, deliveries and resend;
//! other roles refused by the server.

use mmc_console_kit::users::Role;
use serde_json::{Value, json};

use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

/// What follows `marker` on the page, up to the next `<`.
fn after<'a>(page: &'a Page, marker: &str) -> &'a str {
    let at = page
        .body
        .find(marker)
        .unwrap_or_else(|| panic!("no {marker} in {}", page.body))
        + marker.len();
    page.body[at..].split('<').next().unwrap()
}

/// The page that shows a key just made, once.
const SHOWN: &str = "/console/developers/keys/new";

/// The fields of the Developers page's key form as the page gives them
/// (its CSRF token and idempotency key), with `name` and `scopes`.
async fn key_form(b: &Browser, name: &str, scopes: &[&str]) -> Vec<(String, String)> {
    let page = b.get("/console/developers").await;
    let mut form = vec![
        ("csrf".to_string(), page.field("csrf")),
        ("idempotency_key".to_string(), page.field("idempotency_key")),
        ("name".to_string(), name.to_string()),
    ];
    form.extend(scopes.iter().map(|s| ("scope".to_string(), s.to_string())));
    form
}

async fn post_form(b: &Browser, path: &str, form: &[(String, String)]) -> Page {
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    b.post(path, &pairs).await
}

/// A key named `name` with `scopes`, made on the Developers page by the
/// person signed in to `b`: the form, its redirect, the page that shows it.
pub(crate) async fn made_key(b: &Browser, name: &str, scopes: &[&str]) -> String {
    let form = key_form(b, name, scopes).await;
    let made = post_form(b, "/console/developers/keys", &form).await;
    assert_eq!(
        (made.status, made.location()),
        (303, SHOWN),
        "{}",
        made.body
    );
    let shown = b.get(SHOWN).await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    after(&shown, "<code class=\"secret\">").to_string()
}

/// The row of the Developers page's key table that holds `text`.
fn row<'a>(page: &'a Page, text: &str) -> &'a str {
    page.body
        .split("<tr>")
        .skip(1)
        .find(|r| r.contains(text))
        .unwrap_or_else(|| panic!("no row with {text} in {}", page.body))
}

fn keys_of(app: &TestApp, merchant: &str) -> Vec<mmc_accounts::KeyInfo> {
    app.service
        .site
        .app
        .accounts
        .list_keys(merchant, mmc_accounts::Environment::Test)
        .unwrap()
}

fn audited(app: &TestApp, merchant: &str, action: &str) -> usize {
    let (entries, _) = app
        .service
        .site
        .console
        .audit
        .list(merchant, &Default::default())
        .unwrap();
    entries
        .iter()
        .filter(|e| e.action == action && e.outcome == "done")
        .count()
}

#[service_test]
async fn a_developer_names_a_key_sees_it_once_and_a_second_submit_makes_no_second_key(
    app: TestApp,
) {
    let merchant = app.new_merchant("Shop");
    let dev = person(&app, &merchant, "dev@shop.bj", Role::Developer).await;
    let page = dev.get("/console/developers").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("value=\"payments:write\""),
        "any scope in test"
    );

    // A name is asked: 1 to 64 characters once trimmed.
    let too_long = "k".repeat(65);
    for bad in ["", "   ", too_long.as_str()] {
        let form = key_form(&dev, bad, &["payments:read"]).await;
        let refused = post_form(&dev, "/console/developers/keys", &form).await;
        assert_eq!(refused.status, 400, "{bad:?}: {}", refused.body);
        assert!(
            refused
                .body
                .contains("Give the key a name of 1 to 64 characters"),
            "{}",
            refused.body
        );
    }
    let form = key_form(&dev, "Shop website", &[]).await;
    let none = post_form(&dev, "/console/developers/keys", &form).await;
    assert_eq!(none.status, 400, "{}", none.body);
    assert!(none.body.contains("at least one scope"), "{}", none.body);
    let made_here = || -> Vec<mmc_accounts::KeyInfo> {
        let keys = keys_of(&app, &merchant);
        keys.into_iter().filter(|k| k.made_by.is_some()).collect()
    };
    assert!(made_here().is_empty(), "nothing made");

    // Made, then shown on the page the form redirects to.
    let form = key_form(
        &dev,
        "  Shop website  ",
        &["payments:read", "webhooks:manage"],
    )
    .await;
    let made = post_form(&dev, "/console/developers/keys", &form).await;
    assert_eq!(
        (made.status, made.location()),
        (303, SHOWN),
        "{}",
        made.body
    );
    assert!(!made.body.contains("mk_test_"), "not in the POST's answer");
    let shown = dev.get(SHOWN).await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    let key = after(&shown, "<code class=\"secret\">").to_string();
    assert!(key.starts_with("mk_test_"), "{key}");
    assert!(shown.body.contains("<strong>Shop website</strong>"));

    // Once: a reload of that page shows it no more.
    let reloaded = dev.get(SHOWN).await;
    assert_eq!(reloaded.status, 200);
    assert!(
        !reloaded.body.contains(&key)
            && reloaded
                .body
                .contains("This key was shown once and is never shown again"),
        "{}",
        reloaded.body
    );
    // The same form sent again (its POST reloaded, a double click): the
    // same page, no second key, and the key is not shown again.
    let again = post_form(&dev, "/console/developers/keys", &form).await;
    assert_eq!((again.status, again.location()), (303, SHOWN));
    assert!(!dev.get(SHOWN).await.body.contains(&key));
    let listed = made_here();
    assert_eq!(listed.len(), 1, "{listed:?}");
    let made = &listed[0];
    assert_eq!(made.name.as_deref(), Some("Shop website"), "trimmed");
    assert_eq!(
        (
            audited(&app, &merchant, "key.create"),
            audited(&app, &merchant, "key.shown")
        ),
        (1, 1)
    );

    // Listed by name and its first characters, never the key itself.
    let prefix = made.prefix.clone().unwrap();
    assert!(key.starts_with(&prefix) && prefix.starts_with("mk_test_"));
    let shown_of_secret = prefix.len() - "mk_test_".len();
    assert!((4..=12).contains(&shown_of_secret), "{prefix}");
    let list = dev.get("/console/developers").await;
    assert!(!list.body.contains(&key));
    let line = row(&list, "Shop website");
    assert!(
        line.contains(&format!("<code>{prefix}…</code>")) && line.contains("<td>never</td>"),
        "{line}"
    );

    // Last used: written once a request used it, not at every request.
    let before = now_ms();
    let (status, _) = app.get(&key, "/api/v1/collect/payments").await;
    assert_eq!(status, 200, "the key works");
    let used = loop {
        if let Some(at) = made_here()[0].last_used_ms {
            break at;
        }
        assert!(now_ms() - before < 10_000, "last use never written");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(used >= before && used <= now_ms(), "{used}");
    // Past the key cache's half second: looked up again, within the minute.
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    assert_eq!(app.get(&key, "/api/v1/collect/payments").await.0, 200);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(made_here()[0].last_used_ms, Some(used));
    let list = dev.get("/console/developers").await;
    assert!(!row(&list, "Shop website").contains("<td>never</td>"));

    let (status, _) = app
        .post(
            &key,
            "/api/v1/collect/payments",
            direct_payment("+2290166000001"),
        )
        .await;
    assert_eq!(status, 403, "with the scopes it was given, no more");

    // In live a developer gives no scope that moves money.
    let live = dev
        .submit(
            "/console/payments",
            "/console/environment",
            &[("environment", "live")],
        )
        .await;
    assert_eq!(live.status, 303, "{}", live.body);
    let page = dev.get("/console/developers").await;
    assert!(
        !page.body.contains("value=\"payments:write\""),
        "{}",
        page.body
    );
    let form = key_form(&dev, "Payouts", &["payments:write"]).await;
    let refused = post_form(&dev, "/console/developers/keys", &form).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[service_test]
async fn revoking_a_key_asks_first_names_it_after_and_is_refused_at_once(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    let dev = person(&app, &merchant, "dev@shop.bj", Role::Developer).await;
    let kept = made_key(&dev, "Point of sale", &["payments:read"]).await;
    let key = made_key(&dev, "Old website", &["payments:read"]).await;
    let k = keys_of(&app, &merchant)
        .into_iter()
        .find(|k| k.name.as_deref() == Some("Old website"))
        .unwrap();
    let prefix = k.prefix.clone().unwrap();
    let path = format!("/console/developers/keys/{}/revoke", k.id);

    // The list offers a link to a page that asks, naming the key.
    let list = dev.get("/console/developers").await;
    assert!(
        row(&list, "Old website").contains(&format!("href=\"{path}\"")),
        "{}",
        list.body
    );
    let ask = dev.get(&path).await;
    assert_eq!(ask.status, 200, "{}", ask.body);
    assert!(
        ask.body.contains("Old website")
            && ask.body.contains(&format!("{prefix}…"))
            && ask
                .body
                .contains(&format!("<form method=\"post\" action=\"{path}\">")),
        "{}",
        ask.body
    );
    assert_eq!(
        app.get(&key, "/api/v1/collect/payments").await.0,
        200,
        "asking revokes nothing"
    );

    let csrf = ask.field("csrf");
    let revoked = dev.post(&path, &[("csrf", &csrf)]).await;
    let done = format!("/console/developers?revoked={}", k.id);
    assert_eq!((revoked.status, revoked.location()), (303, done.as_str()));
    let (status, e) = app.get(&key, "/api/v1/collect/payments").await;
    assert_eq!(status, 401, "refused from the next request: {e}");
    let told = dev.get(&done).await;
    assert!(
        told.body.contains("Old website") && told.body.contains(&format!("({prefix}…) is revoked")),
        "{}",
        told.body
    );
    assert!(row(&told, "Old website").contains("revoked"));

    // Sent again, or its page reloaded: nothing more happens.
    let again = dev.post(&path, &[("csrf", &csrf)]).await;
    assert_eq!((again.status, again.location()), (303, done.as_str()));
    assert_eq!(dev.get(&path).await.location(), done);
    assert_eq!(audited(&app, &merchant, "key.revoke"), 1);
    assert_eq!(app.get(&kept, "/api/v1/collect/payments").await.0, 200);

    // A key of another merchant is not this console's to revoke.
    let (other, other_key, _) = app.merchant("Other");
    let theirs = keys_of(&app, &other);
    let path = format!("/console/developers/keys/{}/revoke", theirs[0].id);
    assert_eq!(dev.get(&path).await.status, 404);
    assert_eq!(dev.post(&path, &[("csrf", &csrf)]).await.status, 404);
    assert_eq!(app.get(&other_key, "/api/v1/collect/payments").await.0, 200);
}

#[service_test]
async fn support_and_finance_are_refused_the_developer_pages_by_the_server(app: TestApp) {
    let (merchant, key, _) = app.merchant("Shop");
    let keys = app
        .service
        .site
        .app
        .accounts
        .list_keys(&merchant, mmc_accounts::Environment::Test)
        .unwrap();
    for (email, role) in [
        ("agent@shop.bj", Role::Support),
        ("finance@shop.bj", Role::Finance),
    ] {
        let who = person(&app, &merchant, email, role).await;
        assert!(
            !who.get("/console/payments")
                .await
                .body
                .contains("/console/developers")
        );
        let ask = format!("/console/developers/keys/{}/revoke", keys[0].id);
        for path in [
            "/console/developers",
            "/console/developers/webhooks",
            "/console/developers/events",
            "/console/developers/keys/new",
            ask.as_str(),
        ] {
            assert_eq!(who.get(path).await.status, 403, "{role:?} {path}");
        }
        for (path, form) in [
            (
                "/console/developers/keys".to_string(),
                vec![("name", "Mine"), ("scope", "payments:read")],
            ),
            (
                format!("/console/developers/keys/{}/revoke", keys[0].id),
                vec![],
            ),
            (
                "/console/developers/webhooks".to_string(),
                vec![("url", "http://127.0.0.1:9/x")],
            ),
        ] {
            let refused = who.submit("/console/payments", &path, &form).await;
            assert_eq!(refused.status, 403, "{role:?} {path}: {}", refused.body);
        }
    }
    assert_eq!(
        app.get(&key, "/api/v1/collect/payments").await.0,
        200,
        "nothing revoked"
    );
    let (_, endpoints) = app.get(&key, "/api/v1/webhook-endpoints").await;
    assert_eq!(endpoints["data"], json!([]));
}

#[service_test]
async fn a_developer_adds_disables_and_rekeys_an_endpoint_and_reads_its_deliveries() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Shop");
    let dev = person(&app, &merchant, "dev@shop.bj", Role::Developer).await;
    let hooks = "/console/developers/webhooks";

    let bad = dev
        .submit(
            hooks,
            hooks,
            &[("url", "not a url"), ("enabled_events", "*")],
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    assert!(
        bad.body.contains("value=\"not a url\""),
        "the form keeps what was typed"
    );

    let added = dev
        .submit(
            hooks,
            hooks,
            &[
                ("url", "http://127.0.0.1:9/hook"),
                ("enabled_events", "collect.payment.completed"),
            ],
        )
        .await;
    assert_eq!(added.status, 201, "{}", added.body);
    let secret = after(&added, "<code class=\"secret\">").to_string();
    assert!(secret.starts_with("whsec_"), "{secret}");
    let (_, list) = app.get(&key, "/api/v1/webhook-endpoints").await;
    let endpoint: Value = list["data"][0].clone();
    let id = id_of(&endpoint);
    assert_eq!(endpoint["disabled"], false, "{list}");

    let off = dev
        .submit(
            hooks,
            &format!("{hooks}/{id}/disabled"),
            &[("disabled", "true")],
        )
        .await;
    assert_eq!(off.status, 303, "{}", off.body);
    let (_, list) = app.get(&key, "/api/v1/webhook-endpoints").await;
    assert_eq!(list["data"][0]["disabled"], true, "{list}");
    // A disabled endpoint gets nothing new, while an enabled one does.
    let (status, _) = app
        .post(
            &key,
            "/api/v1/webhook-endpoints",
            json!({"url": "http://127.0.0.1:9/other"}),
        )
        .await;
    assert_eq!(status, 201);
    let (paid, _) = completed_payment(&app, &key).await;
    let (_, events) = app
        .get(
            &key,
            &format!("/api/v1/events?payment={paid}&type=collect.payment.completed"),
        )
        .await;
    let event = id_of(&events["data"][0]);
    let started = std::time::Instant::now();
    let full = loop {
        let (_, full) = app.get(&key, &format!("/api/v1/events/{event}")).await;
        if full["deliveries"].as_array().is_some_and(|d| !d.is_empty()) {
            break full;
        }
        assert!(started.elapsed().as_secs() < 20, "never dispatched: {full}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    let urls: Vec<&str> = full["deliveries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["url"].as_str().unwrap())
        .collect();
    assert_eq!(urls, ["http://127.0.0.1:9/other"], "{full}");

    let on = dev
        .submit(
            hooks,
            &format!("{hooks}/{id}/disabled"),
            &[("disabled", "false")],
        )
        .await;
    assert_eq!(on.status, 303);
    let rotated = dev
        .submit(hooks, &format!("{hooks}/{id}/rotate"), &[])
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let new_secret = after(&rotated, "<code class=\"secret\">").to_string();
    assert!(new_secret.starts_with("whsec_") && new_secret != secret);

    // The event, as sent, and a resend that reaches the endpoint enabled again.
    let listed = dev.get("/console/developers/events").await;
    assert!(listed.body.contains(&event), "{}", listed.body);
    let page = format!("/console/developers/events/{event}");
    let shown = dev.get(&page).await;
    assert!(
        shown.body.contains("&quot;collect.payment.completed&quot;"),
        "{}",
        shown.body
    );
    let resent = dev
        .submit(
            &page,
            &format!("/console/events/{event}/resend"),
            &[("back", "events")],
        )
        .await;
    assert_eq!(
        (resent.status, resent.location()),
        (303, format!("{page}?done=resend").as_str())
    );
    let shown = dev.get(&page).await;
    assert!(
        shown.body.contains("http://127.0.0.1:9/hook"),
        "the delivery: {}",
        shown.body
    );

    // The API itself: its own checks on the new operations.
    let (status, e) = app
        .post(
            &key,
            &format!("/api/v1/webhook-endpoints/{id}"),
            json!({"disabled": "yes"}),
        )
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (400, Some("parameter_invalid_boolean"))
    );
    let (status, _) = app
        .post(
            &key,
            "/api/v1/webhook-endpoints/we_nope/rotate-secret",
            json!({}),
        )
        .await;
    assert_eq!(status, 404);

    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let audit = owner.get("/console/audit").await;
    for action in [
        "endpoint.add",
        "endpoint.disable",
        "endpoint.enable",
        "endpoint.rotate_secret",
    ] {
        assert!(
            audit.body.contains(&format!("<strong>{action}</strong>")),
            "{action}: {}",
            audit.body
        );
    }
}
