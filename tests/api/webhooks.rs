//! Events and webhooks: outbox, signed delivery, retries, endpoint management,
//! destination safety, and delivery after a SIGKILL.

use std::time::Duration;

use serde_json::{Value, json};

use crate::process::post_json;
use crate::receiver::{Receiver, verify};
use crate::support::*;
use mmc_test_kit::service_test;

async fn fast_webhooks() -> TestApp {
    spawn_app_with(|c| {
        c.webhooks.retry_schedule_ms = vec![100, 200];
        c.webhooks.poll_interval_ms = 20;
        c.components
            .entry("simulator".into())
            .or_default()
            .settings
            .insert("completion_delay_ms".into(), "0".into());
    })
    .await
}

/// A receiver subscribed to `collect.payment.created` for `key`'s merchant.
async fn receiving_created(app: &TestApp, key: &str) -> Receiver {
    let receiver = Receiver::start().await;
    let (status, endpoint) = app
        .post(
            key,
            "/api/v1/webhook-endpoints",
            json!({"url": receiver.url(), "enabled_events": ["collect.payment.created"]}),
        )
        .await;
    assert_eq!(status, 201, "{endpoint}");
    receiver
}

#[service_test]
async fn subscribed_events_arrive_signed_with_the_spec_envelope() {
    let app = fast_webhooks().await;
    let (merchant, key, _) = app.merchant("Shop");
    let receiver = Receiver::start().await;
    let (status, endpoint) = app.post(&key,
        "/api/v1/webhook-endpoints",
        json!({"url": receiver.url(), "enabled_events": ["collect.payment.created", "collect.payment.completed"]}),
    )
    .await;
    assert_eq!(status, 201, "{endpoint}");
    let secret = endpoint["secret"].as_str().unwrap().to_string();
    assert!(secret.starts_with("whsec_"));
    let (_, list) = app.get(&key, "/api/v1/webhook-endpoints").await;
    assert_eq!(list["data"][0]["id"], endpoint["id"]);
    assert!(
        list["data"][0].get("secret").is_none(),
        "the secret is shown once"
    );

    let (_, p) = app
        .create(&key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    app.get(
        &key,
        &format!("/api/v1/collect/payments/{}?sync=true", id_of(&p)),
    )
    .await;
    let got = receiver.wait_for(10, |r| r.len() >= 2).await;
    let mut types: Vec<String> = got
        .iter()
        .map(|r| r.json()["type"].as_str().unwrap().to_string())
        .collect();
    types.sort(); // delivery order is not guaranteed; `created` and the status tell the order
    assert_eq!(
        types,
        vec!["collect.payment.completed", "collect.payment.created"],
        "processing is not subscribed"
    );
    for r in &got {
        assert!(
            verify(&secret, &r.signature, &r.body),
            "signature over the raw body: {}",
            r.signature
        );
        assert!(!verify("whsec_wrong", &r.signature, &r.body));
        let e = r.json();
        assert!(id_of(&e).starts_with("evt_"));
        assert_eq!(id_of(&e), r.event_id_header);
        assert_eq!(e["object"], "event");
        assert_eq!(e["api_version"], "2026-06");
        assert!(e["created"].as_u64().unwrap() > 1_700_000_000);
        assert_eq!(e["environment"], "test");
        assert_eq!(e["merchant_id"], merchant);
        assert_eq!(e["data"]["object"]["object"], "collect.payment");
        assert_eq!(e["data"]["object"]["id"], p["id"]);
    }
    let completed = got
        .iter()
        .find(|r| r.json()["type"] == "collect.payment.completed")
        .unwrap();
    assert_eq!(completed.json()["data"]["object"]["status"], "completed");
}

#[service_test]
async fn a_failing_endpoint_gets_the_event_again_with_the_same_id_and_attempts_are_recorded() {
    let app = fast_webhooks().await;
    let key = app.test_key("Shop");
    let receiver = Receiver::start().await;
    receiver
        .fail_first
        .store(2, std::sync::atomic::Ordering::SeqCst);
    app.post(
        &key,
        "/api/v1/webhook-endpoints",
        json!({"url": receiver.url(), "enabled_events": ["collect.payment.created"]}),
    )
    .await;
    app.create(&key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    let got = receiver.wait_for(10, |r| r.len() >= 3).await;
    let ids: Vec<String> = got.iter().map(|r| id_of(&r.json())).collect();
    assert!(
        ids.iter().all(|i| *i == ids[0]),
        "duplicates carry the same event id: {ids:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        receiver.events().len(),
        3,
        "delivered once it got a 2xx, then no more"
    );

    // Every attempt sends the same bytes (the body is built from the stored
    // event each time), and the payment as it was when the event happened.
    assert!(got.iter().all(|r| r.body == got[0].body));
    assert_eq!(got[0].json()["data"]["object"]["status"], "pending");
    let (_, now) = app
        .get(
            &key,
            &format!(
                "/api/v1/collect/payments/{}",
                got[0].json()["data"]["object"]["id"].as_str().unwrap()
            ),
        )
        .await;
    assert_ne!(now["status"], "pending", "moved on since: {now}");

    let (_, event) = app.get(&key, &format!("/api/v1/events/{}", ids[0])).await;
    let mut listed = event.clone();
    listed.as_object_mut().unwrap().remove("deliveries");
    assert_eq!(listed, got[0].json(), "the events API shows the body sent");
    let d = &event["deliveries"][0];
    assert_eq!(d["status"], "delivered");
    let codes: Vec<i64> = d["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status_code"].as_i64().unwrap())
        .collect();
    assert_eq!(codes, vec![500, 500, 200]);
    assert!(d["attempts"][0]["latency_ms"].is_i64());

    // Manual resend: once more, same id.
    let (status, _) = app
        .post(
            &key,
            &format!("/api/v1/events/{}/resend", ids[0]),
            json!({}),
        )
        .await;
    assert_eq!(status, 202);
    let got = receiver.wait_for(10, |r| r.len() >= 4).await;
    assert_eq!(got[3].json()["id"], ids[0].as_str());
}

/// A stored event whose body this version cannot build (a compact form it
/// does not read) is never sent as its raw bytes: each attempt is recorded
/// as `event_unreadable` and retried on the schedule; the events API says
/// so for that event and lists the others.
#[service_test]
async fn an_event_whose_body_cannot_be_built_is_recorded_never_sent() {
    use mmc_storage::sql::Value as Sql;
    let app = fast_webhooks().await;
    let key = app.test_key("Shop");
    let receiver = receiving_created(&app, &key).await;
    for _ in 0..2 {
        app.create(&key, &new_key(), &direct_payment("+2290166000004"))
            .await;
    }
    let got = receiver.wait_for(10, |r| r.len() >= 2).await;
    let (bad, good) = (id_of(&got[0].json()), id_of(&got[1].json()));
    let db = test_storage(&base_config(app.data_dir.path()));
    db.sql
        .write(|c| {
            c.execute(
                "UPDATE outbox SET payload = ?1 WHERE id = ?2",
                &[Sql::Blob(vec![1, 0xff, 0xfe, 0x00]), bad.as_str().into()],
            )
        })
        .unwrap();
    let (status, _) = app
        .post(&key, &format!("/api/v1/events/{bad}/resend"), json!({}))
        .await;
    assert_eq!(status, 202);
    let unreadable = || {
        db.sql
            .read(|c| {
                c.query(
                    "SELECT COUNT(*) FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id
                     WHERE d.event_id = ?1 AND a.error = 'event_unreadable'",
                    &[bad.as_str().into()],
                )?[0]
                    .int(0)
            })
            .unwrap()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while unreadable() < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "attempts recorded and retried"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(receiver.events().len(), 2, "nothing sent for it");

    let (status, e) = app.get(&key, &format!("/api/v1/events/{bad}")).await;
    assert_eq!(status, 500, "{e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot be read by this version"),
        "{e}"
    );
    let (status, list) = app.get(&key, "/api/v1/events?limit=100").await;
    assert_eq!(status, 200, "{list}");
    let listed: Vec<&str> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert!(
        listed.contains(&good.as_str()) && !listed.contains(&bad.as_str()),
        "{listed:?}"
    );
}

#[service_test]
async fn a_receiver_that_is_down_and_comes_back_gets_every_event() {
    let app = fast_webhooks().await;
    let key = app.test_key("Shop");
    // Reserve a port, then close it: the endpoint is down.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    app.post(
        &key,
        "/api/v1/webhook-endpoints",
        json!({"url": format!("http://{addr}/hooks")}),
    )
    .await;
    for phone in ["+2290166000001", "+2290166000002"] {
        let (_, p) = app.create(&key, &new_key(), &direct_payment(phone)).await;
        app.get(
            &key,
            &format!("/api/v1/collect/payments/{}?sync=true", id_of(&p)),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let receiver = Receiver::start_on(addr).await;
    // created, processing, completed + created, processing, failed
    let got = receiver
        .wait_for(15, |r| {
            let mut ids: Vec<String> = r.iter().map(|x| id_of(&x.json())).collect();
            ids.sort();
            ids.dedup();
            ids.len() >= 6
        })
        .await;
    let mut types: Vec<String> = got
        .iter()
        .map(|r| r.json()["type"].as_str().unwrap().to_string())
        .collect();
    types.sort();
    types.dedup();
    assert_eq!(
        types,
        vec![
            "collect.payment.completed",
            "collect.payment.created",
            "collect.payment.failed",
            "collect.payment.processing"
        ]
    );
}

#[service_test]
async fn callback_url_receives_the_payments_events_signed_with_the_callback_secret() {
    let app = fast_webhooks().await;
    let key = app.test_key("Shop");
    let receiver = Receiver::start().await;
    let mut body = direct_payment("+2290166000001");
    body["callback_url"] = json!(receiver.url());
    app.create(&key, &new_key(), &body).await;
    let (_, secret) = app
        .get(&key, "/api/v1/webhook-endpoints/callback-secret")
        .await;
    let got = receiver.wait_for(10, |r| r.len() >= 2).await;
    for r in &got {
        assert!(verify(
            secret["secret"].as_str().unwrap(),
            &r.signature,
            &r.body
        ));
    }
}

/// The default: no private destination, whatever the environment.
async fn strict_webhooks() -> TestApp {
    spawn_app_with(|c| {
        c.webhooks.retry_schedule_ms = vec![100, 200];
        c.webhooks.poll_interval_ms = 20;
        c.webhooks.allow_private_destinations = false;
    })
    .await
}

#[service_test]
async fn unsafe_destinations_are_refused_with_a_clear_400() {
    let app = strict_webhooks().await;
    let (_, test_key, live_key) = app.merchant("Shop");
    for (key, url) in [
        (&live_key, "http://8.8.8.8/hooks"),
        (&live_key, "https://127.0.0.1/hooks"),
        (&live_key, "https://10.0.0.7/hooks"),
        (&live_key, "https://169.254.169.254/latest/meta-data"),
        (&live_key, "https://[::1]/hooks"),
        (&live_key, "https://localhost/hooks"),
        (&live_key, "https://[64:ff9b::a9fe:a9fe]/hooks"),
        (&live_key, "https://[2002:7f00:1::1]/hooks"),
        (&test_key, "http://127.0.0.1:9/hooks"),
        (&test_key, "http://localhost:9/hooks"),
        (&test_key, "http://192.168.1.10/hooks"),
        (&test_key, "https://[::ffff:127.0.0.1]/hooks"),
        (&test_key, "https://[::ffff:0:a9fe:a9fe]/hooks"),
        (&test_key, "https://[fec0::1]/hooks"),
        (&test_key, "ftp://example.com/"),
    ] {
        let (status, err) = app
            .post(key, "/api/v1/webhook-endpoints", json!({"url": url}))
            .await;
        assert_eq!(status, 400, "{url}: {err}");
        assert_eq!(err["error"]["param"], "url");
        assert!(err["error"]["message"].as_str().unwrap().len() > 10);
    }
    let (status, err) = app
        .post(
            &test_key,
            "/api/v1/webhook-endpoints",
            json!({"url": "http://8.8.8.8:9/x", "enabled_events": ["nope"]}),
        )
        .await;
    assert_eq!(
        (status, err["error"]["param"].as_str()),
        (400, Some("enabled_events"))
    );
    // Endpoints are per environment (plain http is fine for test events).
    let (status, _) = app
        .post(
            &test_key,
            "/api/v1/webhook-endpoints",
            json!({"url": "http://8.8.8.8:9/x"}),
        )
        .await;
    assert_eq!(status, 201);
    let (_, live_list) = app.get(&live_key, "/api/v1/webhook-endpoints").await;
    assert_eq!(live_list["data"].as_array().unwrap().len(), 0);
}

#[service_test]
async fn an_endpoint_description_is_bounded_text_or_a_clear_400() {
    let app = strict_webhooks().await;
    let key = app.test_key("Shop");
    for (description, says) in [
        ("a\u{0}b".to_string(), "control characters"),
        ("line\nbreak".to_string(), "control characters"),
        ("é".repeat(501), "at most 500 characters"),
    ] {
        let (status, err) = app
            .post(
                &key,
                "/api/v1/webhook-endpoints",
                json!({"url": "http://8.8.8.8:9/x", "description": description}),
            )
            .await;
        assert_eq!(status, 400, "{err}");
        assert_eq!(err["error"]["type"], "invalid_request_error", "{err}");
        assert_eq!(err["error"]["param"], "description", "{err}");
        let message = err["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message}");
    }
    let (status, e) = app
        .post(
            &key,
            "/api/v1/webhook-endpoints",
            json!({"url": "http://8.8.8.8:9/x", "description": "é".repeat(500)}),
        )
        .await;
    assert_eq!(status, 201, "{e}");
    assert_eq!(e["description"].as_str().unwrap().chars().count(), 500);
}

#[service_test]
async fn events_are_listed_filtered_and_paginated_and_deleted_endpoints_stop_receiving() {
    let app = fast_webhooks().await;
    let key = app.test_key("Shop");
    let other_key = app.test_key("Other");
    let receiver = Receiver::start().await;
    let (_, endpoint) = app
        .post(
            &key,
            "/api/v1/webhook-endpoints",
            json!({"url": receiver.url(), "enabled_events": ["*"]}),
        )
        .await;
    let (_, p1) = app
        .create(&key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    let (_, _p2) = app
        .create(&key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    let (_, all) = app.get(&key, "/api/v1/events?limit=100").await;
    assert_eq!(
        all["data"].as_array().unwrap().len(),
        4,
        "created + processing for each"
    );
    let (_, created) = app
        .get(&key, "/api/v1/events?type=collect.payment.created")
        .await;
    assert_eq!(created["data"].as_array().unwrap().len(), 2);
    let (_, of_p1) = app
        .get(&key, &format!("/api/v1/events?payment={}", id_of(&p1)))
        .await;
    assert_eq!(of_p1["data"].as_array().unwrap().len(), 2);
    let (_, page1) = app.get(&key, "/api/v1/events?limit=3").await;
    assert_eq!(page1["has_more"], true);
    let last = id_of(&page1["data"][2]);
    let (_, page2) = app
        .get(
            &key,
            &format!("/api/v1/events?limit=3&starting_after={last}"),
        )
        .await;
    assert_eq!(
        (page2["data"].as_array().unwrap().len(), &page2["has_more"]),
        (1, &json!(false))
    );
    // Names and values may come percent-encoded, as any client may send them.
    let (_, encoded) = app
        .get(
            &key,
            &format!(
                "/api/v1/events?limit=3&starting%5Fafter={last}&type=collect%2Epayment%2Ecreated"
            ),
        )
        .await;
    assert_eq!(encoded["data"].as_array().unwrap().len(), 1, "{encoded}");
    assert_eq!(encoded["data"][0]["type"], "collect.payment.created");
    // Control characters are no id: a clear 400, on every engine.
    let (status, e) = app.get(&key, "/api/v1/events?payment=a%00b").await;
    assert_eq!(
        (status, e["error"]["param"].as_str()),
        (400, Some("payment")),
        "{e}"
    );
    // A cursor that names no event of this merchant is refused, not read as
    // "from the newest" (another merchant's event included).
    for cursor in [uuid::Uuid::new_v4().to_string(), last.to_string()] {
        let (status, e) = app
            .get(
                if cursor == last { &other_key } else { &key },
                &format!("/api/v1/events?starting_after={cursor}"),
            )
            .await;
        assert_eq!(
            (status, e["error"]["param"].as_str()),
            (400, Some("starting_after")),
            "{e}"
        );
    }
    assert_eq!(
        app.get(&other_key, "/api/v1/events").await.1["data"]
            .as_array()
            .unwrap()
            .len(),
        0,
        "merchants see their own"
    );
    assert_eq!(
        app.get(&other_key, &format!("/api/v1/events/{last}"))
            .await
            .0,
        404
    );
    assert_eq!(app.get(&key, "/api/v1/events?type=bogus").await.0, 400);

    receiver.wait_for(10, |r| r.len() >= 4).await;
    let resp = app
        .client
        .delete(app.url(&format!("/api/v1/webhook-endpoints/{}", id_of(&endpoint))))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    app.create(&key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.events().len(), 4, "nothing after deletion");
}

#[service_test]
async fn an_event_written_before_a_sigkill_is_delivered_after_restart() {
    use crate::process::{ServerProcess, cli, cli_merchant};
    let data = tempfile::tempdir().unwrap();
    let (merchant, key) = cli_merchant(data.path(), "Shop", "test");
    let (merchant, key) = (merchant.as_str(), key.as_str());
    // The receiver is down while the change happens.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let hook = cli(
        data.path(),
        &[
            "webhooks",
            "add",
            "--merchant",
            merchant,
            "--env",
            "test",
            "--url",
            &format!("http://{addr}/hooks"),
            "--events",
            "collect.payment.created,collect.payment.processing",
        ],
    );
    assert!(id_of(&hook).starts_with("we_"));
    let secret = hook["secret"].as_str().unwrap().to_string();
    // A short attempt timeout: an attempt cut by the kill is retried once its lease
    // (2 × timeout + 1 s) ends.
    let env = [
        ("MMC_WEBHOOKS__RETRY_SCHEDULE_MS", "[200]"),
        ("MMC_WEBHOOKS__POLL_INTERVAL_MS", "20"),
        ("MMC_WEBHOOKS__TIMEOUT_MS", "1000"),
    ];
    let server = ServerProcess::start(data.path(), &env);
    let payment = create_on(&server.base, key, "+2290166000001").await;
    server.kill();

    let receiver = Receiver::start_on(addr).await;
    let _server = ServerProcess::start(data.path(), &env);
    let got = receiver
        .wait_for(15, |r| {
            // Either may come first: `created` failed once before the kill and waits for its retry.
            ["collect.payment.created", "collect.payment.processing"]
                .iter()
                .all(|t| r.iter().any(|x| x.json()["type"] == *t))
        })
        .await;
    for t in ["collect.payment.created", "collect.payment.processing"] {
        assert!(got.iter().any(|x| x.json()["type"] == t), "{t} delivered");
    }
    for r in &got {
        assert!(verify(&secret, &r.signature, &r.body));
        assert_eq!(r.json()["data"]["object"]["id"], payment["id"]);
    }
}

/// SSRF: a test key's `callback_url` on loopback (a port of the service's
/// own machine) is never called, and the delivery record says only that the
/// destination was refused, not what answers there.
#[service_test]
async fn a_callback_url_on_loopback_is_never_called_and_says_nothing_of_it() {
    let app = strict_webhooks().await;
    let key = app.test_key("Shop");
    let receiver = Receiver::start().await;
    for url in [
        receiver.url(),
        receiver.url().replace("127.0.0.1", "localhost"),
    ] {
        let event = first_attempted_event(&app, &key, &url).await;
        let attempt = &event["deliveries"][0]["attempts"][0];
        assert_eq!(attempt["error"], "destination_refused", "{event}");
        assert!(attempt["status_code"].is_null());
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(receiver.events().is_empty(), "nothing reached loopback");
}

/// Creates a payment with `callback_url`, then waits for its newest event's
/// first delivery attempt; returns that event.
/// A direct payment created on a server process (`base`), answered 201.
async fn create_on(base: &str, key: &str, phone: &str) -> Value {
    let url = format!("{base}/api/v1/collect/payments");
    let client = reqwest::Client::new();
    let idempotency_key = new_key();
    let body = direct_payment(phone);
    let (status, p) = post_json(&client, &url, key, Some(&idempotency_key), &body).await;
    assert_eq!(status, 201, "{p}");
    p
}

async fn first_attempted_event(app: &TestApp, key: &str, url: &str) -> Value {
    let mut body = direct_payment("+2290166000001");
    body["callback_url"] = json!(url);
    let (id, _) = app.create_ok(key, &body).await;
    wait_until(5, || async {
        let (_, events) = app.get(key, &format!("/api/v1/events?payment={id}")).await;
        let first = events["data"][0]["id"].as_str()?.to_string();
        let (_, event) = app.get(key, &format!("/api/v1/events/{first}")).await;
        let attempts = event["deliveries"][0]["attempts"].as_array()?.clone();
        (!attempts.is_empty()).then_some(event)
    })
    .await
}

async fn wait_until<T, F: std::future::Future<Output = Option<T>>>(
    secs: u64,
    probe: impl Fn() -> F,
) -> T {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(std::time::Instant::now() < deadline, "not within {secs} s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Each event is fanned out to every endpoint: one key cannot add them
/// without bound (16 per merchant and environment).
#[service_test]
async fn endpoints_per_merchant_are_bounded() {
    let app = fast_webhooks().await;
    let (_, key, live) = app.merchant("Shop");
    let mut ids = Vec::new();
    for i in 0..16 {
        let (status, e) = app
            .post(
                &key,
                "/api/v1/webhook-endpoints",
                json!({"url": format!("http://127.0.0.1:9/hook-{i}")}),
            )
            .await;
        assert_eq!(status, 201, "{e}");
        ids.push(id_of(&e));
    }
    let (status, err) = app
        .post(
            &key,
            "/api/v1/webhook-endpoints",
            json!({"url": "http://127.0.0.1:9/one-more"}),
        )
        .await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["code"], "webhook_endpoints_limit_reached");
    // Per environment: live has its own 16.
    let (status, _) = app
        .post(
            &live,
            "/api/v1/webhook-endpoints",
            json!({"url": "http://127.0.0.1:9/live"}),
        )
        .await;
    assert_eq!(status, 201);
    // A deleted endpoint frees its place.
    let resp = app
        .client
        .delete(app.url(&format!("/api/v1/webhook-endpoints/{}", ids[0])))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success());
    let (status, _) = app
        .post(
            &key,
            "/api/v1/webhook-endpoints",
            json!({"url": "http://127.0.0.1:9/again"}),
        )
        .await;
    assert_eq!(status, 201);
}

#[service_test]
async fn signing_secrets_are_sealed_at_rest_and_older_rows_are_sealed_at_start() {
    use mmc_webhooks::{Webhooks, sealing::Sealer};
    let app = fast_webhooks().await;
    let (merchant, key, _) = app.merchant("Sealed");
    let receiver = Receiver::start().await;
    let (status, endpoint) = app
        .post(
            &key,
            "/api/v1/webhook-endpoints",
            json!({"url": receiver.url(), "enabled_events": ["collect.payment.created"]}),
        )
        .await;
    assert_eq!(status, 201, "{endpoint}");
    let secret = endpoint["secret"].as_str().unwrap().to_string();
    let (_, callback) = app
        .get(&key, "/api/v1/webhook-endpoints/callback-secret")
        .await;
    let callback = callback["secret"].as_str().unwrap().to_string();

    // What a copy of the database shows: no secret.
    let db = test_storage(&base_config(app.data_dir.path()));
    let dump = |sql: &str| -> Vec<String> {
        db.sql
            .read(|c| c.query(sql, &[])?.iter().map(|r| r.text(0)).collect())
            .unwrap()
    };
    let stored = dump("SELECT secret FROM webhook_endpoints");
    let stored_callbacks = dump("SELECT secret FROM callback_secrets");
    for s in stored.iter().chain(&stored_callbacks) {
        assert!(s.starts_with("sealed:v1:"), "{s}");
        assert!(!s.contains(&secret) && !s.contains(&callback));
    }
    // ...and deliveries are still signed with the secret the merchant was shown.
    app.create(&key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    let got = receiver.wait_for(10, |r| !r.is_empty()).await;
    assert!(verify(&secret, &got[0].signature, &got[0].body));

    // A row from before sealing (written in plaintext) is sealed at the next
    // start and keeps working; the generated key sits beside the database, 0600.
    // (On PostgreSQL the key is configured, the same on every node.)
    let hex_key = if on_postgres() {
        TEST_SECRETS_KEY.to_string()
    } else {
        std::fs::read_to_string(app.data_dir.path().join("webhook_secrets_key")).unwrap()
    };
    db.sql
        .write(|c| {
            c.execute(
                "UPDATE callback_secrets SET secret = 'whsec_from_before' WHERE merchant_id = ?1",
                &[merchant.as_str().into()],
            )
        })
        .unwrap();
    let webhooks = Webhooks::new(
        db.sql.clone(),
        Default::default(),
        Sealer::with_key(&hex_key).unwrap(),
    )
    .unwrap();
    assert!(dump("SELECT secret FROM callback_secrets")[0].starts_with("sealed:v1:"));
    assert_eq!(
        webhooks.callback_secret(&merchant, "test").unwrap(),
        "whsec_from_before"
    );
    // The wrong key opens nothing: refused at start, not at each delivery.
    let wrong = "07".repeat(32);
    assert!(
        Webhooks::new(
            db.sql.clone(),
            Default::default(),
            Sealer::with_key(&wrong).unwrap()
        )
        .is_err()
    );
}

/// A delivery records an error class, never what the remote said: a refused
/// connection is `connect_failed`, a 500 is `http_status` with its code, and
/// the body of the 500 is nowhere in the event.
#[service_test]
async fn delivery_records_say_what_failed_never_what_the_remote_said() {
    let app = spawn_app_with(|c| {
        c.webhooks.retry_schedule_ms = vec![100, 200];
        c.webhooks.poll_interval_ms = 20;
    })
    .await;
    let key = app.test_key("Shop");
    let receiver = Receiver::start().await;
    receiver
        .fail_first
        .store(1_000, std::sync::atomic::Ordering::SeqCst);
    // A port nobody listens on (bound, then closed).
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    for (url, class) in [
        (format!("http://{closed}/hook"), "connect_failed"),
        (receiver.url(), "http_status"),
    ] {
        let event = first_attempted_event(&app, &key, &url).await;
        let attempt = &event["deliveries"][0]["attempts"][0];
        assert_eq!(attempt["error"], class, "{event}");
        if class == "http_status" {
            assert_eq!(attempt["status_code"], 500, "{event}");
        }
        assert!(!event.to_string().contains("hunter2"), "{event}");
    }
}

/// A resend waits for a pruning round in progress (its lock held), so the
/// pruner never deletes the event a resend reads nor the delivery it has
/// just queued; queued once the round ends, it is delivered.
#[service_test]
async fn a_resend_waits_for_a_pruning_round_in_progress() {
    let app = fast_webhooks().await;
    let key = app.test_key("Shop");
    let receiver = receiving_created(&app, &key).await;
    let (payment, _) = app.create_ok(&key, &direct_payment("+2290166000004")).await;
    receiver.wait_for(10, |r| !r.is_empty()).await;
    let db = test_storage(&base_config(app.data_dir.path()));
    let event = db
        .sql
        .read(|c| {
            c.query(
                "SELECT id FROM outbox WHERE subject_id = ?1 AND event_type = 'collect.payment.created'",
                &[payment.as_str().into()],
            )?[0]
                .text(0)
        })
        .unwrap();

    let (held_tx, held) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let sql = db.sql.clone();
    let pruner = std::thread::spawn(move || {
        sql.write(|tx| {
            assert!(tx.try_lock("outbox_prune")?, "no pruner is running");
            held_tx.send(()).unwrap();
            released.recv().unwrap();
            Ok(())
        })
    });
    held.recv().unwrap();
    let resend = app
        .client
        .post(app.url(&format!("/api/v1/events/{event}/resend")))
        .bearer_auth(&key)
        .json(&json!({}))
        .send();
    let resend = tokio::spawn(resend);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        !resend.is_finished(),
        "the resend waits for the pruning round"
    );
    release.send(()).unwrap();
    pruner.join().unwrap().unwrap();
    assert_eq!(resend.await.unwrap().unwrap().status().as_u16(), 202);
    let got = receiver.wait_for(10, |r| r.len() >= 2).await;
    assert_eq!(got[1].json()["id"], event.as_str());
}

/// Events past their retention (30 days by default) go with their deliveries
/// and attempts, oldest first. An event with a delivery still pending (a
/// resend of an old event) stays, and so does every event after it, until
/// that delivery ends; a young event stays.
#[service_test]
async fn events_past_their_retention_go_with_their_deliveries_unless_still_pending() {
    use mmc_storage::sql::Value as Sql;
    use mmc_webhooks::{Webhooks, sealing::Sealer};
    let app = fast_webhooks().await;
    let key = app.test_key("Shop");
    let receiver = receiving_created(&app, &key).await;
    // Phones ending 0004 stay in progress: each payment's events are its
    // created and processing, written before its 201, so in creation order.
    let mut payments = Vec::new();
    for _ in 0..3 {
        let (id, _) = app.create_ok(&key, &direct_payment("+2290166000004")).await;
        payments.push(id);
    }
    receiver.wait_for(10, |r| r.len() >= 3).await;

    let db = test_storage(&base_config(app.data_dir.path()));
    let count = |sql: &str, params: &[Sql]| -> i64 {
        db.sql.read(|c| c.query(sql, params)?[0].int(0)).unwrap()
    };
    let exec = |sql: &str, params: &[Sql]| {
        db.sql.write(|c| c.execute(sql, params)).unwrap();
    };
    let created_event = |payment: &str| -> String {
        db.sql
            .read(|c| {
                c.query(
                    "SELECT id FROM outbox WHERE subject_id = ?1 AND event_type = 'collect.payment.created'",
                    &[payment.into()],
                )?[0]
                    .text(0)
            })
            .unwrap()
    };
    let events = |payment: &str| {
        count(
            "SELECT COUNT(*) FROM outbox WHERE subject_id = ?1",
            &[payment.into()],
        )
    };
    let deliveries = |payment: &str| {
        count(
            "SELECT COUNT(*) FROM deliveries WHERE event_id IN (SELECT id FROM outbox WHERE subject_id = ?1)",
            &[payment.into()],
        )
    };
    let attempts = |payment: &str| {
        count(
            "SELECT COUNT(*) FROM delivery_attempts WHERE delivery_id IN (SELECT id FROM deliveries
             WHERE event_id IN (SELECT id FROM outbox WHERE subject_id = ?1))",
            &[payment.into()],
        )
    };
    let (first, second) = (created_event(&payments[0]), created_event(&payments[1]));
    // Every created event delivered (its delivery recorded, not only received).
    wait_until(10, || async {
        let pending = count(
            "SELECT COUNT(*) FROM deliveries WHERE status = 'pending'",
            &[],
        );
        (pending == 0).then_some(())
    })
    .await;
    assert_eq!((deliveries(&payments[0]), attempts(&payments[0])), (1, 1));

    // The first two payments' events become 31 days old, the third's stay new.
    let month_ago = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64)
        - 31 * 24 * 3600 * 1000;
    let last_old: i64 = db
        .sql
        .read(|c| {
            c.query(
                "SELECT MAX(seq) FROM outbox WHERE subject_id = ?1",
                &[payments[1].as_str().into()],
            )?[0]
                .int(0)
        })
        .unwrap();
    let young = count(
        "SELECT COUNT(*) FROM outbox WHERE seq > ?1",
        &[last_old.into()],
    );
    exec(
        "UPDATE outbox SET created_ms = ?1 WHERE seq <= ?2",
        &[month_ago.into(), last_old.into()],
    );
    // A resend of the second payment's created event is still pending.
    let (status, _) = app
        .post(&key, &format!("/api/v1/events/{second}/resend"), json!({}))
        .await;
    assert_eq!(status, 202);
    // The receiver answers, so the resend is delivered at once (deferring it
    // before the dispatcher, polling every 20 ms, claimed it was a race a
    // fresh clone's CI lost). Once it is, it is put back as still pending,
    // far ahead: a resend to a failing endpoint between two retries.
    wait_until(10, || async {
        let delivered = count(
            "SELECT COUNT(*) FROM deliveries WHERE event_id = ?1 AND status = 'delivered'",
            &[second.as_str().into()],
        );
        (delivered == 2).then_some(())
    })
    .await;
    exec(
        "UPDATE deliveries SET status = 'pending', next_attempt_ms = 99999999999999, delivered_ms = NULL
         WHERE id = (SELECT MAX(id) FROM deliveries WHERE event_id = ?1)",
        &[second.as_str().into()],
    );

    let hex_key = if on_postgres() {
        TEST_SECRETS_KEY.to_string()
    } else {
        std::fs::read_to_string(app.data_dir.path().join("webhook_secrets_key")).unwrap()
    };
    let webhooks = Webhooks::new(
        db.sql.clone(),
        Default::default(),
        Sealer::with_key(&hex_key).unwrap(),
    )
    .unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    // A batch is bounded: one event, then the rest up to the pending delivery.
    assert_eq!(webhooks.prune_events(now, 1).unwrap(), 1);
    assert_eq!(events(&payments[0]), 1);
    let pruned = webhooks.prune_events(now, 500).unwrap();
    assert_eq!(pruned, 1, "the first payment's other event went");
    assert_eq!(
        (
            events(&payments[0]),
            deliveries(&payments[0]),
            attempts(&payments[0])
        ),
        (0, 0, 0),
        "the first payment's events, deliveries and attempts"
    );
    let (status, _) = app.get(&key, &format!("/api/v1/events/{first}")).await;
    assert_eq!(status, 404, "a pruned event is gone from the API");
    assert_eq!(events(&payments[1]), 2, "kept behind the pending delivery");
    let (status, _) = app.get(&key, &format!("/api/v1/events/{second}")).await;
    assert_eq!(status, 200);

    // The pending delivery ends: the rest of the old events go, the young stay.
    exec(
        "UPDATE deliveries SET status = 'failed' WHERE event_id = ?1",
        &[second.as_str().into()],
    );
    webhooks.prune_events(now, 500).unwrap();
    assert_eq!((events(&payments[1]), deliveries(&payments[1])), (0, 0));
    assert_eq!(events(&payments[2]), 2);
    assert_eq!(
        count(
            "SELECT COUNT(*) FROM outbox WHERE seq > ?1",
            &[last_old.into()],
        ),
        young,
        "no young event went"
    );
    assert_eq!(
        webhooks.prune_events(now, 500).unwrap(),
        0,
        "nothing old left"
    );
    let (_, listed) = app.get(&key, "/api/v1/events?limit=100").await;
    let subjects: Vec<&str> = listed["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["data"]["object"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        subjects,
        [payments[2].as_str(); 2],
        "only the young events are listed"
    );
}

/// A node deletes the events past their retention when it starts (and every
/// hour after): the store does not grow without bound.
#[service_test]
async fn a_node_deletes_events_past_their_retention_when_it_starts() {
    use crate::process::{ServerProcess, cli_merchant, get_json};
    use mmc_storage::sql::Value as Sql;
    let data = tempfile::tempdir().unwrap();
    let (_, key) = cli_merchant(data.path(), "Shop", "test");
    let key = key.as_str();
    let env = [("MMC_WEBHOOKS__POLL_INTERVAL_MS", "20")];
    let server = ServerProcess::start(data.path(), &env);
    let client = reqwest::Client::new();
    let events_of = |base: String, id: String| {
        let client = client.clone();
        async move {
            let url = format!("{base}/api/v1/events?payment={id}");
            get_json(&client, &url, key).await["data"]
                .as_array()
                .unwrap()
                .len()
        }
    };
    let id = create_on(&server.base, key, "+2290166000004").await["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(events_of(server.base.clone(), id.clone()).await, 2);
    {
        let db = test_storage(&base_config(data.path()));
        let dispatched = || {
            db.sql
                .read(|c| {
                    c.query(
                        "SELECT COUNT(*) FROM outbox WHERE seq > (SELECT seq FROM outbox_cursor) OR seq IS NULL",
                        &[],
                    )?[0]
                        .int(0)
                })
                .unwrap()
                == 0
        };
        wait_until(10, || async { dispatched().then_some(()) }).await;
        server.kill();
        let month_ago = (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64)
            - 31 * 24 * 3600 * 1000;
        db.sql
            .write(|c| c.execute("UPDATE outbox SET created_ms = ?1", &[Sql::from(month_ago)]))
            .unwrap();
    }
    let server = ServerProcess::start(data.path(), &env);
    wait_until(10, || async {
        (events_of(server.base.clone(), id.clone()).await == 0).then_some(())
    })
    .await;
}
