//! Batches through the JSON API: the records returned, the validation
//! workflow and its refusals, isolation, limits, pagination (idempotency:
//! `idempotency.rs`).

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::*;
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_waits_for_validation_then_every_item_is_paid() {
    let app = spawn_app().await;
    let (_, key, _) = app.merchant("Payroll SARL");
    let b = create(
        &app,
        &key,
        vec![
            item(&bj(1001), 5000, "sal-1"),
            item("+22890001002", 7000, "sal-2"),
            // Written the way a person types it: spaces and the 00 prefix.
            item("00225 07 0000 1003", 3000, "sal-3"),
        ],
    )
    .await;
    assert_eq!(b["object"], "bulk_payment");
    assert_eq!(
        b["status"], "pending_validation",
        "default threshold 0: every batch waits"
    );
    assert_eq!(b["requires_validation"], true);
    assert_eq!(b["item_count"], 3);
    assert_eq!(b["total_amount"], 15000);
    assert_eq!(b["currency"], "XOF");
    assert_eq!(
        b["items_by_status"],
        json!({"pending": 3, "processing": 0, "completed": 0, "failed": 0})
    );
    assert_eq!(b["name"], "Salaries");
    assert_eq!(b["source"], "api");
    assert!(b["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(b["validated_at"].is_null());
    let id = b["id"].as_str().unwrap();

    // Nothing is paid while the batch waits.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let items = all_items(&app, &key, id, "").await;
    assert_eq!(items.len(), 3);
    assert!(
        items
            .iter()
            .all(|i| i["status"] == "pending" && i["attempts"] == 0)
    );
    assert_eq!(items[0]["phone"], "+2290166001001");
    assert_eq!(items[0]["country"], "BJ");
    assert_eq!(items[0]["operator"], "mtn-bj");
    assert_eq!(items[1]["country"], "TG");
    assert_eq!(items[1]["operator"], "togocom-tg");
    assert_eq!(items[2]["phone"], "+2250700001003");
    assert_eq!(items[2]["operator"], "orange-ci");
    assert_eq!(items[2]["line"], 3);

    let (status, v) = validate(&app, &key, id).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["status"], "processing");
    assert!(v["validated_at"].is_string());

    let done = wait_until_final(&app, &key, id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "completed");
    assert_eq!(
        done["items_by_status"],
        json!({"pending": 0, "processing": 0, "completed": 3, "failed": 0})
    );
    assert_eq!(done["amount_completed"], 15000);
    assert_eq!(done["amount_failed"], 0);
    assert!(done["completed_at"].is_string());
    for i in all_items(&app, &key, id, "").await {
        assert_eq!(i["status"], "completed", "{i}");
        assert_eq!(i["attempts"], 1);
        assert!(i["psp_reference"].as_str().unwrap().starts_with("simpo-"));
        assert!(i["failure_code"].is_null());
        assert!(i["completed_at"].is_string());
    }

    // Validating twice is refused, whatever the batch became.
    let (status, e) = validate(&app, &key, id).await;
    assert_eq!(status, 409, "{e}");
    assert_eq!(e["error"]["type"], "state_error");
    assert_eq!(e["error"]["code"], "batch_already_validated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn below_the_merchant_threshold_a_batch_is_paid_at_once_and_cannot_be_validated() {
    let data = tempfile::tempdir().unwrap();
    // The merchant must exist before the server starts to be named in its settings.
    let accounts = mmc_accounts::Accounts::new(test_storage(&base_config(data.path())).sql);
    let trusted = accounts.create_merchant("Trusted").unwrap();
    let trusted_key = accounts
        .create_key(&trusted.id, mmc_accounts::Environment::Test)
        .unwrap()
        .key;
    let app = spawn_app_with(|c| {
        c.data_dir = data.path().to_path_buf();
        bulk_settings(
            c,
            &[(&format!("validation_threshold.{}", trusted.id), "10000")],
        );
    })
    .await;
    let (_, other_key, _) = app.merchant("Other");

    // 0004 stays pending at the operator, so the batch stays processing.
    let b = create(
        &app,
        &trusted_key,
        vec![item(&bj(1), 4000, "a"), item(&bj(4), 6000, "b")],
    )
    .await;
    assert_eq!(
        b["status"], "processing",
        "total 10000 is within the threshold"
    );
    assert_eq!(b["requires_validation"], false);
    assert_eq!(b["validation_threshold"], 10000);
    let id = b["id"].as_str().unwrap();
    let (status, e) = validate(&app, &trusted_key, id).await;
    assert_eq!(status, 409, "{e}");
    assert_eq!(e["error"]["code"], "batch_already_processing");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("threshold")
    );

    // One unit above the threshold waits.
    let b = create(
        &app,
        &trusted_key,
        vec![item(&bj(1), 4000, "a"), item(&bj(6), 6001, "b")],
    )
    .await;
    assert_eq!(b["status"], "pending_validation");

    // Another merchant keeps the default: everything waits.
    let b = create(&app, &other_key, vec![item(&bj(1), 100, "a")]).await;
    assert_eq!(b["status"], "pending_validation");
    assert_eq!(b["validation_threshold"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_merchants_or_environments_batch_is_not_found() {
    let app = spawn_app().await;
    let (_, key, live_key) = app.merchant("Owner");
    let (_, other_key, _) = app.merchant("Other");
    let b = create(&app, &key, vec![item(&bj(1), 1000, "a")]).await;
    let id = b["id"].as_str().unwrap();

    for k in [&other_key, &live_key] {
        let (status, e) = validate(&app, k, id).await;
        assert_eq!(status, 404, "{e}");
        assert_eq!(e["error"]["code"], "bulk_payment_not_found");
        assert_eq!(get(&app, k, &format!("{ROOT}{id}/")).await.0, 404);
        assert_eq!(get(&app, k, &format!("{ROOT}{id}/items/")).await.0, 404);
        assert_eq!(batch_count(&app, k).await, 0);
    }
    // Still waiting: the refused validations changed nothing.
    let (_, b) = get(&app, &key, &format!("{ROOT}{id}/")).await;
    assert_eq!(b["status"], "pending_validation");
    assert_eq!(
        get(&app, &key, &format!("{ROOT}no-such-batch/")).await.0,
        404
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_batch_is_never_paid() {
    let app = spawn_app().await;
    let (_, key, _) = app.merchant("Reviewer");
    let b = create(&app, &key, vec![item(&bj(1), 1000, "a")]).await;
    let id = b["id"].as_str().unwrap();
    let path = format!("{ROOT}{id}/validate/");
    let (status, r) = post(
        &app,
        &key,
        &path,
        &json!({"action": "reject", "reason": "wrong month"}),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["status"], "rejected");
    assert_eq!(r["rejection_reason"], "wrong month");
    assert!(r["rejected_at"].is_string());

    let events = batch_events(&app, &key, id).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "bulk.batch.rejected");

    let (status, e) = validate(&app, &key, id).await;
    assert_eq!(status, 409);
    assert_eq!(e["error"]["code"], "batch_rejected");
    let (status, e) = post(&app, &key, &path, &json!({"action": "maybe"})).await;
    assert_eq!(
        (status, e["error"]["param"].as_str()),
        (400, Some("action"))
    );

    tokio::time::sleep(Duration::from_millis(1200)).await;
    let items = all_items(&app, &key, id, "").await;
    assert_eq!(items[0]["status"], "pending");
    assert_eq!(items[0]["attempts"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_item_is_reported_and_nothing_is_created() {
    let app = spawn_app().await;
    let (_, key, _) = app.merchant("Careless");
    let (status, e) = post(
        &app,
        &key,
        ROOT,
        &json!({"name": "Mixed", "items": [
            item(&bj(1), 1000, "ok-1"),
            item("97000001", 1000, "local-number"),
            item(&bj(2), 50, "too-small"),
            {"beneficiary_name": "A", "phone": bj(3), "amount": "1000", "currency": "XOF", "reference": "amount-as-text"},
            {"beneficiary_name": "A", "phone": "+22890000001", "amount": 1000, "currency": "XAF", "reference": "wrong-currency"},
            {"beneficiary_name": "", "phone": "+22890000001", "amount": 1000, "currency": "XOF"},
            item(&bj(5), 1000, "ok-1"),
            {"beneficiary_name": "A", "phone": "+2290192000001", "amount": 1000, "currency": "XOF", "reference": "no-operator", "iban": "x"},
            item("+22890000001", 1000, "ok-2"),
            "not an object",
        ]}),
    )
    .await;
    assert_eq!(status, 400, "{e}");
    assert_eq!(e["error"]["code"], "invalid_items");
    assert_eq!(e["error"]["param"], "items");
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("8 items are invalid"),
        "{e}"
    );
    let found: Vec<(String, String)> = e["error"]["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["param"].as_str().unwrap().to_string(),
                x["code"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected = [
        ("items[1].phone", "phone_invalid"),
        ("items[2].amount", "amount_out_of_range"),
        ("items[3].amount", "parameter_invalid_integer"),
        ("items[4].currency", "currency_not_supported"),
        ("items[5].beneficiary_name", "parameter_missing"),
        ("items[5].reference", "parameter_missing"),
        ("items[6].reference", "reference_duplicate"),
        ("items[7].iban", "parameter_unknown"),
        ("items[7].phone", "operator_not_inferred"),
        ("items[9]", "parameter_invalid_object"),
    ];
    assert_eq!(
        found,
        expected
            .iter()
            .map(|(p, c)| (p.to_string(), c.to_string()))
            .collect::<Vec<_>>()
    );
    let dup = &e["error"]["errors"][6]["message"];
    assert!(dup.as_str().unwrap().contains("items[0]"), "{dup}");
    assert_eq!(batch_count(&app, &key).await, 0, "nothing was created");

    // Batch-level fields name their parameter.
    let (status, e) = post(
        &app,
        &key,
        ROOT,
        &json!({"items": [item(&bj(1), 1000, "a")]}),
    )
    .await;
    assert_eq!((status, e["error"]["param"].as_str()), (400, Some("name")));
    let (status, e) = post(&app, &key, ROOT, &json!({"name": "x", "items": []})).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (400, Some("items_empty"))
    );
    let (status, e) = post(
        &app,
        &key,
        ROOT,
        &json!({"name": "x", "items": [], "extra": 1}),
    )
    .await;
    assert_eq!((status, e["error"]["param"].as_str()), (400, Some("extra")));
    // The operator field settles numbers whose prefix does not tell (Wave runs on every network).
    let mut wave = item("+2250100000010", 1000, "w");
    wave["operator"] = json!("wave-ci");
    let b = create(&app, &key, vec![wave]).await;
    let items = all_items(&app, &key, b["id"].as_str().unwrap(), "").await;
    assert_eq!(items[0]["operator"], "wave-ci");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_beyond_the_item_limit_are_413() {
    let app = spawn_app_with(|c| bulk_settings(c, &[("max_items", "3")])).await;
    let (_, key, _) = app.merchant("Big");
    let items: Vec<Value> = (0..4)
        .map(|i| item(&bj(10 + i), 1000, &format!("r{i}")))
        .collect();
    let (status, e) = post(&app, &key, ROOT, &json!({"name": "big", "items": items})).await;
    assert_eq!(status, 413, "{e}");
    assert_eq!(e["error"]["code"], "too_many_items");
    let message = e["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("4 payout lines") && message.contains("limit is 3"),
        "{message}"
    );
    // At the limit is fine.
    create(&app, &key, items[..3].to_vec()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_are_paginated_newest_first() {
    let app = spawn_app().await;
    let (_, key, _) = app.merchant("Lister");
    let mut ids = Vec::new();
    for n in 0..5 {
        let (status, b) = post(
            &app,
            &key,
            ROOT,
            &json!({"name": format!("batch {n}"), "items": [item(&bj(1), 1000, "a")]}),
        )
        .await;
        assert_eq!(status, 201, "{b}");
        ids.push(b["id"].as_str().unwrap().to_string());
    }
    ids.reverse();

    let (status, p1) = get(&app, &key, &format!("{ROOT}?page_size=2")).await;
    assert_eq!(status, 200, "{p1}");
    assert_eq!(p1["count"], 5);
    assert!(p1["previous"].is_null());
    let page_ids = |p: &Value| -> Vec<String> {
        p["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["id"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(page_ids(&p1), ids[0..2]);
    let next = p1["next"].as_str().unwrap();
    assert!(next.starts_with(&app.base), "absolute link: {next}");
    let (_, p2) = get(&app, &key, next).await;
    assert_eq!(page_ids(&p2), ids[2..4]);
    assert!(p2["previous"].as_str().unwrap().contains("page=1"));
    let (_, p3) = get(&app, &key, p2["next"].as_str().unwrap()).await;
    assert_eq!(page_ids(&p3), ids[4..5]);
    assert!(p3["next"].is_null());
    let (_, beyond) = get(&app, &key, &format!("{ROOT}?page=9&page_size=2")).await;
    assert_eq!(beyond["count"], 5);
    assert_eq!(beyond["results"], json!([]));

    let (_, default_page) = get(&app, &key, ROOT).await;
    assert_eq!(default_page["results"].as_array().unwrap().len(), 5);
    for bad in ["page=0", "page=x", "page_size=0", "page_size=101"] {
        let (status, e) = get(&app, &key, &format!("{ROOT}?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {e}");
        assert_eq!(e["error"]["param"], bad.split('=').next().unwrap());
    }

    // Items: positions in order, filterable by status.
    let items: Vec<Value> = (0..5)
        .map(|i| item(&bj(100 + i), 1000 + i as u64, &format!("r{i}")))
        .collect();
    let b = create(&app, &key, items).await;
    let id = b["id"].as_str().unwrap();
    let (_, p) = get(&app, &key, &format!("{ROOT}{id}/items/?page=2&page_size=2")).await;
    assert_eq!(p["count"], 5);
    let refs: Vec<&str> = p["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["reference"].as_str().unwrap())
        .collect();
    assert_eq!(refs, ["r2", "r3"]);
    let (_, p) = get(
        &app,
        &key,
        &format!("{ROOT}{id}/items/?status=pending&page_size=2"),
    )
    .await;
    assert_eq!(p["count"], 5);
    assert!(p["next"].as_str().unwrap().contains("status=pending"));
    let (_, p) = get(&app, &key, &format!("{ROOT}{id}/items/?status=failed")).await;
    assert_eq!(
        (p["count"].as_u64(), p["results"].as_array().unwrap().len()),
        (Some(0), 0)
    );
    let (status, _) = get(&app, &key, &format!("{ROOT}{id}/items/?status=paid")).await;
    assert_eq!(status, 400);
}
