use serde_json::{Value, json};

use crate::support::*;
use mmc_test_kit::service_test;

async fn status_and_body(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[service_test]
async fn missing_unknown_and_revoked_keys_get_401_in_the_current_shape(app: TestApp) {
    let url = app.url("/api/v1/collect/payments/anything");
    let (status, body) = status_and_body(app.client.get(&url).send().await.unwrap()).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["type"], "authentication_error");
    assert_eq!(body["error"]["code"], "missing_api_key");

    let (status, body) = status_and_body(
        app.client
            .get(&url)
            .bearer_auth(new_key())
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], "invalid_api_key");

    let (status, _) = status_and_body(
        app.client
            .get(&url)
            .bearer_auth("not-a-uuid")
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);

    let m = app.accounts.create_merchant("Shop").unwrap();
    let k = app
        .accounts
        .create_key(&m.id, mmc_accounts::Environment::Test)
        .unwrap();
    let (status, _) = status_and_body(
        app.client
            .get(&url)
            .bearer_auth(&k.key)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 404, "a valid key reaches the component");
    // Revoked through another handle on the database (as the CLI does): the
    // server's key cache may still accept it for 500 ms, never a request
    // sent after that.
    app.accounts.revoke_key(&k.id).unwrap();
    let revoked_at = std::time::Instant::now();
    let (status, body) = loop {
        let sent = revoked_at.elapsed();
        let (status, body) = status_and_body(
            app.client
                .get(&url)
                .bearer_auth(&k.key)
                .send()
                .await
                .unwrap(),
        )
        .await;
        if status != 404 {
            break (status, body);
        }
        assert!(
            sent < std::time::Duration::from_millis(500),
            "accepted when sent {sent:?} after revocation"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(status, 401, "revoked within 500 ms");
    assert_eq!(body["error"]["code"], "invalid_api_key");
}

#[service_test]
async fn x_service_environment_is_ignored_whatever_its_value(app: TestApp) {
    let test_key = app.test_key("Shop");
    for value in ["live", "production", "", "staging"] {
        let resp = app
            .client
            .post(app.url("/api/v1/collect/payments"))
            .bearer_auth(&test_key)
            .header("Idempotency-Key", new_key())
            .header("X-Service-Environment", value)
            .json(&direct_payment("+2290166000001"))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201, "{value:?}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["environment"], "test", "{value:?}");
    }
}

#[service_test]
async fn x_api_key_header_is_equivalent_to_bearer(app: TestApp) {
    let key = app.test_key("Shop");
    let resp = app
        .client
        .get(app.url("/api/v1/collect/payments/operators/"))
        .header("X-API-Key", &key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[service_test]
async fn legacy_paths_get_401_in_the_legacy_shape(app: TestApp) {
    let (status, body) = status_and_body(
        app.client
            .get(app.url("/api/v1/collect/mobile-money/abc/"))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 401);
    assert!(body["error"].is_string(), "{body}");
    assert_eq!(body["code"], "unauthorized");
}

#[service_test]
async fn the_key_fixes_the_environment_whatever_the_header_says(app: TestApp) {
    let test_key = app.test_key("Shop");
    let resp = app
        .client
        .post(app.url("/api/v1/collect/payments"))
        .bearer_auth(&test_key)
        .header("Idempotency-Key", new_key())
        .header("X-Service-Environment", "live")
        .json(&direct_payment("+2290166000001"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["environment"], "test");
}

#[service_test]
async fn each_key_is_rate_limited_with_retry_after() {
    let app = spawn_app_with(|c| {
        c.rate_limit.per_second = 1.0;
        c.rate_limit.burst = 2.0;
    })
    .await;
    let (_, key, live) = app.merchant("Shop");
    let url = app.url("/api/v1/collect/payments/operators/");
    for _ in 0..2 {
        assert_eq!(
            app.client
                .get(&url)
                .bearer_auth(&key)
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
    }
    let resp = app.client.get(&url).bearer_auth(&key).send().await.unwrap();
    assert_eq!(resp.status(), 429);
    let wait: u64 = resp.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=2).contains(&wait), "{wait}");
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["type"], "rate_limit_error");
    // Another key has its own bucket; the legacy generation answers in its shape.
    assert_eq!(
        app.client
            .get(&url)
            .bearer_auth(&live)
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    app.client
        .get(app.url("/api/v1/collect/operators/"))
        .bearer_auth(&live)
        .send()
        .await
        .unwrap();
    let resp = app
        .client
        .get(app.url("/api/v1/collect/operators/"))
        .bearer_auth(&live)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.json::<Value>().await.unwrap()["code"], "rate_limited");
}

#[service_test]
async fn a_key_does_only_what_its_scopes_allow(app: TestApp) {
    use mmc_accounts::Environment;
    use mmc_accounts::scopes::Scopes;
    let (merchant, full, _) = app.merchant("Scoped");
    let scoped = |s: &str| {
        app.accounts
            .create_key_with(
                &merchant,
                Environment::Test,
                Some(Scopes::parse(s).unwrap()),
            )
            .unwrap()
    };
    let reader = scoped("payments:read");
    assert_eq!(reader.scopes, vec!["payments:read"]);
    let writer = scoped("payments:write");

    let (_, p) = app
        .create_ok(&full, &direct_payment("+2290197000001"))
        .await;
    let path = format!("/api/v1/collect/payments/{}", id_of(&p));

    // Reading needs payments:read; creating, payments:write.
    assert_eq!(app.get(&reader.key, &path).await.0, 200);
    let (status, e) = app.get(&writer.key, &path).await;
    assert_eq!(status, 403, "{e}");
    assert_eq!(e["error"]["type"], "permission_error");
    assert_eq!(e["error"]["code"], "insufficient_scope");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("payments:read")
    );
    let (status, e) = app
        .create(&reader.key, &new_key(), &direct_payment("+2290197000002"))
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("insufficient_scope"))
    );
    assert_eq!(
        app.create(&writer.key, &new_key(), &direct_payment("+2290197000003"))
            .await
            .0,
        201
    );

    // Host-served areas too: webhooks and events need webhooks:manage.
    assert_eq!(
        app.get(&reader.key, "/api/v1/webhook-endpoints").await.0,
        403
    );
    assert_eq!(app.get(&reader.key, "/api/v1/events").await.0, 403);
    let hooks = scoped("webhooks:manage");
    assert_eq!(
        app.get(&hooks.key, "/api/v1/webhook-endpoints").await.0,
        200
    );
    // Resending an event's webhooks takes webhooks:resend (or manage), and
    // that scope reads nothing else: the made-up event passes the scope check
    // and is not found, where a reader is refused before any lookup.
    let resender = scoped("webhooks:resend");
    let resend = "/api/v1/events/evt_made_up/resend";
    let (status, e) = app.post(&resender.key, resend, json!({})).await;
    assert_eq!(status, 404, "{e}");
    let (status, e) = app.post(&reader.key, resend, json!({})).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("insufficient_scope")),
        "{e}"
    );
    assert_eq!(app.get(&resender.key, "/api/v1/events").await.0, 403);
    assert_eq!(
        app.get(&resender.key, "/api/v1/webhook-endpoints").await.0,
        403
    );
    // The legacy generation answers in its own shape.
    let (status, e) = app.get(&writer.key, "/api/v1/collect/operators/").await;
    assert_eq!(
        (status, e["code"].as_str()),
        (403, Some("forbidden")),
        "{e}"
    );
    // Keys made without scopes keep every one.
    assert_eq!(app.get(&full, "/api/v1/webhook-endpoints").await.0, 200);
}

