//! Operator prediction from the numbering plans, and the checkout page
//! preselecting it.

use serde_json::{Value, json};

use crate::support::*;
use mmc_test_kit::service_test;

async fn predict(app: &TestApp, key: &str, query: &str) -> (u16, Value) {
    app.get(
        key,
        &format!("/api/v1/collect/payments/operators/predict?{query}"),
    )
    .await
}

#[service_test]
async fn a_number_predicts_its_operator_by_the_numbering_plan(app: TestApp) {
    let key = app.test_key("Shop");
    for (query, country, operator) in [
        ("phone=%2B2290166000001", "BJ", json!("mtn-bj")),
        ("phone=0195000001&country=BJ", "BJ", json!("moov-bj")),
        (
            "phone=00229%2001%2040%2000%2000%2001",
            "BJ",
            json!("celtiis-bj"),
        ),
        ("phone=%2B22890000001", "TG", json!("togocom-tg")),
        ("phone=99000001&country=TG", "TG", json!("moov-tg")),
        ("phone=%2B2250700000001", "CI", json!("orange-ci")),
        ("phone=0500000001&country=CI", "CI", json!("mtn-ci")),
        // Wave runs on every network: never predicted.
        ("phone=%2B2252700000001", "CI", Value::Null),
    ] {
        let (status, body) = predict(&app, &key, query).await;
        if operator.is_null() {
            // +225 27 is a fixed line: not a mobile number at all.
            assert_eq!(status, 400, "{query}: {body}");
            continue;
        }
        assert_eq!(status, 200, "{query}: {body}");
        assert_eq!(body["object"], "operator_prediction");
        assert_eq!(body["country"], country, "{query}");
        assert_eq!(body["operator"], operator, "{query}: {body}");
        assert_eq!(body["available"], true, "the simulator serves it in test");
        assert!(body["phone"].as_str().unwrap().starts_with('+'));
    }
    for (query, code) in [
        ("", "parameter_missing"),
        ("phone=", "parameter_missing"),
        ("phone=abc&country=BJ", "phone_invalid"),
        ("phone=0166000001", "phone_invalid"), // local form without its country
        ("phone=0166000001&country=FR", "country_not_supported"),
    ] {
        let (status, body) = predict(&app, &key, query).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert_eq!(body["error"]["code"], code, "{query}: {body}");
    }
    let (status, _) = app
        .client
        .get(app.url("/api/v1/collect/payments/operators/predict?phone=%2B2290166000001"))
        .send()
        .await
        .map(|r| (r.status().as_u16(), ()))
        .unwrap();
    assert_eq!(status, 401, "a key is needed");
}

#[service_test]
async fn the_checkout_page_preselects_the_predicted_operator(app: TestApp) {
    let key = app.test_key("Shop");
    let mut body = direct_payment("+2290195000001"); // a Moov Benin number
    body["mode"] = json!("hosted");
    body.as_object_mut().unwrap().remove("operator");
    let (_, p) = app.create_ok(&key, &body).await;
    let html = app
        .client
        .get(p["checkout_url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        html.contains(r#"<option value="moov-bj" selected>"#),
        "{html}"
    );
    assert!(!html.contains(r#"value="mtn-bj" selected"#));
}
