//! The routes through the admin API: read with their health, changed and
//! rolled back at runtime, each change a version; a payment's route
//! explained; a payout with no route held, then sent by itself once one can
//! take it.

use std::time::{Duration, Instant};

use reqwest::Method;
use serde_json::{Value, json};

use crate::support::*;
use mmc_test_kit::service_test;

async fn routes_app() -> TestApp {
    spawn_app_with(|c| c.admin_token = Some(ADMIN.into())).await
}

async fn put_routes(app: &TestApp, env: &str, operator: &str, body: Value) -> (u16, Value) {
    let path = format!("/admin/v1/routes/{env}/{operator}");
    admin(app, Method::PUT, &path, Some(body.to_string().into_bytes())).await
}

fn direct(phone: &str) -> Value {
    json!({
        "reference": format!("route-{}", uuid::Uuid::new_v4()),
        "amount": 1500,
        "currency": "XOF",
        "country": "BJ",
        "mode": "direct",
        "operator": "mtn-bj",
        "customer": {"phone": phone},
    })
}

#[service_test]
async fn routes_change_at_runtime_explain_each_payment_and_roll_back() {
    let app = routes_app().await;
    let (merchant, key, _) = app.merchant("Routes");
    let (status, r) = admin(&app, Method::GET, "/admin/v1/routes", None).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        (&r["version"], &r["routes"]["test"]["*"]),
        (&Value::Null, &json!("simulator"))
    );

    // A payment on the configured route.
    let (status, p) = app
        .create(&key, &new_key(), &direct("+2290166001001"))
        .await;
    assert_eq!(status, 201, "{p}");
    let first_id = p["id"].as_str().unwrap().to_string();
    let path = format!("/api/v1/collect/payments/{first_id}/route");
    let (_, route) = app.get(&key, &path).await;
    assert_eq!(route["adapter"], "simulator", "{route}");
    assert_eq!(route["explanation"]["reason"], "preferred", "{route}");
    assert_eq!(route["explanation"]["rule"], "routing.test.*", "{route}");

    // An adapter that is not loaded first: skipped, with the reason.
    let (status, r) = put_routes(
        &app,
        "test",
        "mtn-bj",
        json!({"routes": ["ghost", "simulator"], "note": "ghost first"}),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    let (status, p) = app
        .create(&key, &new_key(), &direct("+2290166001002"))
        .await;
    assert_eq!(status, 201, "{p}");
    let id = p["id"].as_str().unwrap();
    let (_, route) = app
        .get(&key, &format!("/api/v1/collect/payments/{id}/route"))
        .await;
    assert_eq!(route["adapter"], "simulator", "{route}");
    assert_eq!(route["explanation"]["reason"], "next", "{route}");
    assert_eq!(
        route["explanation"]["rule"], "routing.test.mtn-bj",
        "{route}"
    );
    let ghost = &route["explanation"]["candidates"][0];
    assert_eq!(
        (&ghost["adapter"], &ghost["verdict"]),
        (&json!("ghost"), &json!("skipped"))
    );
    assert!(
        ghost["note"].as_str().unwrap().starts_with("not loaded"),
        "{ghost}"
    );
    // The admin API's calls of the payment: the choice (other than the
    // first route) before the request to pay.
    let started = Instant::now();
    let calls = loop {
        let calls = calls_of(&app, id).await;
        if calls.len() >= 2 || started.elapsed() > Duration::from_secs(5) {
            break calls;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let seen: Vec<(&Value, &Value, &Value)> = calls
        .iter()
        .map(|c| (&c["operation"], &c["adapter"], &c["outcome"]))
        .collect();
    assert_eq!(
        seen[..2],
        [
            (&json!("route"), &json!("simulator"), &json!("next")),
            (&json!("initiate"), &json!("simulator"), &json!("ok"))
        ],
        "{calls:?}"
    );
    // The admin API reads every payment's route and why, the first route's too.
    let (status, admin_route) = admin(
        &app,
        Method::GET,
        &format!("/admin/v1/payments/{id}/route"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{admin_route}");
    assert_eq!(
        (&admin_route["environment"], &admin_route["merchant_id"]),
        (&json!("test"), &json!(merchant)),
        "{admin_route}"
    );
    assert_eq!(admin_route["explanation"], route["explanation"]);
    let (_, first) = admin(
        &app,
        Method::GET,
        &format!("/admin/v1/payments/{first_id}/route"),
        None,
    )
    .await;
    assert_eq!(
        (&first["adapter"], &first["explanation"]["reason"]),
        (&json!("simulator"), &json!("preferred")),
        "{first}"
    );
    let (status, none) = admin(
        &app,
        Method::GET,
        "/admin/v1/payments/pay_unknown/route",
        None,
    )
    .await;
    assert_eq!(status, 404, "{none}");

    // Bad changes are refused with the reason, and change nothing.
    for (env, op, body, says) in [
        (
            "test",
            "mtn-bj",
            json!({"routes": ["a", "a"]}),
            "listed twice",
        ),
        (
            "prod",
            "mtn-bj",
            json!({"routes": "simulator"}),
            "environment",
        ),
        (
            "test",
            "mtn-xx",
            json!({"routes": "simulator"}),
            "operator slug",
        ),
        (
            "test",
            "mtn-bj",
            json!({"adapters": "simulator"}),
            "\"routes\"",
        ),
        (
            "test",
            "mtn-bj",
            json!({"routes": {"routes": ["simulator"], "rules": [{"operation": "loan", "routes": ["simulator"]}]}}),
            "operation",
        ),
    ] {
        let (status, e) = put_routes(&app, env, op, body).await;
        assert_eq!(status, 400, "{e}");
        let message = e["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{message}");
    }

    let (_, versions) = admin(&app, Method::GET, "/admin/v1/routes/versions", None).await;
    let versions = versions["data"].as_array().unwrap();
    assert_eq!(versions.len(), 1, "{versions:?}");
    assert_eq!(versions[0]["change"], "set test mtn-bj");
    assert_eq!(versions[0]["note"], "ghost first");
    assert_eq!(versions[0]["active"], true);
    let (_, r) = admin(&app, Method::GET, "/admin/v1/routes", None).await;
    assert_eq!(r["routes"]["test"]["mtn-bj"], json!(["ghost", "simulator"]));
    assert_eq!(r["version"], versions[0]["id"]);
    let health = r["health"].as_array().unwrap();
    assert!(
        health
            .iter()
            .any(|h| h["adapter"] == "simulator" && h["state"] == "healthy"),
        "{health:?}"
    );

    // Rolled back: the configuration's routes are in force again.
    let (status, r) = admin(&app, Method::POST, "/admin/v1/routes/rollback", None).await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["routes"]["test"].get("mtn-bj"), None, "{r}");
    let (status, p) = app
        .create(&key, &new_key(), &direct("+2290166001003"))
        .await;
    assert_eq!(status, 201);
    let path = format!(
        "/api/v1/collect/payments/{}/route",
        p["id"].as_str().unwrap()
    );
    assert_eq!(
        app.get(&key, &path).await.1["explanation"]["rule"],
        "routing.test.*"
    );
    let (status, e) = admin(&app, Method::POST, "/admin/v1/routes/rollback", None).await;
    assert_eq!(
        (status, &e["error"]["code"]),
        (409, &json!("nothing_to_roll_back")),
        "{e}"
    );

    let metrics = app.metrics().await;
    assert!(
        metrics.contains(
            "mmc_route_choices_total{environment=\"test\",operator=\"mtn-bj\",adapter=\"simulator\",reason=\"next\"} 1"
        ),
        "{metrics}"
    );
}

#[service_test]
async fn no_route_for_a_payment_is_a_clear_error_and_nothing_is_stored() {
    let app = routes_app().await;
    let key = app.test_key("Nowhere");
    let (idem, earlier) = (new_key(), direct("+2290166001005"));
    let (status, first) = app.create(&key, &idem, &earlier).await;
    assert_eq!(status, 201, "{first}");
    let (status, _) = put_routes(&app, "test", "mtn-bj", json!({"routes": ["ghost"]})).await;
    assert_eq!(status, 200);
    // A replay still gets the payment it made; a new payment is refused.
    let (_, replay) = app.create(&key, &idem, &earlier).await;
    assert_eq!(replay["id"], first["id"], "{replay}");
    assert_eq!(replay["idempotent_replay"], true, "{replay}");
    let (status, e) = app
        .create(&key, &new_key(), &direct("+2290166001004"))
        .await;
    assert_eq!(status, 400, "{e}");
    assert_eq!(e["error"]["code"], "operator_unavailable", "{e}");
    let (_, list) = app.get(&key, "/api/v1/collect/payments").await;
    let listed: Vec<&Value> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["id"])
        .collect();
    assert_eq!(listed, [&first["id"]], "{list}");
}

/// A payout whose operator no route can take waits, held with the reason
/// (never failed), and goes by itself once a route can take it.
#[service_test]
async fn a_payout_with_no_route_is_held_then_sent_when_one_can_take_it() {
    let app = routes_app().await;
    let key = app.test_key("Held");
    let item = |phone: &str, reference: &str| {
        json!({"beneficiary_name": "Awa Koné", "phone": phone, "amount": 1000,
            "currency": "XOF", "reference": reference})
    };
    let resp = app
        .client
        .post(app.url("/api/v1/bulk-payments/"))
        .bearer_auth(&key)
        .header("Idempotency-Key", new_key())
        .json(&json!({"name": "Held", "items": [item("+2290166001001", "mtn"), item("+22890001234", "togocom")]}))
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    let b: Value = resp.json().await.unwrap();
    assert_eq!(status, 201, "{b}");
    let id = id_of(&b);
    // Its route goes away before it is paid.
    let (status, _) = put_routes(&app, "test", "mtn-bj", json!({"routes": ["ghost"]})).await;
    assert_eq!(status, 200);
    let (status, v) = app
        .post(
            &key,
            &format!("/api/v1/bulk-payments/{id}/validate/"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let items_path = format!("/api/v1/bulk-payments/{id}/items/?page_size=100");
    let by_ref = |page: &Value, r: &str| -> Value {
        page["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["reference"] == r)
            .cloned()
            .unwrap()
    };
    // The other operator's payout goes; MTN's waits, saying why.
    let started = Instant::now();
    let page = loop {
        let (_, page) = app.get(&key, &items_path).await;
        if by_ref(&page, "togocom")["status"] == "completed"
            && by_ref(&page, "mtn")["held"].is_object()
        {
            break page;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{page}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let held = by_ref(&page, "mtn");
    assert_eq!(held["status"], "pending", "{held}");
    let reason = held["held"]["reason"].as_str().unwrap();
    assert!(
        reason.contains("no provider can take a payout to mtn-bj"),
        "{reason}"
    );
    let (_, batch) = app.get(&key, &format!("/api/v1/bulk-payments/{id}/")).await;
    assert_eq!(batch["status"], "processing", "{batch}");

    // A route again: the held payout goes by itself, once.
    let (status, _) = admin(&app, Method::DELETE, "/admin/v1/routes/test/mtn-bj", None).await;
    assert_eq!(status, 200);
    let started = Instant::now();
    loop {
        let (_, batch) = app.get(&key, &format!("/api/v1/bulk-payments/{id}/")).await;
        if batch["status"] == "completed" {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{batch}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, page) = app.get(&key, &items_path).await;
    let sent = by_ref(&page, "mtn");
    assert_eq!(
        (&sent["status"], &sent["attempts"]),
        (&json!("completed"), &json!(1)),
        "{sent}"
    );
    assert!(sent.get("held").is_none(), "{sent}");
}