#[service_test]
async fn anonymous_surfaces_are_limited_per_client_address_and_route() {
    let app = spawn_app_with(|c| {
        c.rate_limit.per_client_per_second = 0.5;
        c.rate_limit.per_client_burst = 3.0;
    })
    .await;
    let key = app.test_key("Shop");
    let checkout = app.url(&format!("/checkout/{}", uuid::Uuid::new_v4()));
    for _ in 0..3 {
        let resp = app.client.get(&checkout).send().await.unwrap();
        assert_eq!(resp.status(), 404, "an unknown payment, within the burst");
    }
    let resp = app.client.get(&checkout).send().await.unwrap();
    assert_eq!(resp.status(), 429);
    assert!(resp.headers().contains_key("retry-after"));
    // Another route has its own bucket: the callbacks are still heard...
    let callback = app.url("/api/v1/psp/mtn-bj/callback");
    let resp = app.client.post(&callback).body("{}").send().await.unwrap();
    assert_ne!(resp.status(), 429);
    // ...and requests with a key are counted by their key, not by address.
    for _ in 0..5 {
        assert_eq!(
            app.create(&key, &new_key(), &direct_payment("+2290197000001"))
                .await
                .0,
            201
        );
    }
}

#[service_test]
async fn a_made_up_key_buys_no_way_around_the_per_client_limits() {
    let app = spawn_app_with(|c| {
        c.rate_limit.per_client_per_second = 0.5;
        c.rate_limit.per_client_burst = 3.0;
    })
    .await;
    // Public routes count by address whatever `Authorization` says.
    let checkout = app.url(&format!("/checkout/{}", uuid::Uuid::new_v4()));
    let statuses: Vec<u16> = futures::future::join_all((0..6).map(|i| {
        app.client
            .get(&checkout)
            .header("authorization", format!("Bearer junk-{i}"))
            .send()
    }))
    .await
    .into_iter()
    .map(|r| r.unwrap().status().as_u16())
    .collect();
    assert_eq!(
        statuses.iter().filter(|s| **s == 429).count(),
        3,
        "{statuses:?}"
    );
    // Keys that authenticate nothing are counted per address too: 401 until
    // the bucket is empty, then 429 (both on the merchant API and the host's own).
    let mut seen = Vec::new();
    for path in ["/api/v1/collect/payments/x", "/api/v1/webhook-endpoints"] {
        for _ in 0..3 {
            let resp = app
                .client
                .get(app.url(path))
                .header("authorization", "Bearer mk_test_made_up")
                .send()
                .await
                .unwrap();
            seen.push(resp.status().as_u16());
        }
    }
    assert_eq!(seen, [401, 401, 401, 429, 429, 429], "{seen:?}");
    // A real key is counted by its key, not by address.
    let key = app.test_key("Shop");
    assert_eq!(
        app.create(&key, &new_key(), &direct_payment("+2290197000001"))
            .await
            .0,
        201
    );
}
