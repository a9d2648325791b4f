//! Confirm, cancel, refunds, expiry and concurrent idempotency (DESIGN §2).

use serde_json::{Value, json};

use crate::support::*;
use mmc_test_kit::service_test;

fn otp_payment(phone: &str) -> Value {
    let mut b = direct_payment(phone);
    b["operator"] = json!("coris-bj");
    b
}

async fn fast_app() -> TestApp {
    spawn_app_completing_after(0).await
}

#[service_test]
async fn otp_confirmation_rules() {
    let app = fast_app().await;
    let key = app.test_key("Shop");
    let (id, _) = app.create_ok(&key, &otp_payment("+2290166000001")).await;
    let confirm = format!("/api/v1/collect/payments/{id}/confirm");
    let (status, err) = app.post(&key, &confirm, json!({"otp": "123"})).await;
    assert_eq!(
        (status, err["error"]["param"].as_str()),
        (400, Some("otp")),
        "{err}"
    );
    let (status, err) = app.post(&key, &confirm, json!({})).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("parameter_missing"))
    );
    let (status, err) = app.post(&key, &confirm, json!({"otp": "000000"})).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("invalid_otp"))
    );
    assert_eq!(
        app.get(&key, &format!("/api/v1/collect/payments/{id}"))
            .await
            .1["status"],
        "awaiting_otp",
        "unchanged"
    );
    let (status, p) = app.post(&key, &confirm, json!({"otp": "123456"})).await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["status"], "completed");
    let (status, err) = app.post(&key, &confirm, json!({"otp": "123456"})).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("otp_not_required"))
    );
    assert_eq!(err["error"]["type"], "state_error");
    assert_eq!(
        app.post(
            &key,
            "/api/v1/collect/payments/nope/confirm",
            json!({"otp": "123456"})
        )
        .await
        .0,
        404
    );

    // Three wrong codes fail the payment.
    let (_, p) = app
        .create(&key, &new_key(), &otp_payment("+2290166000001"))
        .await;
    let confirm = format!("/api/v1/collect/payments/{}/confirm", id_of(&p));
    for _ in 0..3 {
        assert_eq!(
            app.post(&key, &confirm, json!({"otp": "999999"})).await.0,
            400
        );
    }
    let (_, after) = app
        .get(&key, &format!("/api/v1/collect/payments/{}", id_of(&p)))
        .await;
    assert_eq!(after["status"], "failed");
    assert_eq!(after["failure_code"], "otp_attempts_exceeded");
}

#[service_test]
async fn cancel_rules() {
    let app = fast_app().await;
    let key = app.test_key("Shop");
    let (id, _) = app.create_ok(&key, &direct_payment("+2290166000004")).await;
    let (status, err) = app
        .post(
            &key,
            &format!("/api/v1/collect/payments/{id}/cancel"),
            json!({"reason": "x".repeat(65)}),
        )
        .await;
    assert_eq!(
        (status, err["error"]["param"].as_str()),
        (400, Some("reason"))
    );
    let (status, c) = app
        .post(
            &key,
            &format!("/api/v1/collect/payments/{id}/cancel"),
            json!({"reason": "customer left"}),
        )
        .await;
    assert_eq!(status, 200, "{c}");
    assert_eq!(c["status"], "cancelled");
    let (status, err) = app
        .post(
            &key,
            &format!("/api/v1/collect/payments/{id}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("payment_not_cancellable"))
    );
    // The customer already paid (0001): the operator says so and the payment completes instead.
    let (_, p) = app
        .create(&key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    let cancel = format!("/api/v1/collect/payments/{}/cancel", id_of(&p));
    // The body is optional, but a JSON `null` is not an object: refused,
    // before anything is asked of the operator.
    let (status, err) = app.post(&key, &cancel, Value::Null).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("invalid_json"))
    );
    // No body at all is an empty one.
    let (status, err) = app.post_empty(&key, &cancel).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("payment_not_cancellable"))
    );
    assert_eq!(
        app.get(&key, &format!("/api/v1/collect/payments/{}", id_of(&p)))
            .await
            .1["status"],
        "completed"
    );
    assert_eq!(
        app.post(&key, "/api/v1/collect/payments/nope/cancel", json!({}))
            .await
            .0,
        404
    );
}

