//! The legacy generation as a facade over the current one.

use serde_json::{Value, json};

use crate::support::*;
use mmc_test_kit::service_test;

async fn call(
    app: &TestApp,
    key: &str,
    method: &str,
    path: &str,
    idem: Option<&str>,
    body: Option<Value>,
) -> (u16, Value, reqwest::header::HeaderMap) {
    let mut req = app
        .client
        .request(method.parse().unwrap(), app.url(path))
        .bearer_auth(key);
    if let Some(k) = idem {
        req = req.header("Idempotency-Key", k);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let headers = resp.headers().clone();
    (status, resp.json().await.unwrap_or(Value::Null), headers)
}

fn collection(phone: &str, operator: &str) -> Value {
    json!({
        "amount": 150000, "phone": phone, "country": "BJ", "operator": operator,
        "reference": format!("leg-{}", uuid::Uuid::new_v4()), "customer_first_name": "Kossi", "ignored_field": true,
    })
}

async fn app_with(require_key: bool) -> TestApp {
    spawn_app_with(move |c| {
        c.components
            .entry("simulator".into())
            .or_default()
            .settings
            .insert("completion_delay_ms".into(), "0".into());
        if require_key {
            c.components
                .entry("legacy".into())
                .or_default()
                .settings
                .insert("require_idempotency_key".into(), "true".into());
        }
    })
    .await
}

#[service_test]
async fn initiate_replay_read_and_cross_generation_consistency() {
    let app = app_with(false).await;
    let key = app.test_key("Shop");
    let body = collection("97000001", "mtn-bj");
    let idem = "legacy-order-1";
    let (status, c, headers) = call(
        &app,
        &key,
        "POST",
        "/api/v1/collect/mobile-money/",
        Some(idem),
        Some(body.clone()),
    )
    .await;
    assert_eq!(status, 201, "{c}");
    assert_eq!(c["amount"], 150000, "minor units");
    assert_eq!(c["status"], "PROCESSING");
    assert_eq!(c["currency"], "XOF");
    assert_eq!(c["country"], "BJ");
    assert_eq!(c["operator"], "mtn-bj");
    assert_eq!(c["phone"], "+2290197000001");
    assert_eq!(c["idempotent_replay"], false);
    assert!(c["message"].is_string() && c["psp_reference"].is_string() && c["id"].is_string());
    assert!(headers.get("deprecation").is_some());
    assert!(headers.get("sunset").is_some());
    assert!(
        headers["link"]
            .to_str()
            .unwrap()
            .contains("rel=\"successor-version\"")
    );

    let (status, replay, _) = call(
        &app,
        &key,
        "POST",
        "/api/v1/collect/mobile-money",
        Some(idem),
        Some(body.clone()),
    )
    .await;
    assert_eq!(
        (status, &replay["id"], &replay["idempotent_replay"]),
        (200, &c["id"], &json!(true)),
        "no trailing slash works too"
    );

    let reference = body["reference"].as_str().unwrap();
    let (status, read, _) = call(
        &app,
        &key,
        "GET",
        &format!("/api/v1/collect/mobile-money/{reference}/?sync=yes"),
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(read["status"], "COMPLETED", "sync=yes asked the PSP");
    // The same payment through the current generation, by reference: consistent.
    let (status, current) = app
        .get(&key, &format!("/api/v1/collect/payments/{reference}"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(current["id"], c["id"]);
    assert_eq!(current["status"], "completed");
    assert_eq!(current["amount"], 1500);
    // And a current payment through the legacy read.
    let (_, p) = app
        .create(&key, &new_key(), &direct_payment("+2290166000002"))
        .await;
    let (status, l, _) = call(
        &app,
        &key,
        "GET",
        &format!(
            "/api/v1/collect/mobile-money/{}",
            p["reference"].as_str().unwrap()
        ),
        None,
        None,
    )
    .await;
    assert_eq!(
        (status, l["status"].as_str(), l["amount"].as_u64()),
        (200, Some("PROCESSING"), Some(150000))
    );
}

#[service_test]
async fn otp_flow_and_every_legacy_error_code() {
    let app = app_with(true).await;
    let key = app.test_key("Shop");
    let post = |body: Value, idem: Option<String>| {
        let app = &app;
        let key = key.clone();
        async move {
            call(
                app,
                &key,
                "POST",
                "/api/v1/collect/mobile-money/",
                idem.as_deref(),
                Some(body),
            )
            .await
        }
    };
    // missing_idempotency_key (the platform setting is on)
    let (status, e, _) = post(collection("+2290166000001", "mtn-bj"), None).await;
    assert_eq!(
        (status, e["code"].as_str()),
        (400, Some("missing_idempotency_key")),
        "{e}"
    );
    assert!(e["error"].is_string());
    let k = || Some(new_key());
    // invalid_operator: unknown slug, and an operator of another country
    let (status, e, _) = post(collection("+2290166000001", "airtel"), k()).await;
    assert_eq!(
        (status, e["code"].as_str()),
        (400, Some("invalid_operator"))
    );
    let (status, e, _) = post(collection("+2290166000001", "orange-ci"), k()).await;
    assert_eq!(
        (status, e["code"].as_str()),
        (400, Some("invalid_operator"))
    );
    // invalid_phone
    let (status, e, _) = post(collection("+22890000001", "mtn-bj"), k()).await;
    assert_eq!((status, e["code"].as_str()), (400, Some("invalid_phone")));
    // amount_too_low
    let mut low = collection("+2290166000001", "mtn-bj");
    low["amount"] = json!(9900);
    let (status, e, _) = post(low, k()).await;
    assert_eq!((status, e["code"].as_str()), (400, Some("amount_too_low")));
    // not a multiple of 100, and a missing field → invalid_request
    let mut odd = collection("+2290166000001", "mtn-bj");
    odd["amount"] = json!(150050);
    assert_eq!(post(odd, k()).await.1["code"], "invalid_request");
    let mut missing = collection("+2290166000001", "mtn-bj");
    missing.as_object_mut().unwrap().remove("reference");
    let (status, e, _) = post(missing, k()).await;
    assert_eq!((status, e["code"].as_str()), (400, Some("invalid_request")));

    // OTP operator: AWAITING_OTP with next_action "confirm".
    let otp = collection("+2290166000001", "coris-bj");
    let (status, c, _) = post(otp.clone(), k()).await;
    assert_eq!(status, 201, "{c}");
    assert_eq!(c["status"], "AWAITING_OTP");
    assert_eq!(c["next_action"], "confirm");
    let confirm = |reference: &str, code: &str| {
        let body = json!({"reference": reference, "otp": code});
        let app = &app;
        let key = key.clone();
        async move {
            call(
                app,
                &key,
                "POST",
                "/api/v1/collect/mobile-money/confirm/",
                None,
                Some(body),
            )
            .await
        }
    };
    let reference = otp["reference"].as_str().unwrap();
    let (status, e, _) = confirm(reference, "12a4").await;
    assert_eq!((status, e["code"].as_str()), (400, Some("invalid_otp")));
    let (status, e, _) = confirm(reference, "654321").await;
    assert_eq!((status, e["code"].as_str()), (400, Some("invalid_otp")));
    let (status, done, _) = confirm(reference, "123456").await;
    assert_eq!(status, 200, "{done}");
    assert_eq!(done["status"], "COMPLETED");
    // otp_not_required
    let (status, e, _) = confirm(reference, "123456").await;
    assert_eq!(
        (status, e["code"].as_str()),
        (400, Some("otp_not_required"))
    );
    // not_found
    let (status, e, _) = confirm("no-such-ref", "123456").await;
    assert_eq!((status, e["code"].as_str()), (404, Some("not_found")));
    let (status, e, _) = call(
        &app,
        &key,
        "GET",
        "/api/v1/collect/mobile-money/no-such-ref/",
        None,
        None,
    )
    .await;
    assert_eq!((status, e["code"].as_str()), (404, Some("not_found")));
}

#[service_test]
async fn collect_failed_and_collect_confirm_failed_when_the_rules_component_is_down() {
    // The legacy facade without collect: the shared rules are unreachable.
    let components = tempfile::tempdir().unwrap().keep();
    for name in ["legacy", "simulator"] {
        std::fs::copy(
            components_dir().join(format!("{name}.wasm")),
            components.join(format!("{name}.wasm")),
        )
        .unwrap();
    }
    let app = spawn_app_with(move |c| c.components_dir = Some(components)).await;
    let key = app.test_key("Shop");
    let (status, e, _) = call(
        &app,
        &key,
        "POST",
        "/api/v1/collect/mobile-money/",
        Some("k1"),
        Some(collection("+2290166000001", "mtn-bj")),
    )
    .await;
    assert_eq!(
        (status, e["code"].as_str()),
        (500, Some("collect_failed")),
        "{e}"
    );
    let (status, e, _) = call(
        &app,
        &key,
        "POST",
        "/api/v1/collect/mobile-money/confirm/",
        None,
        Some(json!({"reference": "r", "otp": "123456"})),
    )
    .await;
    assert_eq!(
        (status, e["code"].as_str()),
        (500, Some("collect_confirm_failed"))
    );
}

#[service_test]
async fn legacy_catalogue_lists_the_same_operators_and_legacy_events_are_written() {
    let app = app_with(false).await;
    let key = app.test_key("Shop");
    let (status, cat, _) = call(&app, &key, "GET", "/api/v1/collect/operators/", None, None).await;
    assert_eq!(status, 200);
    let (_, current) = app.get(&key, "/api/v1/collect/payments/operators/").await;
    let slugs = |v: &Value, list: &str| -> Vec<String> {
        v[list]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| {
                c["operators"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| o["slug"].as_str().unwrap().to_string())
            })
            .collect()
    };
    assert_eq!(slugs(&cat, "countries"), slugs(&current, "data"));
    let tg = &cat["countries"][1];
    assert_eq!(tg["country"], "TG");
    let togocom = tg["operators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|o| o["slug"] == "togocom-tg")
        .unwrap();
    assert!(
        togocom["alias"]
            .as_array()
            .unwrap()
            .contains(&json!("tmoney"))
    );

    let body = collection("+2290166000001", "mtn-bj");
    call(
        &app,
        &key,
        "POST",
        "/api/v1/collect/mobile-money/",
        None,
        Some(body.clone()),
    )
    .await;
    let reference = body["reference"].as_str().unwrap();
    call(
        &app,
        &key,
        "GET",
        &format!("/api/v1/collect/mobile-money/{reference}?sync=1"),
        None,
        None,
    )
    .await;
    let db = test_storage(&base_config(app.data_dir.path())).sql;
    let events: Vec<(String, String, Vec<u8>)> = db
        .read(|c| {
            c.query(
                "SELECT id, event_type, payload FROM outbox ORDER BY seq",
                &[],
            )?
            .iter()
            .map(|r| Ok((r.text(0)?, r.text(1)?, r.blob(2)?)))
            .collect()
        })
        .unwrap();
    let types: Vec<&str> = events.iter().map(|(_, t, _)| t.as_str()).collect();
    assert_eq!(
        types,
        vec!["collect.initiated", "collect.updated", "collect.completed"]
    );
    // Stored compact (not JSON); the events API builds the body, as of each event.
    assert!(events.iter().all(|(_, _, payload)| payload[0] != b'{'));
    let statuses = ["PENDING", "PROCESSING", "COMPLETED"];
    for ((id, event_type, _), status) in events.iter().zip(statuses) {
        let (code, event) = app.get(&key, &format!("/api/v1/events/{id}")).await;
        assert_eq!(code, 200, "{event}");
        assert_eq!(event["id"], id.as_str());
        assert_eq!(event["type"], event_type.as_str());
        assert_eq!(event["api_version"], "legacy");
        assert_eq!(event["data"]["object"]["status"], status, "{event_type}");
        assert_eq!(event["data"]["object"]["amount"], 150000);
    }
}
