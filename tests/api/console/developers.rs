//! The developer pages: API keys made and revoked as `mmc keys` does (a
//! revoked key is refused by the API at once), webhook endpoints added,
//! disabled and given a new secret through the API, deliveries and resend;
//! other roles refused by the server.

use mmc_host::console::users::Role;
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

#[service_test]
async fn a_developer_creates_a_key_shown_once_and_a_revoked_key_is_refused_at_once(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    let dev = person(&app, &merchant, "dev@shop.bj", Role::Developer).await;
    let page = dev.get("/console/developers").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("value=\"payments:write\""),
        "any scope in test"
    );

    let none = dev
        .submit("/console/developers", "/console/developers/keys", &[])
        .await;
    assert_eq!(none.status, 400, "{}", none.body);
    assert!(none.body.contains("at least one scope"), "{}", none.body);

    let made = dev
        .submit(
            "/console/developers",
            "/console/developers/keys",
            &[("scope", "payments:read"), ("scope", "webhooks:manage")],
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let key = after(&made, "<code class=\"secret\">").to_string();
    assert!(key.starts_with("mk_test_"), "{key}");
    // Shown once: the list never holds it again.
    assert!(!dev.get("/console/developers").await.body.contains(&key));

    let (status, _) = app.get(&key, "/api/v1/collect/payments").await;
    assert_eq!(status, 200, "the key works");
    let (status, _) = app
        .post(
            &key,
            "/api/v1/collect/payments",
            direct_payment("+2290166000001"),
        )
        .await;
    assert_eq!(status, 403, "with the scopes it was given, no more");

    let listed = app
        .service
        .site
        .app
        .accounts
        .list_keys(&merchant, mmc_host::accounts::Environment::Test)
        .unwrap();
    let id = listed
        .iter()
        .find(|k| k.scopes.to_string() == "payments:read,webhooks:manage")
        .unwrap()
        .id
        .clone();
    let revoked = dev
        .submit(
            "/console/developers",
            &format!("/console/developers/keys/{id}/revoke"),
            &[],
        )
        .await;
    assert_eq!(
        (revoked.status, revoked.location()),
        (303, "/console/developers?done=revoke")
    );
    let (status, e) = app.get(&key, "/api/v1/collect/payments").await;
    assert_eq!(status, 401, "refused from the next request: {e}");
    assert!(
        dev.get("/console/developers")
            .await
            .body
            .contains("revoked")
    );

    // A key of another merchant is not this console's to revoke.
    let (other, other_key, _) = app.merchant("Other");
    let theirs = app
        .service
        .site
        .app
        .accounts
        .list_keys(&other, mmc_host::accounts::Environment::Test)
        .unwrap();
    let stranger = dev
        .submit(
            "/console/developers",
            &format!("/console/developers/keys/{}/revoke", theirs[0].id),
            &[],
        )
        .await;
    assert_eq!(stranger.status, 404);
    assert_eq!(app.get(&other_key, "/api/v1/collect/payments").await.0, 200);

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
    let refused = dev
        .submit(
            "/console/developers",
            "/console/developers/keys",
            &[("scope", "payments:write")],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);

    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let audit = owner.get("/console/audit").await;
    assert!(
        audit.body.contains("<strong>key.create</strong>")
            && audit.body.contains("<strong>key.revoke</strong>"),
        "{}",
        audit.body
    );
}

#[service_test]
async fn support_and_finance_are_refused_the_developer_pages_by_the_server(app: TestApp) {
    let (merchant, key, _) = app.merchant("Shop");
    let keys = app
        .service
        .site
        .app
        .accounts
        .list_keys(&merchant, mmc_host::accounts::Environment::Test)
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
        for path in [
            "/console/developers",
            "/console/developers/webhooks",
            "/console/developers/events",
        ] {
            assert_eq!(who.get(path).await.status, 403, "{role:?} {path}");
        }
        for (path, form) in [
            (
                "/console/developers/keys".to_string(),
                vec![("scope", "payments:read")],
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
