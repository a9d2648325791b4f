//! Lists: a merchant's payments (newest first, filters from the `listing`
//! index, cursors both ways, the index's backfill, a search by reference or
//! phone), a payment's refunds, one refund.

use serde_json::{Value, json};

use crate::support::*;
use mmc_test_kit::service_test;

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap_or_else(|| panic!("not a list: {page}"))
        .iter()
        .map(id_of)
        .collect()
}

fn payment(country: &str, operator: &str, phone: &str) -> Value {
    json!({"reference": format!("order-{}", uuid::Uuid::new_v4()), "amount": 1500,
           "currency": "XOF", "country": country, "operator": operator,
           "customer": {"phone": phone}})
}

#[service_test]
async fn payments_are_listed_newest_first_filtered_and_paged_both_ways(app: TestApp) {
    let key = app.test_key("Shop");
    let other = app.test_key("Other");
    let mut created = Vec::new();
    for body in [
        payment("BJ", "mtn-bj", "+2290166000001"),
        payment("BJ", "mtn-bj", "+2290166000002"), // fails (insufficient funds)
        payment("TG", "togocom-tg", "+22890000001"),
        payment("BJ", "mtn-bj", "+2290166000004"),
        payment("CI", "orange-ci", "+2250700000001"),
    ] {
        let (_, p) = app.create_ok(&key, &body).await;
        created.push(p);
    }
    // Newest first.
    let all: Vec<String> = created.iter().rev().map(id_of).collect();
    let list = |query: &str| {
        let app = &app;
        let key = key.clone();
        let path = format!("/api/v1/collect/payments{query}");
        async move { app.get(&key, &path).await }
    };

    let (status, page) = list("").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(
        (page["object"].as_str(), page["has_more"].as_bool()),
        (Some("list"), Some(false))
    );
    assert_eq!(ids(&page), all, "newest first");
    assert!(page["next_starting_after"].is_null());
    assert!(page.get("next_ending_before").is_none(), "{page}");

    // Pages of two, each continuing where the last stopped.
    let mut seen = Vec::new();
    let mut cursor = String::new();
    for expected_more in [true, true, false] {
        let (_, page) = list(&format!("?limit=2{cursor}")).await;
        assert_eq!(page["has_more"], expected_more, "{page}");
        seen.extend(ids(&page));
        if expected_more {
            cursor = format!(
                "&starting_after={}",
                page["next_starting_after"].as_str().unwrap()
            );
        }
    }
    assert_eq!(seen, all);
    // And back with `ending_before`, each page still newest first.
    let mut back = Vec::new();
    let mut cursor = format!("&ending_before={}", all[4]);
    for expected_more in [true, false] {
        let (_, page) = list(&format!("?limit=2{cursor}")).await;
        assert_eq!(page["has_more"], expected_more, "{page}");
        assert!(page["next_starting_after"].is_null(), "{page}");
        let mut got = ids(&page);
        got.extend(back);
        back = got;
        if expected_more {
            cursor = format!(
                "&ending_before={}",
                page["next_ending_before"].as_str().unwrap()
            );
        }
    }
    assert_eq!(back, all[..4]);

    // Filters: by alias, country, reference, status, creation time, each
    // paged one by one with no short page (they come from an index).
    let mtn = [all[1].as_str(), &all[3], &all[4]];
    assert_eq!(ids(&list("?operator=mtn").await.1), mtn);
    let mut seen = Vec::new();
    let mut cursor = String::new();
    for expected_more in [true, true, false] {
        let (_, page) = list(&format!("?operator=mtn-bj&country=BJ&limit=1{cursor}")).await;
        assert_eq!(ids(&page).len(), 1, "{page}");
        assert_eq!(page["has_more"], expected_more, "{page}");
        seen.extend(ids(&page));
        cursor = format!("&starting_after={}", seen.last().unwrap());
    }
    assert_eq!(seen, mtn);
    let (_, page) = list(&format!("?operator=mtn&ending_before={}", all[4])).await;
    assert_eq!(ids(&page), [all[1].as_str(), &all[3]]);
    assert_eq!(ids(&list("?country=TG").await.1), [all[2].as_str()]);
    assert_eq!(
        ids(&list("?country=TG&operator=orange-ci").await.1).len(),
        0
    );
    assert_eq!(ids(&list("?country=CI&status=refunded").await.1).len(), 0);
    let reference = created[4]["reference"].as_str().unwrap();
    assert_eq!(
        ids(&list(&format!("?reference={reference}")).await.1),
        [all[0].as_str()]
    );
    assert_eq!(
        ids(&list(&format!("?reference={reference}&country=BJ")).await.1).len(),
        0
    );
    let failed = app
        .get(
            &key,
            &format!("/api/v1/collect/payments/{}?sync=true", all[3]),
        )
        .await
        .1;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(ids(&list("?status=failed").await.1), [all[3].as_str()]);
    assert_eq!(
        ids(&list("?status=failed&operator=mtn&country=BJ").await.1),
        [all[3].as_str()]
    );
    // The index follows the status: the failed payment left its old one.
    assert!(!ids(&list("?limit=100").await.1).is_empty());
    for status in ["pending", "processing"] {
        let (_, page) = list(&format!("?status={status}&limit=100")).await;
        assert!(!ids(&page).contains(&all[3]), "{status}: {page}");
    }
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert_eq!(
        ids(&list(&format!("?created%5Bgte%5D={}", now - 3600)).await.1),
        all
    );
    assert!(ids(&list(&format!("?created[gte]={}", now + 3600)).await.1).is_empty());
    assert!(ids(&list(&format!("?created[lt]={}", now - 3600)).await.1).is_empty());
    assert_eq!(
        ids(&list(&format!("?created[lt]={}&limit=100", now + 3600))
            .await
            .1),
        all
    );

    // Bad parameters: a clear 400 each.
    for (query, param) in [
        ("?limit=0", "limit"),
        ("?limit=101", "limit"),
        ("?limit=two", "limit"),
        ("?status=paid", "status"),
        ("?operator=nokia", "operator"),
        ("?created[gte]=yesterday", "created[gte]"),
        ("?starting_after=order-1", "starting_after"),
        ("?ending_before=order-1", "ending_before"),
        (
            "?starting_after=0190b1e2-0000-7000-8000-000000000000&ending_before=0190b1e2-0000-7000-8000-000000000000",
            "ending_before",
        ),
        ("?country=FR", "country"),
        ("?reference=", "reference"),
    ] {
        let (status, e) = list(query).await;
        assert_eq!(status, 400, "{query}: {e}");
        assert_eq!(e["error"]["param"], param, "{query}: {e}");
    }
    // Another merchant sees none of them.
    assert!(ids(&app.get(&other, "/api/v1/collect/payments").await.1).is_empty());
}

