//! The overview over real payments made through the API: counts, volume and
//! success rate per operator today, the day's bar in the SVG charts, and the
//! operators' status from the catalogue.

use std::time::{Duration, Instant};

use mmc_host::console::users::Role;
use serde_json::json;

use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

#[service_test]
async fn the_overview_counts_todays_payments_per_operator_and_draws_them() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Shop");
    // MTN: two paid (1,000 + 1,500), one refused; Moov: one paid (700).
    let mut ids = Vec::new();
    for (phone, amount) in [
        ("+2290166000001", 1000),
        ("+2290166000011", 1500),
        ("+2290166000002", 800),
        ("+2290195000001", 700),
    ] {
        let mut body = direct_payment(phone);
        body["amount"] = json!(amount);
        body.as_object_mut().unwrap().remove("operator");
        if phone.starts_with("+22901950") {
            body["operator"] = json!("moov-bj");
        } else {
            body["operator"] = json!("mtn-bj");
        }
        let (id, _) = app.create_ok(&key, &body).await;
        ids.push(id);
    }
    let started = Instant::now();
    for id in &ids {
        loop {
            let (_, p) = app
                .get(&key, &format!("/api/v1/collect/payments/{id}?sync=1"))
                .await;
            if matches!(p["status"].as_str(), Some("completed" | "failed")) {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(30), "{p}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    let support = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    let page = support.get("/console/overview").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let today = page
        .body
        .split("<caption>Last 30 days</caption>")
        .next()
        .unwrap();
    assert!(
        today.contains("<tr><td>mtn-bj</td><td>3</td><td>2500 XOF</td><td>67 %</td></tr>"),
        "{today}"
    );
    assert!(
        today.contains("<tr><td>moov-bj</td><td>1</td><td>700 XOF</td><td>100 %</td></tr>"),
        "{today}"
    );
    assert!(
        today.contains("<tfoot><tr><th>Total</th><td>4</td><td>3200 XOF</td><td>75 %</td></tr>")
    );
    // Today's bar says what it stands for; the charts are inline SVG.
    let day = mmc_domain::time::rfc3339(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64,
    )[..10]
        .to_string();
    assert!(
        page.body
            .contains(&format!("<title>{day}: 3200 XOF, 4 Payments</title>")),
        "{}",
        page.body
    );
    assert!(page.body.contains(&format!("<title>{day}: 75 %</title>")));
    assert!(page.body.contains("<title>mtn-bj: 2500 XOF, 67 %</title>"));
    assert_eq!(page.body.matches("<svg").count(), 3);
    assert!(
        !page.body.contains("<script")
            && !page.body.contains("http://")
            && !page.body.contains("https://")
    );
    // The catalogue's operators with their status.
    assert!(
        page.body.contains("(mtn-bj)</td><td>operational</td>"),
        "{}",
        page.body
    );

    // Another merchant's payments are not counted.
    let (other, other_key, _) = app.merchant("Other");
    let (status, _) = app
        .create(&other_key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    assert_eq!(status, 201);
    let theirs = person(&app, &other, "agent@other.bj", Role::Support).await;
    let page = theirs.get("/console/overview?lang=fr").await;
    assert!(
        page.body.contains("<caption>Aujourd&#39;hui</caption>")
            || page.body.contains("<caption>Aujourd'hui</caption>"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("2500 XOF"));
}
