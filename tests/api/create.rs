use serde_json::{Value, json};

use crate::support::*;
use mmc_test_kit::service_test;

#[service_test]
async fn direct_create_returns_the_full_payment_and_get_reads_it_by_id_and_reference(app: TestApp) {
    let key = app.test_key("Shop");
    let mut body = direct_payment("97000001"); // old 8-digit Benin number
    body["metadata"] = json!({"order": 42});
    body["external_merchant_id"] = json!("sub-1");
    let (_, p) = app.create_ok(&key, &body).await;
    assert_eq!(p["object"], "collect.payment");
    assert_eq!(p["api_version"], "2026-06");
    assert!(uuid::Uuid::parse_str(&id_of(&p)).is_ok());
    assert_eq!(p["reference"], body["reference"]);
    assert_eq!(p["status"], "processing");
    assert_eq!(p["amount"], 1500);
    assert_eq!(p["amount_minor"], 150000);
    assert_eq!(p["currency"], "XOF");
    assert_eq!(p["country"], "BJ");
    assert_eq!(p["mode"], "direct");
    assert_eq!(p["operator"], "mtn-bj");
    assert_eq!(
        p["customer"]["phone"], "+2290197000001",
        "stored as E.164 with the 01 prefix"
    );
    assert_eq!(p["next_action"]["type"], "await_customer_validation");
    assert!(p["next_action"]["message"].is_string());
    assert_eq!(p["checkout_url"], Value::Null);
    assert!(p["psp_reference"].as_str().unwrap().starts_with("sim-"));
    assert!(p["expires_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(p["idempotent_replay"], false);
    assert_eq!(p["environment"], "test");
    assert!(p["created_at"].is_string());
    assert_eq!(p["completed_at"], Value::Null);
    assert_eq!(p["metadata"]["order"], 42);

    let id = id_of(&p);
    let (status, by_id) = app
        .get(&key, &format!("/api/v1/collect/payments/{id}"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(by_id["id"], p["id"]);
    let reference = body["reference"].as_str().unwrap();
    let (status, by_ref) = app
        .get(&key, &format!("/api/v1/collect/payments/{reference}"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(by_ref["id"], p["id"]);
    let (status, missing) = app
        .get(&key, "/api/v1/collect/payments/does-not-exist")
        .await;
    assert_eq!(status, 404);
    assert_eq!(missing["error"]["type"], "not_found_error");
}

#[service_test]
async fn another_merchant_or_the_other_environment_gets_404(app: TestApp) {
    let (_, key_a, live_a) = app.merchant("A");
    let key_b = app.test_key("B");
    let (id, p) = app
        .create_ok(&key_a, &direct_payment("+2290166000001"))
        .await;
    let reference = p["reference"].as_str().unwrap();
    for key in [&key_b, &live_a] {
        assert_eq!(
            app.get(key, &format!("/api/v1/collect/payments/{id}"))
                .await
                .0,
            404
        );
        assert_eq!(
            app.get(key, &format!("/api/v1/collect/payments/{reference}"))
                .await
                .0,
            404
        );
    }
}

#[service_test]
async fn otp_operator_waits_for_the_code_and_hosted_mode_redirects_to_our_checkout(app: TestApp) {
    let key = app.test_key("Shop");
    let mut otp = direct_payment("+2290166000001");
    otp["operator"] = json!("coris");
    let (_, p) = app.create_ok(&key, &otp).await;
    assert_eq!(p["operator"], "coris-bj", "aliases resolve to the slug");
    assert_eq!(p["status"], "awaiting_otp");
    assert_eq!(p["next_action"]["type"], "confirm_otp");

    let hosted = json!({"reference": "hosted-1", "amount": 2500, "currency": "XOF", "country": "CI", "mode": "hosted"});
    let (id, p) = app.create_ok(&key, &hosted).await;
    assert_eq!(p["status"], "awaiting_payment");
    assert_eq!(p["next_action"]["type"], "redirect_to_checkout");
    let url = p["checkout_url"].as_str().unwrap();
    assert_eq!(url, format!("{}/checkout/{id}", app.base));
    assert_eq!(p["next_action"]["checkout_url"], url);
}

#[service_test]
async fn simulated_outcomes_follow_the_test_numbers() {
    let app = spawn_app_completing_after(0).await;
    let key = app.test_key("Shop");
    // 0005: operator error at initiation → failed at once, with the reason.
    let (status, p) = app
        .create(&key, &new_key(), &direct_payment("+2290166000005"))
        .await;
    assert_eq!(status, 201);
    assert_eq!(p["status"], "failed");
    assert_eq!(p["failure_code"], "operator_error");
    // sync=true asks the PSP: 0001 completes, 0002 and 0003 fail, 0004 stays.
    for (phone, expected, code) in [
        ("+2290166000001", "completed", Value::Null),
        ("+2290166000002", "failed", json!("insufficient_funds")),
        ("+2290166000003", "failed", json!("declined_by_customer")),
        ("+2290166000004", "processing", Value::Null),
    ] {
        let (id, _) = app.create_ok(&key, &direct_payment(phone)).await;
        let (status, synced) = app
            .get(&key, &format!("/api/v1/collect/payments/{id}?sync=true"))
            .await;
        assert_eq!(status, 200);
        assert_eq!(synced["status"], expected, "{phone}: {synced}");
        assert_eq!(synced["failure_code"], code, "{phone}");
        if expected == "completed" {
            assert!(synced["completed_at"].is_string());
        }
    }
}

#[service_test]
async fn payments_in_progress_are_reconciled_without_being_asked() {
    let app = spawn_app_completing_after(500).await;
    let key = app.test_key("Shop");
    let (_, p) = app
        .create(&key, &new_key(), &direct_payment("+2290166001234"))
        .await;
    assert_eq!(p["status"], "processing");
    let id = id_of(&p);
    let mut last = Value::Null;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        last = app
            .get(&key, &format!("/api/v1/collect/payments/{id}"))
            .await
            .1;
        if last["status"] == "completed" {
            return;
        }
    }
    panic!("not reconciled: {last}");
}

/// One reconciliation round records every due payment in one transaction:
/// each one still gets its own outcome, and one still in progress is simply
/// polled again later.
#[service_test]
async fn a_reconciliation_round_records_each_due_payment() {
    let app = spawn_app_completing_after(500).await;
    let key = app.test_key("Shop");
    let mut ids = Vec::new();
    for i in 0..8 {
        let phone = format!("+22901660012{i:02}");
        let (_, p) = app.create(&key, &new_key(), &direct_payment(&phone)).await;
        assert_eq!(p["status"], "processing", "{p}");
        ids.push(id_of(&p));
    }
    let (stuck, _) = app.create_ok(&key, &direct_payment("+2290166000004")).await;
    let mut waiting = ids.clone();
    for _ in 0..60 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let mut still = Vec::new();
        for id in waiting {
            let (_, p) = app
                .get(&key, &format!("/api/v1/collect/payments/{id}"))
                .await;
            if p["status"] != "completed" {
                still.push(id);
            }
        }
        waiting = still;
        if waiting.is_empty() {
            break;
        }
    }
    assert!(waiting.is_empty(), "not reconciled: {waiting:?}");
    let (_, p) = app
        .get(&key, &format!("/api/v1/collect/payments/{stuck}"))
        .await;
    assert_eq!(p["status"], "processing", "still in progress: {p}");
}

#[service_test]
async fn every_bad_input_is_a_400_naming_its_param(app: TestApp) {
    let key = app.test_key("Shop");
    let base = direct_payment("+2290166000001");
    let with = |field: &str, value: Value| {
        let mut b = base.clone();
        b[field] = value;
        b
    };
    let without = |field: &str| {
        let mut b = base.clone();
        b.as_object_mut().unwrap().remove(field);
        b
    };
    let cases: Vec<(Value, &str, &str)> = vec![
        (without("reference"), "reference", "parameter_missing"),
        (
            with("reference", json!("x".repeat(101))),
            "reference",
            "parameter_too_long",
        ),
        (
            with("reference", json!(12)),
            "reference",
            "parameter_invalid_string",
        ),
        (
            with("reference", json!("")),
            "reference",
            "parameter_invalid_empty",
        ),
        (without("amount"), "amount", "parameter_missing"),
        (with("amount", json!(99)), "amount", "amount_too_small"),
        (
            with("amount", json!(150.5)),
            "amount",
            "parameter_invalid_integer",
        ),
        (
            with("amount", json!("1500")),
            "amount",
            "parameter_invalid_integer",
        ),
        (
            with("amount", json!(10_000_000)),
            "amount",
            "amount_out_of_range",
        ),
        (without("currency"), "currency", "parameter_missing"),
        (
            with("currency", json!("EUR")),
            "currency",
            "parameter_invalid",
        ),
        (
            with("currency", json!("XAF")),
            "currency",
            "currency_not_supported",
        ),
        (without("country"), "country", "parameter_missing"),
        (
            with("country", json!("SN")),
            "country",
            "country_not_supported",
        ),
        (with("mode", json!("push")), "mode", "parameter_invalid"),
        (without("operator"), "operator", "parameter_missing"),
        (
            with("operator", json!("airtel")),
            "operator",
            "operator_not_supported",
        ),
        (
            with("operator", json!("orange-ci")),
            "operator",
            "operator_country_mismatch",
        ),
        (
            with("customer", json!("x")),
            "customer",
            "parameter_invalid_object",
        ),
        (
            with("customer", json!({"phone": "12"})),
            "customer.phone",
            "phone_invalid",
        ),
        (
            with("customer", json!({"phone": "+22890000001"})),
            "customer.phone",
            "phone_invalid",
        ),
        (
            with("customer", json!({"first_name": "Awa"})),
            "customer.phone",
            "parameter_missing",
        ),
        (
            with("customer", json!({"phone": "+2290166000001", "age": 3})),
            "customer.age",
            "parameter_unknown",
        ),
        (
            with("description", json!("d".repeat(256))),
            "description",
            "parameter_too_long",
        ),
        (
            with("callback_url", json!("ftp://x")),
            "callback_url",
            "url_invalid",
        ),
        (
            with("callback_url", json!("https://")),
            "callback_url",
            "url_invalid",
        ),
        (
            with("expires_in_seconds", json!(299)),
            "expires_in_seconds",
            "parameter_out_of_range",
        ),
        (
            with("expires_in_seconds", json!(3601)),
            "expires_in_seconds",
            "parameter_out_of_range",
        ),
        (
            with("external_merchant_id", json!("e".repeat(101))),
            "external_merchant_id",
            "parameter_too_long",
        ),
        (
            with("metadata", json!([1])),
            "metadata",
            "parameter_invalid_object",
        ),
        (with("surprise", json!(1)), "surprise", "parameter_unknown"),
    ];
    for (body, param, code) in cases {
        let (status, err) = app.create(&key, &new_key(), &body).await;
        assert_eq!(status, 400, "{param}: {err}");
        assert_eq!(err["error"]["type"], "invalid_request_error", "{param}");
        assert_eq!(err["error"]["param"], param, "{err}");
        assert_eq!(err["error"]["code"], code, "{err}");
        assert!(err["error"]["message"].as_str().unwrap().len() > 5);
        assert!(
            err["error"]["doc_url"]
                .as_str()
                .unwrap()
                .ends_with(&format!("#{code}"))
        );
    }
    // Body and header problems.
    let post = |body: &'static str, idem: Option<String>| {
        let mut r = app
            .client
            .post(app.url("/api/v1/collect/payments"))
            .bearer_auth(&key)
            .body(body);
        if let Some(k) = idem {
            r = r.header("Idempotency-Key", k);
        }
        r.send()
    };
    let resp = post("{\"reference\":", Some(new_key())).await.unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(
        resp.json::<Value>().await.unwrap()["error"]["code"],
        "invalid_json"
    );
    let resp = post("[1,2]", Some(new_key())).await.unwrap();
    assert_eq!(
        resp.json::<Value>().await.unwrap()["error"]["code"],
        "invalid_json"
    );
    let resp = post("{}", None).await.unwrap();
    assert_eq!(resp.status(), 400);
    let err = resp.json::<Value>().await.unwrap();
    assert_eq!(err["error"]["param"], "Idempotency-Key");
    assert_eq!(err["error"]["code"], "idempotency_key_missing");
    let resp = post("{}", Some("not-a-uuid".into())).await.unwrap();
    assert_eq!(
        resp.json::<Value>().await.unwrap()["error"]["code"],
        "idempotency_key_invalid"
    );
    // Api-Version.
    let resp = app
        .client
        .get(app.url("/api/v1/collect/payments/x"))
        .bearer_auth(&key)
        .header("Api-Version", "2020-01")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert_eq!(
        resp.json::<Value>().await.unwrap()["error"]["param"],
        "Api-Version"
    );
}

#[service_test]
async fn idempotent_replays_and_conflicts(app: TestApp) {
    let key = app.test_key("Shop");
    let body = direct_payment("+2290166000001");
    let idem = new_key();
    let (status, first) = app.create(&key, &idem, &body).await;
    assert_eq!(status, 201);
    let (status, replay) = app.create(&key, &idem, &body).await;
    assert_eq!(status, 200);
    assert_eq!(replay["id"], first["id"]);
    assert_eq!(replay["idempotent_replay"], true);
    // Same key, other body.
    let mut other = body.clone();
    other["amount"] = json!(2000);
    let (status, err) = app.create(&key, &idem, &other).await;
    assert_eq!(status, 409);
    assert_eq!(err["error"]["type"], "idempotency_error");
    assert_eq!(err["error"]["code"], "idempotency_key_reused");
    // Same reference and body under another key: replay; other body: conflict.
    let (status, by_ref) = app.create(&key, &new_key(), &body).await;
    assert_eq!(status, 200);
    assert_eq!(by_ref["id"], first["id"]);
    assert_eq!(by_ref["idempotent_replay"], true);
    let (status, err) = app.create(&key, &new_key(), &other).await;
    assert_eq!(status, 409);
    assert_eq!(err["error"]["code"], "reference_already_used");
    // Keys are scoped per merchant: another merchant may use the same key and reference.
    let key_b = app.test_key("Other");
    let (status, b) = app.create(&key_b, &idem, &body).await;
    assert_eq!(status, 201);
    assert_ne!(b["id"], first["id"]);
}

/// A reference holding what a URL escapes (a space, `é`, `#`, `?`, `+`) is
/// found by its escaped form, in both generations; `+` in a path is itself.
#[service_test]
async fn a_reference_is_found_by_its_url_escaped_form(app: TestApp) {
    let key = app.test_key("Shop");
    let mut body = direct_payment("+2290166000001");
    body["reference"] = json!("order 1 é#?+");
    let (_, p) = app.create_ok(&key, &body).await;
    let escaped = "order%201%20%C3%A9%23%3F%2B";
    let (status, got) = app
        .get(&key, &format!("/api/v1/collect/payments/{escaped}"))
        .await;
    assert_eq!((status, &got["id"]), (200, &p["id"]), "{got}");
    let (status, got) = app
        .get(&key, "/api/v1/collect/payments/order%201%20%C3%A9%23%3F+")
        .await;
    assert_eq!((status, &got["id"]), (200, &p["id"]), "{got}");
    let (status, _) = app
        .get(&key, "/api/v1/collect/payments/order%201%20%C3%A9%23%3F%20")
        .await;
    assert_eq!(status, 404, "a space is not a plus");
    let (status, legacy) = app
        .get(&key, &format!("/api/v1/collect/mobile-money/{escaped}"))
        .await;
    assert_eq!((status, &legacy["id"]), (200, &p["id"]), "{legacy}");
    let (status, refunds) = app
        .get(&key, &format!("/api/v1/collect/payments/{escaped}/refunds"))
        .await;
    assert_eq!(status, 200, "{refunds}");
}