#[service_test]
async fn refunds_never_exceed_the_payment_and_a_full_refund_refunds_it() {
    let app = fast_app().await;
    let key = app.test_key("Shop");
    let (id, p) = app.create_ok(&key, &direct_payment("+2290166000001")).await;
    let refunds = format!("/api/v1/collect/payments/{id}/refunds");
    // Not completed yet (processing until synced) → 409.
    let (status, err) = app.post(&key, &refunds, json!({})).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("payment_not_refundable")),
        "{err}"
    );
    assert_eq!(
        app.get(&key, &format!("/api/v1/collect/payments/{id}?sync=1"))
            .await
            .1["status"],
        "completed"
    );

    let (status, err) = app.post(&key, &refunds, json!({"amount": 1501})).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("refund_amount_exceeds_remaining"))
    );
    let (status, err) = app.post(&key, &refunds, json!({"reason": "because"})).await;
    assert_eq!(
        (status, err["error"]["param"].as_str()),
        (400, Some("reason"))
    );
    // A refund's metadata is bounded as a payment's is.
    let big: serde_json::Map<String, serde_json::Value> =
        (0..51).map(|i| (format!("k{i}"), json!("v"))).collect();
    for (metadata, code) in [
        (json!(big), "metadata_too_large"),
        (json!({"note": "x".repeat(501)}), "metadata_invalid"),
        (json!({"nested": {"a": 1}}), "metadata_invalid"),
        (json!(["a"]), "parameter_invalid_object"),
    ] {
        let (status, err) = app
            .post(&key, &refunds, json!({"amount": 100, "metadata": metadata}))
            .await;
        assert_eq!(
            (status, err["error"]["code"].as_str()),
            (400, Some(code)),
            "{err}"
        );
    }
    let (status, r) = app
        .post(
            &key,
            &refunds,
            json!({"amount": 500, "reason": "duplicate", "metadata": {"ticket": 7}}),
        )
        .await;
    assert_eq!(status, 201, "{r}");
    assert_eq!(r["object"], "collect.refund");
    assert_eq!(r["payment_id"], p["id"]);
    assert_eq!(r["status"], "completed");
    assert_eq!(r["amount"], 500);
    assert_eq!(
        app.get(&key, &format!("/api/v1/collect/payments/{id}"))
            .await
            .1["status"],
        "completed",
        "partially refunded"
    );
    let (status, _) = app.post(&key, &refunds, json!({"amount": 1001})).await;
    assert_eq!(status, 400, "only 1000 remain");
    // A JSON `null` is no refund request; no body at all asks for the rest.
    let (status, err) = app.post(&key, &refunds, Value::Null).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("invalid_json"))
    );
    let (status, r) = app.post_empty(&key, &refunds).await;
    assert_eq!(
        (status, r["amount"].as_u64()),
        (201, Some(1000)),
        "the rest when the body is omitted"
    );
    assert_eq!(
        app.get(&key, &format!("/api/v1/collect/payments/{id}"))
            .await
            .1["status"],
        "refunded"
    );
    // A refund's event carries the payment as the refund left it (the
    // contract's envelope: `data.object` is the payment), and the refund;
    // it is listed under the payment.
    let (_, events) = app
        .get(
            &key,
            &format!("/api/v1/events?payment={id}&type=collect.refund.completed"),
        )
        .await;
    let data: Vec<&Value> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| &e["data"])
        .collect();
    assert_eq!(data.len(), 2, "{events}");
    let by_amount = |a: u64| *data.iter().find(|d| d["refund"]["amount"] == a).unwrap();
    let (partial, rest) = (by_amount(500), by_amount(1000));
    for d in [partial, rest] {
        assert_eq!(d["object"]["object"], "collect.payment", "{d}");
        assert_eq!(d["object"]["id"], p["id"]);
        assert_eq!(d["refund"]["object"], "collect.refund");
        assert_eq!(d["refund"]["status"], "completed");
    }
    assert_eq!(partial["object"]["status"], "completed");
    assert_eq!(rest["object"]["status"], "refunded");
    assert_eq!(rest["refund"]["id"], r["id"]);
    let (status, err) = app.post(&key, &refunds, json!({})).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("payment_not_refundable"))
    );
}

#[service_test]
async fn fifty_concurrent_identical_creates_make_one_payment_and_one_initiation(app: TestApp) {
    let key = app.test_key("Shop");
    let body = direct_payment("+2290166000001");
    let idem = new_key();
    let before = metric(
        &app.metrics().await,
        "mmc_component_calls_total",
        "component=\"simulator\",outcome=\"ok\"",
    );
    let calls = (0..50).map(|_| app.create(&key, &idem, &body));
    let results = futures::future::join_all(calls).await;
    the_one_created(&results);
    let after = metric(
        &app.metrics().await,
        "mmc_component_calls_total",
        "component=\"simulator\",outcome=\"ok\"",
    );
    assert_eq!(after - before, 1.0, "exactly one operator initiation");
}