#[service_test]
async fn a_payments_refunds_are_listed_and_each_is_read(app: TestApp) {
    let key = app.test_key("Shop");
    let other = app.test_key("Other");
    let (id, p) = app.create_ok(&key, &direct_payment("+2290166000001")).await;
    let synced = app
        .get(&key, &format!("/api/v1/collect/payments/{id}?sync=true"))
        .await
        .1;
    assert_eq!(synced["status"], "completed", "{synced}");
    let refunds = format!("/api/v1/collect/payments/{id}/refunds");
    let mut made = Vec::new();
    for amount in [500, 400] {
        let (status, r) = app.post(&key, &refunds, json!({"amount": amount})).await;
        assert!(status == 200 || status == 201, "{r}");
        made.push(id_of(&r));
    }

    let (status, page) = app.get(&key, &refunds).await;
    assert_eq!(status, 200, "{page}");
    made.reverse();
    assert_eq!(ids(&page), made, "newest first");
    assert_eq!(page["data"][0]["amount"], 400);
    let (_, first) = app.get(&key, &format!("{refunds}?limit=1")).await;
    assert_eq!(
        (ids(&first), first["has_more"].as_bool()),
        (vec![made[0].clone()], Some(true))
    );
    let (_, second) = app
        .get(
            &key,
            &format!(
                "{refunds}?limit=1&starting_after={}",
                first["next_starting_after"].as_str().unwrap()
            ),
        )
        .await;
    assert_eq!(
        (ids(&second), second["has_more"].as_bool()),
        (vec![made[1].clone()], Some(false))
    );
    // By the payment's reference too.
    let by_ref = format!(
        "/api/v1/collect/payments/{}/refunds",
        p["reference"].as_str().unwrap()
    );
    assert_eq!(ids(&app.get(&key, &by_ref).await.1), made);

    let (status, r) = app
        .get(&key, &format!("/api/v1/collect/refunds/{}", made[0]))
        .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        (
            r["object"].as_str(),
            r["payment_id"].as_str(),
            r["amount"].as_u64()
        ),
        (Some("collect.refund"), Some(id.as_str()), Some(400))
    );
    // Another merchant's key finds neither the payment's refunds nor the refund.
    let (status, e) = app.get(&other, &refunds).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (404, Some("payment_not_found"))
    );
    let (status, e) = app
        .get(&other, &format!("/api/v1/collect/refunds/{}", made[1]))
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (404, Some("refund_not_found"))
    );
    // An id no refund can have (longer than storage keys go) is a 404 too.
    let (status, e) = app
        .get(
            &key,
            &format!("/api/v1/collect/refunds/{}", "é".repeat(700)),
        )
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (404, Some("refund_not_found"))
    );
    let resp = app
        .client
        .delete(app.url(&format!("/api/v1/collect/refunds/{}", made[1])))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    assert_eq!(resp.headers()["allow"], "GET");
}

