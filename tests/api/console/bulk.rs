//! Bulk payouts from the console: a CSV uploaded by one person through the
//! bulk component's import, its line-by-line report, approval by another
//! person only (the API's maker-checker rule), and its items as they are paid.

use std::time::{Duration, Instant};

use mmc_host::accounts::Environment;
use mmc_host::console::users::Role;
use serde_json::Value;

use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

const HEADER: &str = "beneficiary_name,phone,amount,currency,reference";

/// The batch as the API sees it, once it is no longer paying.
async fn wait_paid(app: &TestApp, key: &str, id: &str) -> Value {
    let started = Instant::now();
    loop {
        let (status, b) = app.get(key, &format!("/api/v1/bulk-payments/{id}/")).await;
        assert_eq!(status, 200, "{b}");
        if matches!(
            b["status"].as_str(),
            Some("completed" | "partially_completed" | "failed")
        ) {
            return b;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "still paying: {b}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[service_test]
async fn a_csv_uploaded_by_one_person_is_reported_approved_by_another_and_paid(app: TestApp) {
    let (merchant, key, _) = app.merchant("Payroll");
    app.accounts
        .set_require_second_approver(&merchant, Environment::Test, true)
        .unwrap();
    let maker = person(&app, &merchant, "awa@payroll.bj", Role::Finance).await;
    let checker = person(&app, &merchant, "koffi@payroll.bj", Role::Finance).await;

    let list = maker.get("/console/bulk").await;
    assert_eq!(list.status, 200, "{}", list.body);
    assert!(
        list.body.contains("enctype=\"multipart/form-data\""),
        "{}",
        list.body
    );
    let csrf = list.field("csrf");

    // A file with bad lines: every problem by line, nothing created.
    let bad = format!("{HEADER}\nAwa,+2290166000001,1000,XOF,jun-1\nKoffi,12,abc,XOF,jun-2\n");
    let report = maker
        .upload(
            "/console/bulk/upload",
            &[
                ("csrf", &csrf),
                ("name", "June payroll"),
                ("idempotency_key", &new_key()),
            ],
            ("june.csv", bad.as_bytes()),
        )
        .await;
    assert_eq!(report.status, 400, "{}", report.body);
    assert!(
        report.body.contains("<td>3</td><td>phone</td>"),
        "{}",
        report.body
    );
    assert!(
        report.body.contains("<td>3</td><td>amount</td>"),
        "{}",
        report.body
    );
    let (_, none) = app.get(&key, "/api/v1/bulk-payments/").await;
    assert_eq!(none["count"], 0, "nothing created: {none}");

    // Without the form's CSRF token: refused, nothing read.
    let forged = maker
        .upload(
            "/console/bulk/upload",
            &[("name", "x")],
            ("x.csv", bad.as_bytes()),
        )
        .await;
    assert_eq!(forged.status, 403);

    let good = format!(
        "{HEADER}\r\nAwa Koné,+2290166001001,1000,XOF,jun-1\r\n\"Mensah, Koffi\",+2290166001002,2500,XOF,jun-2\r\n"
    );
    let idem = new_key();
    let form = [
        ("csrf", csrf.as_str()),
        ("name", "June payroll"),
        ("idempotency_key", idem.as_str()),
    ];
    let first = maker
        .upload("/console/bulk/upload", &form, ("june.csv", good.as_bytes()))
        .await;
    assert_eq!(first.status, 303, "{}", first.body);
    let second = maker
        .upload("/console/bulk/upload", &form, ("june.csv", good.as_bytes()))
        .await;
    assert_eq!(
        first.location(),
        second.location(),
        "a double submit is one batch"
    );
    let page = first.location().split('?').next().unwrap().to_string();
    let id = page.trim_start_matches("/console/bulk/").to_string();
    let (_, b) = app.get(&key, &format!("/api/v1/bulk-payments/{id}/")).await;
    assert_eq!(
        (
            b["source"].as_str(),
            b["item_count"].as_u64(),
            b["status"].as_str()
        ),
        (Some("csv"), Some(2), Some("pending_validation")),
        "{b}"
    );
    let shown = maker.get(&page).await;
    assert!(shown.body.contains("Mensah, Koffi") && shown.body.contains("awa@payroll.bj"));

    // The maker's approval is refused by the API's rule, by the server.
    let refused = maker
        .submit(&page, &format!("{page}/validate"), &[("action", "approve")])
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("another key"), "{}", refused.body);
    let (_, still) = app.get(&key, &format!("/api/v1/bulk-payments/{id}/")).await;
    assert_eq!(still["status"], "pending_validation");

    let approved = checker
        .submit(&page, &format!("{page}/validate"), &[("action", "approve")])
        .await;
    assert_eq!(approved.status, 303, "{}", approved.body);
    let done = wait_paid(&app, &key, &id).await;
    assert_eq!(done["items_by_status"]["completed"], 2, "{done}");
    assert_eq!(
        done["validated_by_key_id"],
        actor(&app, &merchant, "koffi@payroll.bj")
    );

    // Item by item, as paid.
    let followed = checker.get(&format!("{page}?status=completed")).await;
    assert_eq!(
        followed.body.matches("<td>completed</td>").count(),
        2,
        "{}",
        followed.body
    );
    assert!(
        followed.body.contains("koffi@payroll.bj"),
        "the approver by name"
    );

    let owner = person(&app, &merchant, "owner@payroll.bj", Role::Owner).await;
    let audit = owner.get("/console/audit").await;
    assert_eq!(
        (
            audit.audited("bulk.upload", "done"),
            audit.audited("bulk.approve", "done")
        ),
        (1, 1),
        "{}",
        audit.body
    );
}

/// The caller id the API records for the console user `email`.
fn actor(app: &TestApp, merchant: &str, email: &str) -> String {
    let users = app.service.site.console.users.list(merchant).unwrap();
    let user = users.iter().find(|u| u.email == email).unwrap();
    format!("user_{}", user.id.trim_start_matches("usr_"))
}

#[service_test]
async fn support_and_developers_see_no_bulk_payouts_and_cannot_upload(app: TestApp) {
    let merchant = app.new_merchant("Payroll");
    for (email, role) in [
        ("agent@payroll.bj", Role::Support),
        ("dev@payroll.bj", Role::Developer),
    ] {
        let who = person(&app, &merchant, email, role).await;
        let home = who.get("/console/payments").await;
        assert!(!home.body.contains("href=\"/console/bulk\""), "{role:?}");
        assert_eq!(who.get("/console/bulk").await.status, 403, "{role:?}");
        let csrf = home.field("csrf");
        let refused = who
            .upload(
                "/console/bulk/upload",
                &[("csrf", &csrf), ("name", "x")],
                (
                    "x.csv",
                    format!("{HEADER}\nA,+2290166001001,1,XOF,r\n").as_bytes(),
                ),
            )
            .await;
        assert_eq!(refused.status, 403, "{role:?}: {}", refused.body);
        assert!(refused.body.contains("bulk:create"), "{}", refused.body);
    }
}
