//! Lists: a merchant's payments (creation order, filters, cursor), a
//! payment's refunds, one refund.

use serde_json::{Value, json};

use crate::support::*;

fn ids(page: &Value) -> Vec<String> {
    page["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect()
}

fn payment(country: &str, operator: &str, phone: &str) -> Value {
    json!({"reference": format!("order-{}", uuid::Uuid::new_v4()), "amount": 1500,
           "currency": "XOF", "country": country, "operator": operator,
           "customer": {"phone": phone}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payments_are_listed_oldest_first_filtered_and_paged() {
    let app = spawn_app().await;
    let (_, key, _) = app.merchant("Shop");
    let (_, other, _) = app.merchant("Other");
    let mut created = Vec::new();
    for body in [
        payment("BJ", "mtn-bj", "+2290166000001"),
        payment("BJ", "mtn-bj", "+2290166000002"), // fails (insufficient funds)
        payment("TG", "togocom-tg", "+22890000001"),
        payment("BJ", "mtn-bj", "+2290166000004"),
        payment("CI", "orange-ci", "+2250700000001"),
    ] {
        let (status, p) = app.create(&key, &new_key(), &body).await;
        assert_eq!(status, 201, "{p}");
        created.push(p);
    }
    let all: Vec<String> = created
        .iter()
        .map(|p| p["id"].as_str().unwrap().to_string())
        .collect();
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
    assert_eq!(ids(&page), all, "oldest first");
    assert!(page["next_starting_after"].is_null());

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

    // Filters: by alias, country, reference, status, creation time.
    assert_eq!(
        ids(&list("?operator=mtn").await.1),
        [all[0].as_str(), &all[1], &all[3]]
    );
    assert_eq!(ids(&list("?country=TG").await.1), [all[2].as_str()]);
    let reference = created[4]["reference"].as_str().unwrap();
    assert_eq!(
        ids(&list(&format!("?reference={reference}")).await.1),
        [all[4].as_str()]
    );
    assert_eq!(
        ids(&list(&format!("?reference={reference}&country=BJ")).await.1).len(),
        0
    );
    let failed = app
        .get(
            &key,
            &format!("/api/v1/collect/payments/{}?sync=true", all[1]),
        )
        .await
        .1;
    assert_eq!(failed["status"], "failed", "{failed}");
    assert_eq!(ids(&list("?status=failed").await.1), [all[1].as_str()]);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payments_refunds_are_listed_and_each_is_read() {
    let app = spawn_app().await;
    let (_, key, _) = app.merchant("Shop");
    let (_, other, _) = app.merchant("Other");
    let (_, p) = app
        .create(&key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    let id = p["id"].as_str().unwrap();
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
        made.push(r["id"].as_str().unwrap().to_string());
    }

    let (status, page) = app.get(&key, &refunds).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids(&page), made, "oldest first");
    assert_eq!(page["data"][0]["amount"], 500);
    let (_, first) = app.get(&key, &format!("{refunds}?limit=1")).await;
    assert_eq!(
        (ids(&first), first["has_more"].as_bool()),
        (vec![made[0].clone()], Some(true))
    );
    let (_, second) = app
        .get(
            &key,
            &format!("{refunds}?limit=1&starting_after={}", made[0]),
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
        .get(&key, &format!("/api/v1/collect/refunds/{}", made[1]))
        .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(
        (
            r["object"].as_str(),
            r["payment_id"].as_str(),
            r["amount"].as_u64()
        ),
        (Some("collect.refund"), Some(id), Some(400))
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
