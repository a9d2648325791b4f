//! Merchant and environment isolation on every endpoint, and bounded input.

use serde_json::{Value, json};

use crate::support::*;
use mmc_test_kit::service_test;

async fn call(
    app: &TestApp,
    key: &str,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = app
        .client
        .request(method.parse().unwrap(), app.url(path))
        .bearer_auth(key)
        .header("Idempotency-Key", new_key());
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

#[service_test]
async fn merchant_b_and_the_other_environment_see_nothing_of_merchant_a() {
    let app = spawn_app_with(|c| {
        c.components
            .entry("simulator".into())
            .or_default()
            .settings
            .insert("completion_delay_ms".into(), "0".into());
        // Live operators routed to the simulator too, so live keys reach real code paths.
        c.routing.insert(
            "live".into(),
            [("*".to_string(), "simulator".into())].into(),
        );
    })
    .await;
    let (_, a, a_live) = app.merchant("A");
    let (_, b, b_live) = app.merchant("B");
    // A's objects: a completed payment (refundable), an OTP payment, a legacy collection, a batch, an event.
    let (paid_id, paid) = app.create_ok(&a, &direct_payment("+2290166000001")).await;
    assert_eq!(
        app.get(&a, &format!("/api/v1/collect/payments/{paid_id}?sync=true"))
            .await
            .1["status"],
        "completed"
    );
    let mut otp = direct_payment("+2290166000001");
    otp["operator"] = json!("coris-bj");
    let (_, otp) = app.create(&a, &new_key(), &otp).await;
    let otp_ref = otp["reference"].as_str().unwrap().to_string();
    let legacy_ref = format!("leg-{}", uuid::Uuid::new_v4());
    let (s, _) = call(&app, &a, "POST", "/api/v1/collect/mobile-money/", Some(json!({"amount": 150000, "phone": "+2290166000004", "country": "BJ", "operator": "mtn-bj", "reference": legacy_ref}))).await;
    assert_eq!(s, 201);
    let (s, batch) = call(&app, &a, "POST", "/api/v1/bulk-payments/", Some(json!({"name": "A pay", "items": [{"beneficiary_name": "X", "phone": "+2290166000001", "amount": 500, "currency": "XOF", "reference": "r1"}]}))).await;
    assert_eq!(s, 201, "{batch}");
    let batch_id = id_of(&batch);
    let (_, events) = app.get(&a, "/api/v1/events").await;
    let event_id = id_of(&events["data"][0]);
    let (s, endpoint) = call(
        &app,
        &a,
        "POST",
        "/api/v1/webhook-endpoints",
        Some(json!({"url": "http://127.0.0.1:9/a"})),
    )
    .await;
    assert_eq!(s, 201);
    let endpoint_id = id_of(&endpoint);

    let probes: Vec<(&str, String, Option<Value>)> = vec![
        ("GET", format!("/api/v1/collect/payments/{paid_id}"), None),
        (
            "GET",
            format!(
                "/api/v1/collect/payments/{}",
                paid["reference"].as_str().unwrap()
            ),
            None,
        ),
        (
            "GET",
            format!("/api/v1/collect/payments/{paid_id}?sync=true"),
            None,
        ),
        (
            "POST",
            format!("/api/v1/collect/payments/{otp_ref}/confirm"),
            Some(json!({"otp": "123456"})),
        ),
        (
            "POST",
            format!("/api/v1/collect/payments/{otp_ref}/cancel"),
            Some(json!({})),
        ),
        (
            "POST",
            format!("/api/v1/collect/payments/{paid_id}/refunds"),
            Some(json!({})),
        ),
        (
            "GET",
            format!("/api/v1/collect/mobile-money/{legacy_ref}/"),
            None,
        ),
        (
            "POST",
            "/api/v1/collect/mobile-money/confirm/".into(),
            Some(json!({"reference": otp_ref, "otp": "123456"})),
        ),
        ("GET", format!("/api/v1/bulk-payments/{batch_id}/"), None),
        (
            "GET",
            format!("/api/v1/bulk-payments/{batch_id}/items/"),
            None,
        ),
        (
            "POST",
            format!("/api/v1/bulk-payments/{batch_id}/validate/"),
            Some(json!({})),
        ),
        ("GET", format!("/api/v1/events/{event_id}"), None),
        (
            "POST",
            format!("/api/v1/events/{event_id}/resend"),
            Some(json!({})),
        ),
        (
            "DELETE",
            format!("/api/v1/webhook-endpoints/{endpoint_id}"),
            None,
        ),
    ];
    for key in [&b, &b_live, &a_live] {
        for (method, path, body) in &probes {
            let (status, resp) = call(&app, key, method, path, body.clone()).await;
            assert_eq!(
                status, 404,
                "{method} {path} with another merchant's or environment's key: {resp}"
            );
        }
        // Lists are empty.
        assert_eq!(app.get(key, "/api/v1/bulk-payments/").await.1["count"], 0);
        assert_eq!(
            app.get(key, "/api/v1/events").await.1["data"]
                .as_array()
                .unwrap()
                .len(),
            0
        );
        assert_eq!(
            app.get(key, "/api/v1/webhook-endpoints").await.1["data"]
                .as_array()
                .unwrap()
                .len(),
            0
        );
    }
    // And A still has everything (the probes changed nothing).
    assert_eq!(
        app.get(&a, &format!("/api/v1/collect/payments/{otp_ref}"))
            .await
            .1["status"],
        "awaiting_otp"
    );
    assert_eq!(
        app.get(&a, &format!("/api/v1/collect/payments/{paid_id}"))
            .await
            .1["status"],
        "completed"
    );
    assert_eq!(
        app.get(&a, &format!("/api/v1/bulk-payments/{batch_id}/"))
            .await
            .1["status"],
        "pending_validation"
    );
}

#[service_test]
async fn deep_json_and_many_headers_are_refused_cleanly(app: TestApp) {
    let key = app.test_key("Shop");
    let deep = format!("{}1{}", "[".repeat(5000), "]".repeat(5000));
    let resp = app
        .client
        .post(app.url("/api/v1/collect/payments"))
        .bearer_auth(&key)
        .header("Idempotency-Key", new_key())
        .body(deep)
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        400,
        "nesting beyond serde_json's recursion limit is a 400, not a crash"
    );
    let mut req = app
        .client
        .get(app.url("/api/v1/collect/payments/x"))
        .bearer_auth(&key);
    for i in 0..80 {
        req = req.header(format!("x-filler-{i}"), "y");
    }
    assert_eq!(req.send().await.unwrap().status(), 431);
    assert_eq!(
        app.client
            .get(app.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}