/// A database from before the `listing` index: payments with no entry in
/// it. Until the backfill is done the filters are checked on the payments
/// table; the job then indexes every payment (over several rounds) and the
/// filters come from the index, with the same answers.
#[service_test]
async fn payments_stored_before_the_listing_index_are_backfilled_into_it(app: TestApp) {
    let (merchant, key, _) = app.merchant("Shop");
    let (_, p) = app
        .create(&key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    let db = test_storage(&base_config(app.data_dir.path())).backend;
    let stored = db
        .get(
            "collect",
            "payments",
            &format!("test/{merchant}/{}", id_of(&p)),
        )
        .unwrap()
        .expect("the payment is stored");
    // Older versions stored records as JSON: the old payments below are too.
    let template = serde_json::to_value(mmc_domain::record::decode(&stored).unwrap()).unwrap();

    // 1,200 old payments (over two rounds of the job), a third of them
    // failed, written as an older version would have: no `listing` entry.
    let mut failed = Vec::new();
    let mut tx = db.begin("collect").unwrap();
    let mut old_ids = Vec::new();
    for i in 0..1200u32 {
        let id = uuid::Uuid::now_v7().to_string();
        let mut record = template.clone();
        record["id"] = json!(id);
        record["reference"] = json!(format!("old-{i}"));
        record["status"] = json!(if i % 3 == 0 { "failed" } else { "completed" });
        if i % 3 == 0 {
            failed.push(id.clone());
        }
        tx.put(
            "payments",
            &format!("test/{merchant}/{id}"),
            &serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
        old_ids.push(id);
    }
    for table in ["listing"] {
        for (k, _) in tx.scan(table, "", "", 1000).unwrap() {
            tx.delete(table, &k).unwrap();
        }
    }
    tx.delete("meta", "listing-v2").unwrap();
    tx.delete("meta", "listing-v2-backfill").unwrap();
    tx.commit().unwrap();
    failed.reverse(); // newest first

    let failed_pages = || async {
        let mut seen = Vec::new();
        let mut cursor = String::new();
        loop {
            let (status, page) = app
                .get(
                    &key,
                    &format!("/api/v1/collect/payments?status=failed&limit=100{cursor}"),
                )
                .await;
            assert_eq!(status, 200, "{page}");
            seen.extend(ids(&page));
            if page["has_more"] != true {
                return seen;
            }
            cursor = format!(
                "&starting_after={}",
                page["next_starting_after"].as_str().unwrap()
            );
        }
    };
    // Before or during the backfill: the same answer, from the payments table.
    assert_eq!(failed_pages().await, failed);

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.get("collect", "meta", "listing-v2").unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "the backfill ended");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let mut indexed = Vec::new();
    let (mut start, end) = (format!("test/{merchant}/"), format!("test/{merchant}0"));
    loop {
        let rows = db.scan("collect", "listing", &start, &end, 1000).unwrap();
        let Some((last, _)) = rows.last() else { break };
        start = format!("{last}\u{1}");
        indexed.extend(
            rows.iter()
                .map(|(k, _)| k.rsplit('/').next().unwrap().to_string()),
        );
    }
    indexed.sort();
    let mut want = old_ids.clone();
    want.push(id_of(&p));
    want.sort();
    assert_eq!(indexed, want, "every payment is in the index once");
    assert_eq!(failed_pages().await, failed);

    // Entries left behind (as when a status change lands between the reads
    // of two prefixes): a payment is listed once, and only where its record
    // says. Three failed payments also under another operator, one
    // completed payment under `failed`.
    let completed_id = old_ids
        .iter()
        .find(|id| !failed.contains(id))
        .unwrap()
        .clone();
    let mut tx = db.begin("collect").unwrap();
    for id in failed.iter().take(3).chain([&completed_id]) {
        tx.put("listing", &format!("test/{merchant}/failed/BJ/-/{id}"), b"")
            .unwrap();
    }
    tx.commit().unwrap();
    assert_eq!(failed_pages().await, failed, "once each, none completed");

    // A payment written by a node of a version without the index (a rolling
    // upgrade): `mmc reindex` has the job index everything again.
    let late = uuid::Uuid::now_v7().to_string();
    let mut record = template.clone();
    record["id"] = json!(late);
    record["reference"] = json!("written-by-an-old-node");
    record["status"] = json!("failed");
    let mut tx = db.begin("collect").unwrap();
    tx.put(
        "payments",
        &format!("test/{merchant}/{late}"),
        &serde_json::to_vec(&record).unwrap(),
    )
    .unwrap();
    tx.commit().unwrap();
    assert_ne!(failed_pages().await.first(), Some(&late), "not indexed yet");
    let dir = app.data_dir.path().to_str().unwrap();
    let said = crate::cli::mmc(&["reindex", "--data-dir", dir]);
    assert_eq!(said["reindex"], "started");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.get("collect", "meta", "listing-v2").unwrap().is_none()
        || failed_pages().await.first() != Some(&late)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the reindex ended with the late payment listed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let mut with_late = vec![late.clone()];
    with_late.extend(failed.iter().cloned());
    assert_eq!(failed_pages().await, with_late);
    let (_, page) = app
        .get(&key, "/api/v1/collect/payments?status=completed&limit=5")
        .await;
    assert_eq!(ids(&page).len(), 5, "{page}");
    assert_eq!(page["has_more"], true);
}

/// Payments in progress share one `listing` status, `pending`: the
/// operator's answer moves no entry, and every status filter still answers
/// from the records. A store indexed before that (an entry under the
/// payment's own in-progress status) is indexed again and the old entry goes.
#[service_test]
async fn payments_in_progress_share_one_listing_entry_and_filters_still_tell_them_apart(
    app: TestApp,
) {
    let (merchant, key, _) = app.merchant("Shop");
    // 0004 stays in progress until expiry; 0005 is refused at initiation.
    let (_, processing) = app
        .create(&key, &new_key(), &direct_payment("+2290166000004"))
        .await;
    let (_, failed) = app
        .create(&key, &new_key(), &direct_payment("+2290166000005"))
        .await;
    assert_eq!(processing["status"], "processing", "{processing}");
    assert_eq!(failed["status"], "failed", "{failed}");
    let (pid, fid) = (id_of(&processing), id_of(&failed));
    let db = test_storage(&base_config(app.data_dir.path())).backend;
    let prefix = format!("test/{merchant}/");
    let entries = || {
        let mut keys: Vec<String> = db
            .scan(
                "collect",
                "listing",
                &prefix,
                &format!("test/{merchant}0"),
                1000,
            )
            .unwrap()
            .into_iter()
            .map(|(k, _)| k.strip_prefix(&prefix).unwrap().to_string())
            .collect();
        keys.sort();
        keys
    };
    let want = vec![
        format!("failed/BJ/mtn-bj/{fid}"),
        format!("pending/BJ/mtn-bj/{pid}"),
    ];
    assert_eq!(entries(), want);
    let listed = |filter: &'static str| {
        let app = &app;
        let key = &key;
        async move {
            let (status, page) = app
                .get(key, &format!("/api/v1/collect/payments?{filter}"))
                .await;
            assert_eq!(status, 200, "{page}");
            ids(&page)
        }
    };
    let check = || async {
        assert_eq!(listed("status=processing").await, vec![pid.clone()]);
        assert_eq!(listed("status=pending").await, Vec::<String>::new());
        assert_eq!(listed("status=failed").await, vec![fid.clone()]);
        assert_eq!(
            listed("operator=mtn-bj&country=BJ").await,
            vec![fid.clone(), pid.clone()]
        );
    };
    check().await;

    // As an older version indexed it: under `processing`, the store not yet
    // marked as indexed the way it is now.
    let mut tx = db.begin("collect").unwrap();
    tx.delete("listing", &format!("{prefix}pending/BJ/mtn-bj/{pid}"))
        .unwrap();
    tx.put(
        "listing",
        &format!("{prefix}processing/BJ/mtn-bj/{pid}"),
        b"",
    )
    .unwrap();
    tx.delete("meta", "listing-v2").unwrap();
    tx.commit().unwrap();
    check().await; // from the records until the backfill is done
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.get("collect", "meta", "listing-v2").unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "the backfill ended");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(entries(), want, "the old entry is gone");
    check().await;
}