#[service_test]
async fn unfinished_payments_expire_and_the_deadline_survives_a_restart() {
    let data = tempfile::tempdir().unwrap();
    let dir = data.path().to_path_buf();
    let (key, id) = {
        let d = dir.clone();
        let app = spawn_app_with(move |c| c.data_dir = d).await;
        let key = app.test_key("Shop");
        let mut body = direct_payment("+2290166000004"); // stays in progress
        body["expires_in_seconds"] = json!(300);
        let (_, p) = app.create(&key, &new_key(), &body).await;
        app.service.running.task.abort();
        (key, id_of(&p))
    };
    // Restart on the same data dir, with the clock of the stored deadline passed:
    // the expiry index is stored, so the new process finds it.
    let tx_dir = dir.clone();
    let db = test_storage(&base_config(&tx_dir)).backend;
    let stored = { db.scan("collect", "expiry", "", "", 10).unwrap() };
    assert_eq!(
        stored.len(),
        1,
        "the deadline is stored, not held in memory"
    );
    // Move the stored deadline into the past rather than waiting 5 minutes
    // (in the index and in the record, which expiry checks).
    fixtures::overdue(&tx_dir, &id);
    let app = spawn_app_with(move |c| c.data_dir = dir).await;
    let mut last = Value::Null;
    for _ in 0..40 {
        last = app
            .get(&key, &format!("/api/v1/collect/payments/{id}"))
            .await
            .1;
        if last["status"] == "expired" {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("not expired: {last}");
}

#[service_test]
async fn every_status_change_emits_its_event_and_refunds_replay_under_their_key() {
    let app = fast_app().await;
    let key = app.test_key("Shop");
    let (id, _) = app.create_ok(&key, &otp_payment("+2290166000001")).await;
    let confirm = format!("/api/v1/collect/payments/{id}/confirm");
    assert_eq!(
        app.post(&key, &confirm, json!({"otp": "123456"})).await.0,
        200
    );
    let refunds = format!("/api/v1/collect/payments/{id}/refunds");
    let refund_key = new_key();
    let refund = |body: Value, idem: String| {
        let app = &app;
        let (key, refunds) = (key.clone(), refunds.clone());
        async move {
            let resp = app
                .client
                .post(app.url(&refunds))
                .bearer_auth(&key)
                .header("Idempotency-Key", idem)
                .json(&body)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap())
        }
    };
    let (status, r) = refund(json!({"reason": "duplicate"}), refund_key.clone()).await;
    assert_eq!((status, &r["status"]), (201, &json!("completed")), "{r}");
    // The same request under the same key: the same refund, not a second one.
    let (status, again) = refund(json!({"reason": "duplicate"}), refund_key.clone()).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        (&again["id"], &again["idempotent_replay"]),
        (&r["id"], &json!(true))
    );
    // Another request under that key: refused, whatever it asks.
    let (status, err) = refund(json!({"reason": "other"}), refund_key).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (409, Some("idempotency_key_reused"))
    );
    let (status, err) = refund(json!({}), "not-a-uuid".into()).await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("idempotency_key_invalid"))
    );

    assert_eq!(
        app.event_types(&key, &id).await,
        vec![
            "collect.payment.created",
            "collect.payment.awaiting_otp",
            "collect.payment.processing",
            "collect.payment.completed",
            "collect.payment.refunded",
            // Filed under its payment, which is its `data.object`.
            "collect.refund.completed",
        ]
    );
}

/// A payment reconciliation completes leaves nothing in the `active` index
/// (the payments to poll): neither the entry its poll came through nor, where
/// the index and the record disagree, the record's own entry. Here a stale
/// entry, due at once, brings the first payment to its poll before its own
/// entry is due; the second is polled through its own.
#[service_test]
async fn a_reconciled_payment_leaves_no_entry_to_poll_even_from_a_stale_index() {
    let app = fast_app().await;
    let key = app.test_key("Shop");
    let storage = &app.service.site.app.runtime.services.storage;
    let entries = |id: &str| -> Vec<String> {
        let all = storage.scan("collect", "active", "", "~", 1000).unwrap();
        all.into_iter()
            .map(|(k, _)| k)
            .filter(|k| k.ends_with(id))
            .collect()
    };
    let (stale, _) = app.create_ok(&key, &direct_payment("+2290166001234")).await;
    let own = entries(&stale);
    assert_eq!(own.len(), 1, "in progress: one entry, its next check");
    let mut tx = storage.begin("collect").unwrap();
    // Same env/merchant/id, due at 1 ms: polled at the next round.
    tx.put("active", &format!("0000000000001{}", &own[0][13..]), b"")
        .unwrap();
    tx.commit().unwrap();
    completed_by_reconciliation(&app, &key, &stale).await;
    assert_eq!(entries(&stale), Vec::<String>::new(), "both entries gone");

    let (agreed, _) = app.create_ok(&key, &direct_payment("+2290166001235")).await;
    assert_eq!(entries(&agreed).len(), 1);
    completed_by_reconciliation(&app, &key, &agreed).await;
    assert_eq!(entries(&agreed), Vec::<String>::new(), "its entry gone");
}

