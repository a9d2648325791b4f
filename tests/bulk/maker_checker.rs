//! Maker-checker on bulk payouts: key scopes and the second approver.

use std::time::Duration;

use mmc_accounts::Environment;
use mmc_accounts::scopes::Scopes;
use serde_json::json;

use crate::helpers::*;
use crate::support::{TestApp, spawn_app_with};

async fn app_with_live_routes() -> TestApp {
    spawn_app_with(|c| {
        // Live operators routed to the simulator, so a live key can create a batch.
        c.routing.insert(
            "live".into(),
            [("*".to_string(), "simulator".into())].into(),
        );
    })
    .await
}

fn key(app: &TestApp, merchant: &str, env: Environment, scopes: &str) -> (String, String) {
    let k = app
        .accounts
        .create_key_with(merchant, env, Some(Scopes::parse(scopes).unwrap()))
        .unwrap();
    (k.id, k.key)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_batch_is_paid_only_once_a_second_key_approves_it() {
    let app = app_with_live_routes().await;
    let (merchant, _, owner) = app.merchant("Payroll");
    let (maker_id, maker) = key(&app, &merchant, Environment::Live, "bulk:create");
    let (checker_id, checker) = key(&app, &merchant, Environment::Live, "bulk:approve");

    let b = create(&app, &maker, vec![item(&bj(1), 1000, "a")]).await;
    let id = b["id"].as_str().unwrap();
    assert_eq!(b["status"], "pending_validation", "{b}");
    assert_eq!(b["created_by_key_id"], maker_id.as_str());

    // The key that made the batch holds no bulk:approve.
    let (status, e) = validate(&app, &maker, id).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("insufficient_scope")),
        "{e}"
    );
    // A full-scope key that made a batch may not approve it either (on by default in live).
    let own = create(&app, &owner, vec![item(&bj(2), 1000, "b")]).await;
    let own_id = own["id"].as_str().unwrap();
    let (status, e) = validate(&app, &owner, own_id).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("second_approver_required")),
        "{e}"
    );
    // The checker approves but cannot create, nor touch payments.
    let (status, e) = post(
        &app,
        &checker,
        ROOT,
        &json!({"name": "x", "items": [item(&bj(3), 1000, "c")]}),
    )
    .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("insufficient_scope")),
        "{e}"
    );
    let (status, _) = get(&app, &checker, "/api/v1/collect/payments/anything").await;
    assert_eq!(status, 403);
    let (status, v) = validate(&app, &checker, id).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "processing");
    assert_eq!(v["validated_by_key_id"], checker_id.as_str());
    // The owner's batch too, by the checker; the owner could still have withdrawn it.
    let withdrawn = create(&app, &owner, vec![item(&bj(4), 1000, "d")]).await;
    let (status, r) = post(
        &app,
        &owner,
        &format!("{ROOT}{}/validate/", withdrawn["id"].as_str().unwrap()),
        &json!({"action": "reject", "reason": "typo"}),
    )
    .await;
    assert_eq!(
        (status, r["status"].as_str()),
        (200, Some("rejected")),
        "{r}"
    );
    assert_eq!(validate(&app, &checker, own_id).await.0, 200);

    let done = wait_until_final(&app, &checker, id, Duration::from_secs(30)).await;
    assert_eq!(done["items_by_status"]["completed"], 1, "{done}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_test_the_rule_is_off_until_the_merchant_turns_it_on() {
    let app = app_with_live_routes().await;
    let (merchant, key, _) = app.merchant("Sandbox");
    let b = create(&app, &key, vec![item(&bj(1), 1000, "a")]).await;
    assert_eq!(validate(&app, &key, b["id"].as_str().unwrap()).await.0, 200);

    app.accounts
        .set_require_second_approver(&merchant, Environment::Test, true)
        .unwrap();
    // The server's key cache holds the old rule for at most 500 ms.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let b = create(&app, &key, vec![item(&bj(2), 1000, "b")]).await;
    let (status, e) = validate(&app, &key, b["id"].as_str().unwrap()).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("second_approver_required")),
        "{e}"
    );
    assert!(
        app.accounts
            .set_require_second_approver("no-such-merchant", Environment::Live, false)
            .is_err()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_validation_threshold_never_lets_one_key_pay_out_alone() {
    let app = spawn_app_with(|c| {
        c.routing.insert(
            "live".into(),
            [("*".to_string(), "simulator".into())].into(),
        );
        // Every batch is under the threshold: without maker-checker it pays at once.
        bulk_settings(c, &[("validation_threshold", "1000000000")]);
    })
    .await;
    let (merchant, test_key, owner) = app.merchant("Payroll");
    let (_, checker) = key(&app, &merchant, Environment::Live, "bulk:approve");

    // Test keys (the rule off): under the threshold, paid at once.
    let b = create(&app, &test_key, vec![item(&bj(1), 1000, "a")]).await;
    assert_eq!(b["status"], "processing", "{b}");
    // Live (the rule on): the threshold does not bypass the second approver.
    let b = create(&app, &owner, vec![item(&bj(2), 1000, "b")]).await;
    assert_eq!(b["status"], "pending_validation", "{b}");
    assert_eq!(b["requires_validation"], true, "{b}");
    let id = b["id"].as_str().unwrap();
    assert_eq!(validate(&app, &owner, id).await.0, 403);
    assert_eq!(validate(&app, &checker, id).await.0, 200);
}