/// `review` takes one value, checked whatever comes with it (a reference, a
/// cursor): anything else is a clear 400, never an unfiltered list.
#[service_test]
async fn the_review_filter_is_checked_with_every_other_parameter(app: TestApp) {
    let key = app.test_key("Shop");
    let (_, p) = app
        .create(&key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    let reference = p["reference"].as_str().unwrap();
    for query in [
        "review=yes".to_string(),
        format!("reference={reference}&review=no"),
        format!("ending_before={}&review=", id_of(&p)),
    ] {
        let (status, err) = app
            .get(&key, &format!("/api/v1/collect/payments?{query}"))
            .await;
        assert_eq!(status, 400, "{query}: {err}");
        assert_eq!(err["error"]["param"], "review", "{err}");
    }
    // Not under review: the reference finds nothing with the filter, itself without.
    let with = format!("/api/v1/collect/payments?reference={reference}&review=required");
    assert_eq!(app.get(&key, &with).await.1["data"], json!([]));
    let without = format!("/api/v1/collect/payments?reference={reference}");
    assert_eq!(ids(&app.get(&key, &without).await.1).len(), 1);
}

/// `search`: a reference by its start, whatever its case; a phone by its
/// last digits (four or more), written with a country code, spaces or
/// neither; with the other filters and cursors.
#[service_test]
async fn payments_are_searched_by_the_start_of_their_reference_or_the_end_of_their_phone(
    app: TestApp,
) {
    let key = app.test_key("Shop");
    let other = app.test_key("Other");
    let with = |reference: &str, country: &str, operator: &str, phone: &str| {
        json!({"reference": reference, "amount": 1500, "currency": "XOF", "country": country,
               "operator": operator, "customer": {"phone": phone}})
    };
    let mut made = Vec::new();
    for body in [
        with("Order-ÉTÉ-001", "BJ", "mtn-bj", "+2290166001001"),
        with("order-été-002", "BJ", "mtn-bj", "0166001001"),
        with("INV-77", "BJ", "mtn-bj", "+2290166000002"), // fails
        with("inv-78", "TG", "togocom-tg", "+22890001001"),
    ] {
        made.push(app.create_ok(&key, &body).await.0);
    }
    // A checkout's customer gives the phone after the payment was made.
    let body = json!({"reference": "Hosted-9", "amount": 2500, "currency": "XOF",
                      "country": "BJ", "mode": "hosted"});
    let (hosted, p) = app.create_ok(&key, &body).await;
    let resp = app
        .client
        .post(p["checkout_url"].as_str().unwrap())
        .form(&[("operator", "mtn-bj"), ("phone", "0166009009")])
        .send()
        .await
        .unwrap();
    assert!(
        resp.status().is_success() || resp.status().is_redirection(),
        "{}",
        resp.status()
    );
    let [a, b, c, d] = [&made[0], &made[1], &made[2], &made[3]].map(String::as_str);
    let found = |query: String| {
        let app = &app;
        let key = key.clone();
        async move {
            let (status, page) = app
                .get(&key, &format!("/api/v1/collect/payments?{query}"))
                .await;
            assert_eq!(status, 200, "{query}: {page}");
            ids(&page)
        }
    };
    let search = |text: &str| found(format!("search={text}"));

    for text in ["order", "ORDER-%C3%89T%C3%89", "Order-%C3%A9t%C3%A9-00"] {
        assert_eq!(search(text).await, [b, a], "{text}");
    }
    assert_eq!(search("order-%C3%A9t%C3%A9-001").await, [a]);
    assert_eq!(search("%20%20inv-7+").await, [d, c], "trimmed");
    assert!(search("rder").await.is_empty(), "a start, not a part");
    assert!(search("order-%C3%A9t%C3%A9-0011").await.is_empty());
    assert_eq!(search("0166001001").await, [b, a]);
    assert_eq!(search("%2B229%2001%2066%2000%2010%2001").await, [b, a]);
    assert_eq!(search("%2B229+01+66+00+10+01").await, [b, a]);
    // Benin's old international form of the same number.
    assert_eq!(search("%2B229%2066%2000%2010%2001").await, [b, a]);
    assert_eq!(search("22966001001").await, [b, a]);
    assert_eq!(search("1001").await, [d, b, a]);
    assert!(search("001").await.is_empty(), "three digits are no phone");
    assert!(search("0166001002").await.is_empty());
    assert_eq!(search("9009").await, [hosted.as_str()]);
    assert_eq!(search("hosted").await, [hosted.as_str()]);

    // With the other filters, checked on each record.
    let failed = app
        .get(&key, &format!("/api/v1/collect/payments/{c}?sync=true"))
        .await
        .1;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(found("search=inv&status=failed".into()).await, [c]);
    assert!(found("search=order&status=failed".into()).await.is_empty());
    assert_eq!(found("search=1001&country=TG".into()).await, [d]);
    assert_eq!(found("search=1001&operator=mtn-bj".into()).await, [b, a]);
    assert_eq!(found("search=inv&reference=INV-77".into()).await, [c]);
    assert!(
        found("search=order&reference=INV-77".into())
            .await
            .is_empty()
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    assert_eq!(
        found(format!("search=1001&created[gte]={}", now - 3600)).await,
        [d, b, a]
    );
    assert!(
        found(format!("search=1001&created[lt]={}", now - 3600))
            .await
            .is_empty()
    );

    // Paged newest first, both ways.
    let (_, page) = app
        .get(&key, "/api/v1/collect/payments?search=1001&limit=2")
        .await;
    assert_eq!(
        (ids(&page), &page["has_more"]),
        (vec![d.to_string(), b.into()], &json!(true))
    );
    let next = page["next_starting_after"].as_str().unwrap();
    let (_, page) = app
        .get(
            &key,
            &format!("/api/v1/collect/payments?search=1001&limit=2&starting_after={next}"),
        )
        .await;
    assert_eq!(
        (ids(&page), &page["has_more"]),
        (vec![a.to_string()], &json!(false))
    );
    assert_eq!(
        found(format!("search=1001&limit=1&ending_before={a}")).await,
        [b]
    );

    // Another merchant finds none of them.
    let (_, page) = app
        .get(&other, "/api/v1/collect/payments?search=order")
        .await;
    assert!(ids(&page).is_empty(), "{page}");

    // A text of 1 to 100 characters, not only spaces.
    let long = "a".repeat(101);
    assert_eq!(search(&"a".repeat(100)).await, Vec::<String>::new());
    for query in ["search=", "search=%20%20", &format!("search={long}")] {
        let (status, e) = app
            .get(&key, &format!("/api/v1/collect/payments?{query}"))
            .await;
        assert_eq!(status, 400, "{query}: {e}");
        assert_eq!(e["error"]["code"], "parameter_invalid", "{e}");
        assert_eq!(e["error"]["param"], "search", "{e}");
    }
}

/// Payments stored before the `search` index: until its backfill is done a
/// search reads the payments table; then the index answers the same. A
/// customer who paid hundreds of times is paged through in full pages; a
/// text that matches more than 2,000 payments under different references
/// asks for a longer one.
#[service_test]
async fn payments_stored_before_the_search_index_are_found_before_and_after_its_backfill(
    app: TestApp,
) {
    let (merchant, key, _) = app.merchant("Shop");
    // A reference without digits: a search text of four digits or more is
    // also a phone's end, which a random reference could meet by chance.
    let mut body = direct_payment("+2290166001001");
    body["reference"] = json!("Fresh-Order-Awa");
    let (new_id, p) = app.create_ok(&key, &body).await;
    let db = test_storage(&base_config(app.data_dir.path())).backend;
    let stored = db
        .get("collect", "payments", &format!("test/{merchant}/{new_id}"))
        .unwrap()
        .expect("the payment is stored");
    let template = serde_json::to_value(mmc_domain::record::decode(&stored).unwrap()).unwrap();

    // 2,100 old payments, written as an older version would have: no
    // `search` entry. Every seventh paid from one phone, a half of those failed.
    let mut tx = db.begin("collect").unwrap();
    let mut old = Vec::new();
    for i in 0..2100u32 {
        let id = uuid::Uuid::now_v7().to_string();
        let mut record = template.clone();
        record["id"] = json!(id);
        record["reference"] = json!(format!("Old-{i}"));
        record["customer"]["phone"] = json!(if i % 7 == 0 {
            "+2290166001001".to_string()
        } else {
            format!("+2290167{i:06}")
        });
        record["status"] = json!(if i % 14 == 0 { "failed" } else { "completed" });
        tx.put(
            "payments",
            &format!("test/{merchant}/{id}"),
            &serde_json::to_vec(&record).unwrap(),
        )
        .unwrap();
        old.push((i, id));
    }
    for (k, _) in tx.scan("search", "", "", 1000).unwrap() {
        tx.delete("search", &k).unwrap();
    }
    tx.delete("meta", "search-v1").unwrap();
    tx.delete("meta", "search-v1-backfill").unwrap();
    tx.commit().unwrap();
    let newest_first = |keep: &dyn Fn(u32) -> bool| {
        let mut ids: Vec<String> = old
            .iter()
            .filter(|(i, _)| keep(*i))
            .map(|(_, id)| id.clone())
            .collect();
        ids.reverse();
        ids
    };
    let mut one_phone = newest_first(&|i| i % 7 == 0);
    one_phone.push(new_id.clone());
    let failed_on_it = newest_first(&|i| i % 14 == 0);
    let old_1 = newest_first(&|i| i.to_string().starts_with('1'));

    // Every page of a search, and how many payments each held.
    let pages = |query: &'static str| {
        let app = &app;
        let key = key.clone();
        async move {
            let (mut seen, mut sizes) = (Vec::new(), Vec::new());
            let mut cursor = String::new();
            loop {
                let (status, page) = app
                    .get(
                        &key,
                        &format!("/api/v1/collect/payments?{query}&limit=100{cursor}"),
                    )
                    .await;
                assert_eq!(status, 200, "{query}: {page}");
                sizes.push(ids(&page).len());
                seen.extend(ids(&page));
                if page["has_more"] != true {
                    return (seen, sizes);
                }
                cursor = format!(
                    "&starting_after={}",
                    page["next_starting_after"].as_str().unwrap()
                );
            }
        }
    };
    // Before or during the backfill: the same answers, from the payments table.
    assert_eq!(pages("search=0166001001").await.0, one_phone);
    assert_eq!(pages("search=old-1").await.0, old_1);

    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db.get("collect", "meta", "search-v1").unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "the backfill ended");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let (seen, sizes) = pages("search=%2B229+01+66+00+10+01").await;
    assert_eq!(seen, one_phone);
    assert_eq!(sizes, [100, 100, 100, 1], "full pages from the index");
    let (seen, sizes) = pages("search=OLD-1").await;
    assert_eq!(seen, old_1, "1,111 references, newest first");
    assert_eq!(sizes.len(), 12, "{sizes:?}");
    assert_eq!(
        pages("search=0166001001&status=failed").await.0,
        failed_on_it
    );
    let reference = p["reference"].as_str().unwrap();
    let (_, page) = app
        .get(
            &key,
            &format!(
                "/api/v1/collect/payments?search={}",
                &reference[..11].to_uppercase()
            ),
        )
        .await;
    assert_eq!(ids(&page), [new_id.as_str()], "{page}");

    // 2,100 references start with "old": a longer text, please.
    let (status, e) = app.get(&key, "/api/v1/collect/payments?search=old").await;
    assert_eq!(status, 400, "{e}");
    assert_eq!(e["error"]["code"], "search_too_broad", "{e}");
    assert_eq!(e["error"]["param"], "search", "{e}");
}
