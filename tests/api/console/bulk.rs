//! Bulk payouts from the console: a CSV uploaded by one person through the
//! bulk component's import, its line-by-line report, approval by another
//! person only (the API's maker-checker rule), and its items as they are paid.

use std::time::{Duration, Instant};

use mmc_accounts::Environment;
use mmc_console_kit::users::Role;
use serde_json::{Value, json};

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
    assert!(refused.body.contains("another person"), "{}", refused.body);
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
        followed.body.matches("<td>Completed</td>").count(),
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
        assert!(
            refused.body.contains("does not allow this"),
            "{}",
            refused.body
        );
    }
}

/// A key made by the person signed in to `browser` on the Developers page.
async fn console_key(browser: &Browser, scopes: &[&str]) -> String {
    super::developers::made_key(browser, "Payroll", scopes).await
}

/// A batch named Payroll of `items`, created and approved by `key`: its id.
async fn approved_batch(app: &TestApp, key: &str, items: Value) -> String {
    let resp = app
        .client
        .post(app.url("/api/v1/bulk-payments/"))
        .bearer_auth(key)
        .header("Idempotency-Key", new_key())
        .json(&json!({"name": "Payroll", "items": items}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let id = resp.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(approve_by_key(app, key, &id).await.0, 200);
    id
}

async fn approve_by_key(app: &TestApp, key: &str, id: &str) -> (u16, Value) {
    app.post(
        key,
        &format!("/api/v1/bulk-payments/{id}/validate/"),
        json!({}),
    )
    .await
}

#[service_test]
async fn a_person_cannot_approve_their_own_batch_through_keys_they_made(app: TestApp) {
    let (merchant, reader, _) = app.merchant("Payroll");
    app.accounts
        .set_require_second_approver(&merchant, Environment::Test, true)
        .unwrap();
    let owner = person(&app, &merchant, "owner@payroll.bj", Role::Owner).await;
    let finance = person(&app, &merchant, "koffi@payroll.bj", Role::Finance).await;

    // Two keys of one owner: one creates, the other may not approve.
    let maker = console_key(&owner, &["bulk:create"]).await;
    let checker = console_key(&owner, &["bulk:approve"]).await;
    let first = batch_by_key(&app, &maker, "k-1").await;
    let (status, e) = approve_by_key(&app, &checker, &first).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("second_approver_required")),
        "{e}"
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("same person"),
        "{e}"
    );
    let (_, b) = app
        .get(&reader, &format!("/api/v1/bulk-payments/{first}/"))
        .await;
    assert_eq!(b["status"], "pending_validation", "{b}");
    assert_eq!(
        b["created_by_user_id"],
        actor(&app, &merchant, "owner@payroll.bj")
    );

    // Nor in the console: the batch's page names the key and its maker,
    // and the owner's approval there is refused.
    let page = format!("/console/bulk/{first}");
    let shown = owner.get(&page).await;
    assert!(
        shown.body.contains("(owner@payroll.bj)") && shown.body.contains("You created this batch"),
        "{}",
        shown.body
    );
    let refused = owner
        .submit(&page, &format!("{page}/validate"), &[("action", "approve")])
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("another person"), "{}", refused.body);

    // Another person approves it, in the console.
    let approved = finance
        .submit(&page, &format!("{page}/validate"), &[("action", "approve")])
        .await;
    assert_eq!(approved.status, 303, "{}", approved.body);
    let (_, b) = app
        .get(&reader, &format!("/api/v1/bulk-payments/{first}/"))
        .await;
    assert_eq!(b["status"], "processing", "{b}");
    assert_eq!(
        b["validated_by_user_id"],
        actor(&app, &merchant, "koffi@payroll.bj")
    );

    // A batch uploaded in the console by a person is not theirs to approve
    // with a key of theirs; a key another person made approves it.
    let csrf = owner.get("/console/bulk").await.field("csrf");
    let csv = format!("{HEADER}\nAwa Koné,+2290166001001,1000,XOF,up-1\n");
    let uploaded = owner
        .upload(
            "/console/bulk/upload",
            &[
                ("csrf", &csrf),
                ("name", "Upload"),
                ("idempotency_key", &new_key()),
            ],
            ("up.csv", csv.as_bytes()),
        )
        .await;
    assert_eq!(uploaded.status, 303, "{}", uploaded.body);
    let second =
        uploaded.location().split('?').next().unwrap()["/console/bulk/".len()..].to_string();
    let (status, e) = approve_by_key(&app, &checker, &second).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("second_approver_required")),
        "{e}"
    );
    let dev = person(&app, &merchant, "dev@payroll.bj", Role::Developer).await;
    let theirs = console_key(&dev, &["bulk:approve"]).await;
    let (status, v) = approve_by_key(&app, &theirs, &second).await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(
        v["validated_by_user_id"],
        actor(&app, &merchant, "dev@payroll.bj")
    );

    // Service keys (made with the command line) stand for no one: the rule
    // is key against key, as before.
    let scoped = |scopes: &str| {
        app.accounts
            .create_key_with(
                &merchant,
                Environment::Test,
                Some(mmc_accounts::scopes::Scopes::parse(scopes).unwrap()),
            )
            .unwrap()
            .key
    };
    let (service_maker, service_checker) =
        (scoped("bulk:create,bulk:approve"), scoped("bulk:approve"));
    let third = batch_by_key(&app, &service_maker, "k-4").await;
    let (status, e) = approve_by_key(&app, &service_maker, &third).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("second_approver_required")),
        "{e}"
    );
    let (status, v) = approve_by_key(&app, &service_checker, &third).await;
    assert_eq!(status, 200, "{v}");
    assert!(v["created_by_user_id"].is_null(), "{v}");
    // The Developers page tells the keys apart.
    let keys = owner.get("/console/developers").await;
    assert!(
        keys.body.contains("service key (command line)")
            && keys.body.contains("<td>owner@payroll.bj</td>"),
        "{}",
        keys.body
    );
}