/// A record written by another version (here the same payment as pretty
/// JSON, the form of the versions before the binary one) is reconciled
/// through a prepared transaction checked against the bytes as stored. Checked against this version's encoding of it, it was refused and
/// the round decided again in an interactive transaction holding the writer.
#[service_test]
async fn a_record_another_version_wrote_is_reconciled_without_holding_the_writer() {
    let app = fast_app().await;
    let key = app.test_key("Shop");
    let (id, _) = app.create_ok(&key, &direct_payment("+2290166001234")).await;
    let (k, v) = crate::support::fixtures::payment_record(&app, &id);
    let storage = &app.service.site.app.runtime.services.storage;
    let mut tx = storage.begin("collect").unwrap();
    assert_eq!(v[0], 5, "stored in the binary form (version 5)");
    let pretty = serde_json::to_vec_pretty(&mmc_domain::record::decode(&v).unwrap()).unwrap();
    tx.put("payments", &k, &pretty).unwrap();
    tx.commit().unwrap();
    let transactions = |text: &str, kind: &str| {
        counter(
            text,
            "mmc_storage_transactions_total",
            &format!("component=\"collect\",kind=\"{kind}\""),
        )
    };
    let before = app.metrics().await;
    completed_by_reconciliation(&app, &key, &id).await;
    let after = app.metrics().await;
    assert!(transactions(&after, "applied") > transactions(&before, "applied"));
    for kind in ["refused", "interactive"] {
        assert_eq!(
            transactions(&after, kind),
            transactions(&before, kind),
            "{kind}: {after}"
        );
    }
}

/// Waits (up to 10 s) until payment `id` is completed.
/// While a fleet is rolled from a version that reads only JSON records, the
/// new nodes are told to write JSON (`payment_records = "json"`): what they
/// write, an old node reads; what a node without the setting wrote (binary),
/// they read. Payments go through their life either way.
#[service_test]
async fn a_node_told_to_write_json_records_writes_them_and_still_reads_binary_ones() {
    let data = tempfile::tempdir().unwrap();
    let start = |json_records: bool| {
        let d = data.path().to_path_buf();
        spawn_app_with(move |c| {
            c.data_dir = d;
            c.components
                .entry("simulator".into())
                .or_default()
                .settings
                .insert("completion_delay_ms".into(), "0".into());
            if json_records {
                c.components
                    .entry("collect".into())
                    .or_default()
                    .settings
                    .insert("payment_records".into(), "json".into());
            }
        })
    };
    let stored = |app: &TestApp, id: &str| {
        let storage = &app.service.site.app.runtime.services.storage;
        let (_, v) = storage
            .scan("collect", "payments", "", "~", 1000)
            .unwrap()
            .into_iter()
            .find(|(k, _)| k.ends_with(id))
            .expect("the payment's record");
        v
    };
    let app = start(false).await;
    let key = app.test_key("Shop");
    let (binary, _) = app.create_ok(&key, &direct_payment("+2290166001234")).await;
    completed_by_reconciliation(&app, &key, &binary).await;
    assert_eq!(stored(&app, &binary)[0], 5, "binary by default (version 5)");
    // Stopped as a node is (its jobs too): none of its writes may follow.
    assert!(
        app.service
            .shutdown(std::time::Duration::from_secs(5))
            .await
    );
    app.service.running.task.abort();

    let app = start(true).await;
    let (status, read) = app
        .get(&key, &format!("/api/v1/collect/payments/{binary}"))
        .await;
    assert_eq!((status, read["status"].as_str()), (200, Some("completed")));
    let (json, _) = app.create_ok(&key, &direct_payment("+2290166001234")).await;
    completed_by_reconciliation(&app, &key, &json).await;
    // What a version before the binary form reads: JSON, every field named.
    let bytes = stored(&app, &json);
    let record: Value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&bytes)));
    assert_eq!(record["status"], "completed");
    assert_eq!(record["id"], json.as_str());
    assert_eq!(record["customer"]["phone"], "+2290166001234");
}

async fn completed_by_reconciliation(app: &TestApp, key: &str, id: &str) {
    let path = format!("/api/v1/collect/payments/{id}");
    for _ in 0..100 {
        if app.get(key, &path).await.1["status"] == "completed" {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("{path} not completed by reconciliation");
}
