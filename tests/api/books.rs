//! The test environment's books: the simulator keeps a balance and a
//! statement, and its test numbers make each category of difference, so a
//! merchant and their accountant try reconciliation before going live.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::fixtures::{events_of, reconcile_today, today};
use crate::support::*;
use mmc_test_kit::service_test;

async fn settled(app: &TestApp, key: &str, id: &str) -> Value {
    let until = Instant::now() + Duration::from_secs(15);
    loop {
        let (_, p) = app
            .get(key, &format!("/api/v1/collect/payments/{id}"))
            .await;
        let status = p["status"].as_str().unwrap_or_default();
        if ["completed", "failed"].contains(&status) || Instant::now() > until {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[service_test]
async fn the_simulators_test_numbers_make_each_category_of_difference() {
    let app = spawn_app_with(|c| {
        c.admin_token = Some(ADMIN.into());
        // Today's day is judged as of now: with the default grace, a run in
        // the last half hour of the UTC day reads the record missing from the
        // statement back by status, finds it settled and calls it matched.
        c.books.missing_grace_ms = 0;
        // The statement staged two lines at a time: sorted runs of two,
        // merged back (a duplicate's two lines in different runs); the
        // other tests stage a day in one.
        c.books.staged_lines_in_memory = 2;
    })
    .await;
    let (merchant, test, _) = app.merchant("Shop");
    let mut ids = std::collections::BTreeMap::new();
    for digits in ["0001", "0007", "0008", "0009", "0010", "0011", "0012"] {
        let phone = format!("+229016600{digits}");
        let key = uuid::Uuid::new_v4().to_string();
        let (status, p) = app.create(&test, &key, &direct_payment(&phone)).await;
        assert_eq!(status, 201, "{p}");
        ids.insert(digits, id_of(&p));
    }
    for (digits, id) in &ids {
        let p = settled(&app, &test, id).await;
        let want = if *digits == "0010" {
            "failed"
        } else {
            "completed"
        };
        assert_eq!(p["status"], want, "{digits}: {p}");
    }
    // The simulator's journal is written behind its calls (within 100 ms).
    tokio::time::sleep(Duration::from_millis(300)).await;

    let date = today();
    let report = &reconcile_today(&app, "simulator").await;
    assert_eq!(report["status"], "reconciled", "{report}");
    assert_eq!(
        report["counts"],
        json!({"matched": 2, "missing_at_provider": 1, "missing_here": 1, "status_differs": 1,
               "amount_differs": 1, "fee_differs": 1, "duplicate": 1}),
        "{report}"
    );
    let (_, lines) = admin(
        &app,
        reqwest::Method::GET,
        &format!("/admin/v1/reconciliation/reports/simulator/{date}/lines"),
        None,
    )
    .await;
    let category = |digits: &str| {
        let id = &ids[digits];
        lines["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["subject"] == id.as_str())
            .unwrap()["category"]
            .clone()
    };
    assert_eq!(category("0001"), "matched");
    assert_eq!(category("0007"), "amount_differs");
    assert_eq!(category("0008"), "duplicate");
    assert_eq!(category("0009"), "missing_at_provider");
    assert_eq!(category("0010"), "status_differs");
    assert_eq!(category("0011"), "matched");
    assert_eq!(category("0012"), "fee_differs");
    let fee_line = lines["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["subject"] == ids["0012"].as_str())
        .unwrap();
    assert_eq!(fee_line["expected_fee"], 15, "1 % of 1500: {fee_line}");
    assert_eq!(fee_line["theirs"][0]["fee"], "30");

    // The test key sees its cases and the simulator's balance, not the live accounts'.
    let (_, cases) = app
        .get(&test, "/api/v1/reconciliation/cases?status=open")
        .await;
    assert_eq!(cases["data"].as_array().unwrap().len(), 5, "{cases}");
    assert!(
        cases["data"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["merchant_id"] == merchant.as_str())
    );
    let (_, balances) = app.get(&test, "/api/v1/balances").await;
    let accounts: Vec<&str> = balances["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["account"].as_str().unwrap())
        .collect();
    assert_eq!(accounts, ["simulator"], "{balances}");
    let available: i64 = balances["data"][0]["balances"][0]["available"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        available > 10_000_000,
        "collections added to the opening balance: {balances}"
    );

    // A day long gone has no report; the books' endpoints only read.
    let (status, old) = app
        .get(&test, "/api/v1/reconciliation/reports?date=0257-12-25")
        .await;
    assert_eq!((status, old["data"].clone()), (200, json!([])), "{old}");
    let trace = app
        .client
        .request(
            reqwest::Method::from_bytes(b"TRACE").unwrap(),
            app.url("/api/v1/balances"),
        )
        .bearer_auth(&test)
        .send()
        .await
        .unwrap();
    assert_eq!(trace.status().as_u16(), 405);
    assert_eq!(trace.headers()["allow"], "GET, HEAD");
}

/// A simulator that says `0013` failed for its first `late_ms`, then moved.
fn late_success_after(c: &mut mmc_config::Config, late_ms: u64) {
    c.admin_token = Some(ADMIN.into());
    c.components
        .entry("simulator".into())
        .or_default()
        .settings
        .insert("late_success_ms".into(), late_ms.to_string());
}

#[service_test]
async fn a_payment_the_operator_took_after_saying_it_failed_is_set_right_with_a_case() {
    // Its status is first asked 2 s after the request: it says failed then.
    let app = spawn_app_with(|c| late_success_after(c, 4000)).await;
    let (_, test, _) = app.merchant("Shop");
    let key = uuid::Uuid::new_v4().to_string();
    let sent = Instant::now();
    let (status, p) = app
        .create(&test, &key, &direct_payment("+2290166000013"))
        .await;
    assert_eq!(status, 201, "{p}");
    let id = id_of(&p);
    let p = settled(&app, &test, &id).await;
    assert_eq!(p["status"], "failed", "the operator's first answer: {p}");
    // Past the operator's change of mind.
    tokio::time::sleep_until((sent + Duration::from_millis(4300)).into()).await;

    let report = reconcile_today(&app, "simulator").await;
    assert_eq!(report["counts"]["matched"], 1, "{report}");
    assert_eq!(report["counts"]["status_differs"], 0, "{report}");
    assert_eq!(
        report["cases"],
        json!({"opened": 1, "closed": 1, "open": 0, "set_right": 1}),
        "{report}"
    );
    let (_, p) = app
        .get(&test, &format!("/api/v1/collect/payments/{id}"))
        .await;
    assert_eq!(p["status"], "completed", "{p}");
    let completed = events_of(&app, &test, "collect.payment.completed", 1).await;
    assert_eq!(
        completed.len(),
        1,
        "the merchant hears of the money: {completed:?}"
    );
    let (_, cases) = app
        .get(&test, "/api/v1/reconciliation/cases?status=closed")
        .await;
    let case = &cases["data"][0];
    assert_eq!(
        (case["subject"].as_str(), case["category"].as_str()),
        (Some(id.as_str()), Some("status_differs")),
        "{cases}"
    );
    assert_eq!(case["ours"]["stated"], "failed", "{case}");
    assert_eq!(case["resolution"]["by"], "reconciliation", "{case}");
    for kind in ["opened", "resolved"] {
        let events = events_of(&app, &test, &format!("reconciliation.case.{kind}"), 1).await;
        assert_eq!(events.len(), 1, "{kind}: {events:?}");
    }

    let again = reconcile_today(&app, "simulator").await;
    assert_eq!(again["counts"], report["counts"], "{again}");
    assert_eq!(again["cases"]["opened"], 0, "{again}");
    assert_eq!(again["cases"]["set_right"], 0, "{again}");
}

#[service_test]
async fn each_payment_carries_the_fee_its_rate_card_expects_in_the_api_and_the_export() {
    let app = spawn_app().await;
    let test = app.test_key("Shop");
    let (status, p) = app
        .create(&test, &new_key(), &direct_payment("+2290166000001"))
        .await;
    assert_eq!(status, 201, "{p}");
    // The simulator's card: 1 % of 1500.
    assert_eq!(
        (&p["expected_fee"], &p["net_amount"]),
        (&json!(15), &json!(1485)),
        "{p}"
    );
    let id = id_of(&p);
    let (_, read) = app
        .get(&test, &format!("/api/v1/collect/payments/{id}"))
        .await;
    assert_eq!(read["expected_fee"], 15, "{read}");
    // A hosted payment has no route until the customer picks an operator.
    let hosted = json!({"reference": format!("h-{}", uuid::Uuid::new_v4()), "amount": 1500,
        "currency": "XOF", "country": "BJ", "mode": "hosted"});
    let (status, h) = app.create(&test, &new_key(), &hosted).await;
    assert_eq!(status, 201, "{h}");
    assert_eq!(
        (&h["expected_fee"], &h["net_amount"]),
        (&Value::Null, &Value::Null),
        "{h}"
    );

    let export = app
        .client
        .get(app.url("/api/v1/collect/payments/export?created[gte]=0"))
        .bearer_auth(&test)
        .send()
        .await
        .unwrap();
    assert_eq!(export.status(), 200);
    let csv = export.text().await.unwrap();
    let mut lines = csv.lines();
    assert!(
        lines.next().unwrap().ends_with(",expected_fee,net_amount"),
        "{csv}"
    );
    let row = csv.lines().find(|l| l.starts_with(&id)).unwrap();
    assert!(row.ends_with(",15,1485"), "{row}");
}

#[service_test]
async fn finished_days_are_reconciled_by_themselves_once() {
    let app = spawn_app_with(|c| {
        c.admin_token = Some(ADMIN.into());
        c.books.daily = true;
        c.books.check_every_ms = 100;
        c.books.catch_up_days = 2;
    })
    .await;
    let now = mmc_common::clock::system_now_ms();
    let days: Vec<String> = [1, 2]
        .iter()
        .map(|back| mmc_domain::time::date(now - back * 86_400_000))
        .collect();
    let until = Instant::now() + Duration::from_secs(20);
    let mut reports = Vec::new();
    for day in &days {
        loop {
            let path = format!("/admin/v1/reconciliation/reports?date={day}");
            let (_, list) = admin(&app, reqwest::Method::GET, &path, None).await;
            if let Some(report) = list["data"].as_array().and_then(|l| l.first()).cloned() {
                reports.push(report);
                break;
            }
            assert!(Instant::now() < until, "{day} not reconciled by itself");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    for r in &reports {
        assert_eq!(
            (r["account"].as_str(), r["status"].as_str()),
            (Some("simulator"), Some("reconciled")),
            "{r}"
        );
        assert_eq!(r["final"], true, "{r}");
    }
    // A final, reconciled day is not run again: its report stays as it was.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let path = format!("/admin/v1/reconciliation/reports?date={}", days[0]);
    let (_, again) = admin(&app, reqwest::Method::GET, &path, None).await;
    assert_eq!(again["data"][0]["ran_at"], reports[0]["ran_at"]);
    // Today is not over: not run by itself.
    let today = mmc_domain::time::date(now);
    let (_, none) = admin(
        &app,
        reqwest::Method::GET,
        &format!("/admin/v1/reconciliation/reports?date={today}"),
        None,
    )
    .await;
    assert_eq!(none["data"], json!([]));
}
