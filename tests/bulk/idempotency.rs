//! Creating a batch needs an `Idempotency-Key`: a retry after a lost
//! response gets the same batch back (200, `idempotent_replay`), never a
//! second batch that would pay everyone twice; the same key with another
//! request is a 409. Payouts are counted at the operator (the
//! `payout-recorder` adapter).

use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::*;
use crate::support::*;

const POST: reqwest::Method = reqwest::Method::POST;
const HEADER: &str = "beneficiary_name,phone,amount,currency,reference";
/// Batches up to this total are paid on creation, without validation: a
/// second batch made by a retry would be paid at once.
const PAY_AT_ONCE: (&str, &str) = ("validation_threshold", "1000000000");

/// Every payout reached the operator once, and they are the items of `id`.
async fn paid_once_each(app: &TestApp, key: &str, id: &str, recorder: &Recorder) {
    // Leave the payout job a few rounds to pay anything more.
    tokio::time::sleep(Duration::from_millis(1200)).await;
    let mut items: Vec<String> = all_items(app, key, id, "")
        .await
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_string())
        .collect();
    let mut posts = recorder.posts();
    items.sort();
    posts.sort();
    assert_eq!(posts, items, "each item paid once, and nothing else paid");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creating_a_batch_without_a_uuid_idempotency_key_is_400_and_creates_nothing() {
    let app = spawn_app().await;
    let (_, key, _) = app.merchant("Forgetful");
    let json_body =
        serde_json::to_vec(&json!({"name": "Salaries", "items": [item(&bj(1), 1000, "a")]}))
            .unwrap();
    let csv = format!("{HEADER}\nAwa,+2290166001001,5000,XOF,R1\n").into_bytes();
    let (form_type, form) = multipart(&[("name", "Salaries")], Some(("pay.csv", &csv)));
    let requests = [
        (ROOT.to_string(), "application/json".to_string(), json_body),
        (
            format!("{ROOT}import_csv/?name=Salaries"),
            "text/csv".to_string(),
            csv.clone(),
        ),
        (format!("{ROOT}import_csv/"), form_type, form),
    ];
    for (path, content_type, body) in &requests {
        let (status, e) = send_keyed(
            &app,
            &key,
            POST,
            path,
            Some(content_type),
            body.clone(),
            None,
        )
        .await;
        assert_eq!(status, 400, "{path}: {e}");
        assert_eq!(e["error"]["code"], "idempotency_key_missing", "{path}");
        assert_eq!(e["error"]["type"], "invalid_request_error");
        assert_eq!(e["error"]["param"], "Idempotency-Key");
        assert!(
            e["error"]["doc_url"]
                .as_str()
                .unwrap()
                .ends_with("#idempotency_key_missing")
        );
        for bad in ["not-a-uuid", "", "1234", "6f1c2a3b-0000-4000-8000"] {
            let (status, e) = send_keyed(
                &app,
                &key,
                POST,
                path,
                Some(content_type),
                body.clone(),
                Some(bad),
            )
            .await;
            assert_eq!(status, 400, "{path} with key {bad:?}: {e}");
            assert_eq!(e["error"]["code"], "idempotency_key_invalid");
            assert_eq!(e["error"]["param"], "Idempotency-Key");
        }
    }
    assert_eq!(batch_count(&app, &key).await, 0, "nothing was created");

    // A UUID in capitals is the same key as in small letters.
    let idem = new_key();
    let body = json!({"name": "Salaries", "items": [item(&bj(1), 1000, "a")]});
    let (status, b) = post_keyed(&app, &key, ROOT, Some(&idem.to_uppercase()), &body).await;
    assert_eq!(status, 201, "{b}");
    let (status, again) = post_keyed(&app, &key, ROOT, Some(&idem), &body).await;
    assert_eq!((status, &again["id"]), (200, &b["id"]), "{again}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_with_the_same_key_and_body_returns_the_same_batch_and_pays_each_item_once() {
    let (recorder, addr) = Recorder::start(0).await;
    let dir = tempfile::tempdir().unwrap();
    let app = spawn_app_paying_to(addr, dir.path(), &[PAY_AT_ONCE]).await;
    let (_, key, _) = app.merchant("Retrier");
    let idem = new_key();
    let body = json!({"name": "Salaries", "description": "June", "items": [
        item(&bj(1001), 1000, "r0"),
        item("+22890001002", 2000, "r1"),
    ]});
    let (status, b) = post_keyed(&app, &key, ROOT, Some(&idem), &body).await;
    assert_eq!(status, 201, "{b}");
    assert_eq!(b["idempotent_replay"], false);
    assert_eq!(b["status"], "processing", "paid at once");
    let id = b["id"].as_str().unwrap();

    // The client lost the response and sends the request again: the same
    // JSON, its fields in another order and spaced otherwise.
    let retry = r#"{ "items": [
        {"reference": "r0", "currency": "XOF", "amount": 1000, "phone": "+2290166001001", "beneficiary_name": "Awa Koné"},
        {"reference": "r1", "currency": "XOF", "amount": 2000, "phone": "+22890001002", "beneficiary_name": "Awa Koné"}
      ],
      "description": "June", "name": "Salaries" }"#;
    let (status, replay) = send_keyed(
        &app,
        &key,
        POST,
        ROOT,
        Some("application/json"),
        retry.as_bytes().to_vec(),
        Some(&idem),
    )
    .await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["id"], id);
    assert_eq!(replay["idempotent_replay"], true);
    assert_eq!(replay["created_at"], b["created_at"]);
    assert_eq!(replay["item_count"], 2);
    assert_eq!(batch_count(&app, &key).await, 1);

    // Once paid, a retry still answers the batch as it is now.
    let done = wait_until_final(&app, &key, id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "completed", "{done}");
    let (status, late) = post_keyed(&app, &key, ROOT, Some(&idem), &body).await;
    assert_eq!(status, 200, "{late}");
    assert_eq!(late["id"], id);
    assert_eq!(late["status"], "completed");
    assert_eq!(late["idempotent_replay"], true);
    // A read is never a replay.
    let (_, read) = get(&app, &key, &format!("{ROOT}{id}/")).await;
    assert!(read.get("idempotent_replay").is_none(), "{read}");

    assert_eq!(batch_count(&app, &key).await, 1);
    paid_once_each(&app, &key, id, &recorder).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_with_one_key_create_one_batch() {
    let (recorder, addr) = Recorder::start(0).await;
    let dir = tempfile::tempdir().unwrap();
    let app = spawn_app_paying_to(addr, dir.path(), &[PAY_AT_ONCE]).await;
    let (_, key, _) = app.merchant("Impatient");
    let idem = new_key();
    let body = json!({"name": "Suppliers", "items": (0..20)
        .map(|i| item(&bj(2000 + i), 1000, &format!("s{i}")))
        .collect::<Vec<Value>>()});
    let answers =
        futures::future::join_all((0..4).map(|_| post_keyed(&app, &key, ROOT, Some(&idem), &body)))
            .await;
    let mut statuses: Vec<u16> = answers.iter().map(|(s, _)| *s).collect();
    statuses.sort();
    assert_eq!(statuses, [200, 200, 200, 201], "{answers:?}");
    let id = answers[0].1["id"].as_str().unwrap();
    assert!(answers.iter().all(|(_, b)| b["id"] == id), "{answers:?}");
    assert_eq!(batch_count(&app, &key).await, 1);
    wait_until_final(&app, &key, id, Duration::from_secs(30)).await;
    paid_once_each(&app, &key, id, &recorder).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_key_with_another_request_is_409_and_keys_are_per_merchant_and_environment() {
    let app = spawn_app_with(|c| {
        // Live operators routed to the simulator too, so a live key can create a batch.
        c.routing.insert(
            "live".into(),
            [("*".to_string(), "simulator".into())].into(),
        );
    })
    .await;
    let (_, key, live_key) = app.merchant("Reuser");
    let (_, other_key, _) = app.merchant("Other");
    let idem = new_key();
    let body = json!({"name": "once", "items": [item(&bj(1), 1000, "a")]});
    let (status, b) = post_keyed(&app, &key, ROOT, Some(&idem), &body).await;
    assert_eq!(status, 201, "{b}");

    for other in [
        json!({"name": "other", "items": [item(&bj(1), 1000, "a")]}),
        json!({"name": "once", "items": [item(&bj(1), 1001, "a")]}),
        json!({"name": "once", "items": [item(&bj(1), 1000, "a"), item(&bj(2), 1000, "b")]}),
        json!({"name": "once", "description": "more", "items": [item(&bj(1), 1000, "a")]}),
        // A key is bound to its request even when the new one is not valid.
        json!({"name": "once", "items": []}),
    ] {
        let (status, e) = post_keyed(&app, &key, ROOT, Some(&idem), &other).await;
        assert_eq!(status, 409, "{other}: {e}");
        assert_eq!(e["error"]["code"], "idempotency_key_reused");
        assert_eq!(e["error"]["type"], "idempotency_error");
    }
    // The key of a JSON batch cannot create a CSV one either.
    let csv = format!("{HEADER}\nAwa,{},1000,XOF,a\n", bj(1)).into_bytes();
    let (status, e) = send_keyed(
        &app,
        &key,
        POST,
        &format!("{ROOT}import_csv/?name=once"),
        Some("text/csv"),
        csv,
        Some(&idem),
    )
    .await;
    assert_eq!(status, 409, "{e}");
    assert_eq!(e["error"]["code"], "idempotency_key_reused");
    assert_eq!(batch_count(&app, &key).await, 1, "no second batch");

    // Keys are per merchant and environment: the same key and body elsewhere is a batch of its own.
    for k in [&other_key, &live_key] {
        let (status, mine) = post_keyed(&app, k, ROOT, Some(&idem), &body).await;
        assert_eq!(status, 201, "{mine}");
        assert_ne!(mine["id"], b["id"]);
        assert_eq!(batch_count(&app, k).await, 1);
    }
    let (status, again) = post_keyed(&app, &key, ROOT, Some(&idem), &body).await;
    assert_eq!((status, &again["id"]), (200, &b["id"]), "{again}");
    assert_eq!(batch_count(&app, &key).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_csv_import_retried_with_its_key_returns_the_same_batch() {
    let (recorder, addr) = Recorder::start(0).await;
    let dir = tempfile::tempdir().unwrap();
    let app = spawn_app_paying_to(addr, dir.path(), &[PAY_AT_ONCE]).await;
    let (_, key, _) = app.merchant("Importer");
    let csv =
        format!("{HEADER}\r\nAwa,+2290166001001,5000,XOF,R1\r\nKofi,+22890001002,7000,XOF,R2\r\n");
    let idem = new_key();
    let path = format!("{ROOT}import_csv/");
    let import = |fields: &[(&str, &str)], file: &str| {
        let (content_type, body) = multipart(fields, Some(("suppliers.csv", file.as_bytes())));
        let (app, key, idem, path) = (&app, &key, &idem, &path);
        async move { send_keyed(app, key, POST, path, Some(&content_type), body, Some(idem)).await }
    };
    let fields = [("name", "Suppliers"), ("description", "lot 1")];
    let (status, b) = import(&fields, &csv).await;
    assert_eq!(status, 201, "{b}");
    assert_eq!(b["source"], "csv");
    assert_eq!(b["idempotent_replay"], false);
    let id = b["id"].as_str().unwrap();

    let (status, replay) = import(&fields, &csv).await;
    assert_eq!(status, 200, "{replay}");
    assert_eq!(replay["id"], id);
    assert_eq!(replay["idempotent_replay"], true);
    // The request is the file with its name and description, however it is sent.
    let (status, replay) = send_keyed(
        &app,
        &key,
        POST,
        &format!("{path}?name=Suppliers&description=lot%201"),
        Some("text/csv"),
        csv.clone().into_bytes(),
        Some(&idem),
    )
    .await;
    assert_eq!((status, &replay["id"]), (200, &b["id"]), "{replay}");

    // Another file, name or description under the same key: 409.
    let other_file = csv.replace("7000", "7001");
    for (fields, file) in [
        (&fields[..], other_file.as_str()),
        (
            &[("name", "Suppliers 2"), ("description", "lot 1")][..],
            &csv,
        ),
        (&[("name", "Suppliers")][..], &csv),
    ] {
        let (status, e) = import(fields, file).await;
        assert_eq!(status, 409, "{fields:?}: {e}");
        assert_eq!(e["error"]["code"], "idempotency_key_reused");
    }
    assert_eq!(batch_count(&app, &key).await, 1);
    wait_until_final(&app, &key, id, Duration::from_secs(30)).await;
    paid_once_each(&app, &key, id, &recorder).await;
}