#[service_test]
async fn a_batch_created_with_a_persons_key_is_not_theirs_to_approve_in_the_console(app: TestApp) {
    let (merchant, reader, _) = app.merchant("Payroll");
    app.accounts
        .set_require_second_approver(&merchant, Environment::Test, true)
        .unwrap();
    let owner = person(&app, &merchant, "owner@payroll.bj", Role::Owner).await;
    let finance = person(&app, &merchant, "koffi@payroll.bj", Role::Finance).await;
    let key = console_key(&owner, &["bulk:create"]).await;
    let id = batch_by_key(&app, &key, "own-1").await;
    let page = format!("/console/bulk/{id}");
    let refused = owner
        .submit(&page, &format!("{page}/validate"), &[("action", "approve")])
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let approved = finance
        .submit(&page, &format!("{page}/validate"), &[("action", "approve")])
        .await;
    assert_eq!(approved.status, 303, "{}", approved.body);
    let done = wait_paid(&app, &reader, &id).await;
    assert_eq!(done["items_by_status"]["completed"], 1, "{done}");
}

/// A payout whose outcome the operator cannot tell now stays in progress,
/// and its batch's page says so where a finance person looks: how many,
/// since when and why, on the batch and on the item.
#[service_test]
async fn a_payout_whose_outcome_cannot_be_read_is_shown_unconfirmed_on_its_batch(app: TestApp) {
    let (merchant, key, _) = app.merchant("Payroll");
    let id = approved_batch(
        &app,
        &key,
        json!([
            {"beneficiary_name": "Awa Koné", "phone": "+2290166000006",
             "amount": 1000, "currency": "XOF", "reference": "unreadable"},
            {"beneficiary_name": "Koffi Mensah", "phone": "+2290166000001",
             "amount": 2000, "currency": "XOF", "reference": "paid"},
        ]),
    )
    .await;

    let started = Instant::now();
    let b = loop {
        let (_, b) = app.get(&key, &format!("/api/v1/bulk-payments/{id}/")).await;
        if b["unconfirmed"]["count"] == 1 && b["items_by_status"]["completed"] == 1 {
            break b;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never unconfirmed: {b}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(b["status"], "processing", "unknown is never failed: {b}");
    assert_eq!(b["items_by_status"]["processing"], 1, "{b}");
    let reason = b["unconfirmed"]["reasons"][0]["reason"].as_str().unwrap();
    assert!(reason.contains("cannot be read"), "{b}");

    let finance = person(&app, &merchant, "awa@payroll.bj", Role::Finance).await;
    let page = finance.get(&format!("/console/bulk/{id}")).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(
        page.body.contains("Outcome not confirmed yet"),
        "the batch says it: {}",
        page.body
    );
    let item = finance
        .get(&format!("/console/bulk/{id}?status=processing"))
        .await;
    assert!(
        item.body.contains("<td>In progress</td>") && item.body.contains("cannot be read"),
        "the item says why: {}",
        item.body
    );
}

/// A batch whose total its route's wallet cannot cover is held before
/// anything is sent (`insufficient_float`, saying which wallet and by how
/// much), and goes by itself once the wallet holds enough.
#[service_test]
async fn a_batch_beyond_its_routes_float_is_held_before_anything_is_sent_then_goes_by_itself() {
    let app = spawn_app_with(|c| {
        c.route_health.float_max_age_ms = 100;
        let simulator = c.components.entry("simulator".into()).or_default();
        simulator
            .settings
            .insert("opening_balance".into(), "5000".into());
        simulator
            .settings
            .insert("completion_delay_ms".into(), "0".into());
        c.components
            .entry("bulk".into())
            .or_default()
            .settings
            .insert("float_retry_ms".into(), "200".into());
    })
    .await;
    let (merchant, key, _) = app.merchant("Payroll");
    let id = approved_batch(
        &app,
        &key,
        json!([
            {"beneficiary_name": "Awa Koné", "phone": "+2290166000001",
             "amount": 3000, "currency": "XOF", "reference": "first"},
            {"beneficiary_name": "Koffi Mensah", "phone": "+2290166001001",
             "amount": 3000, "currency": "XOF", "reference": "second"},
        ]),
    )
    .await;

    let until = Instant::now() + Duration::from_secs(10);
    let held = loop {
        let (_, b) = app.get(&key, &format!("/api/v1/bulk-payments/{id}/")).await;
        if !b["insufficient_float"].is_null() {
            break b;
        }
        assert!(Instant::now() < until, "not held: {b}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(
        held["insufficient_float"]["wallets"],
        json!([{"account": "simulator", "wallet": "simulator", "currency": "XOF",
                "available": 5000, "needed": 6000}]),
        "{held}"
    );
    assert_eq!(held["status"], "processing", "{held}");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (_, still) = app.get(&key, &format!("/api/v1/bulk-payments/{id}/")).await;
    assert_eq!(
        still["items_by_status"]["pending"], 2,
        "nothing sent: {still}"
    );
    let finance = person(&app, &merchant, "awa@payroll.bj", Role::Finance).await;
    let page = finance.get(&format!("/console/bulk/{id}")).await;
    assert!(
        page.body.contains("Waiting for float") && page.body.contains("5,000 XOF / 6,000 XOF"),
        "the batch says why it waits: {}",
        page.body
    );

    // A customer pays 1500 into the wallet: 6485 after the simulator's fee.
    let (status, p) = app
        .create(
            &key,
            &uuid::Uuid::new_v4().to_string(),
            &direct_payment("+2290166000001"),
        )
        .await;
    assert_eq!(status, 201, "{p}");
    let done = wait_paid(&app, &key, &id).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["insufficient_float"], Value::Null, "{done}");
}

/// A person removed from the team and invited again is the same person, not
/// a second one: the batch they made before is still theirs, so they cannot
/// approve it on their return. The keys they made stand for them and end
/// with their removal, on their return too.
#[service_test]
async fn a_member_removed_and_invited_again_is_still_the_maker_of_their_batch(app: TestApp) {
    let (merchant, reader, _) = app.merchant("Payroll");
    app.accounts
        .set_require_second_approver(&merchant, Environment::Test, true)
        .unwrap();
    let owner = person(&app, &merchant, "owner@payroll.bj", Role::Owner).await;
    let awa = person(&app, &merchant, "awa@payroll.bj", Role::Owner).await;
    let maker = console_key(&awa, &["bulk:create", "bulk:approve"]).await;
    let batch = batch_by_key(&app, &maker, "k-removed").await;
    let before = actor(&app, &merchant, "awa@payroll.bj");

    let users = &app.service.site.console.users;
    let listed = users.list(&merchant).unwrap();
    let awa_id = listed
        .iter()
        .find(|u| u.email == "awa@payroll.bj")
        .unwrap()
        .id
        .clone();
    let removed = owner
        .confirm(&format!("/console/team/{awa_id}/remove"))
        .await;
    assert_eq!(removed.status, 303, "{}", removed.body);
    // Her key ends with her removal (every node within the key cache's TTL).
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let (status, _) = app.get(&maker, "/api/v1/bulk-payments/").await;
    assert_eq!(status, 401, "a removed person's key still works");

    // Invited again (the address typed in capitals): the same person.
    let again = person(&app, &merchant, "Awa@Payroll.bj", Role::Owner).await;
    assert_eq!(actor(&app, &merchant, "awa@payroll.bj"), before);
    let (status, _) = app.get(&maker, "/api/v1/bulk-payments/").await;
    assert_eq!(status, 401, "her old key came back with her");
    let checker = console_key(&again, &["bulk:approve"]).await;
    let (status, e) = approve_by_key(&app, &checker, &batch).await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("second_approver_required")),
        "{e}"
    );
    let page = format!("/console/bulk/{batch}");
    let refused = again
        .submit(&page, &format!("{page}/validate"), &[("action", "approve")])
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    // Another person approves it.
    let approved = owner
        .submit(&page, &format!("{page}/validate"), &[("action", "approve")])
        .await;
    assert_eq!(approved.status, 303, "{}", approved.body);
    let (_, b) = app
        .get(&reader, &format!("/api/v1/bulk-payments/{batch}/"))
        .await;
    assert_eq!(b["status"], "processing", "{b}");
}
