//! The books against the fake Wave: its Balance & Reconciliation API read
//! by the `wave` adapter, a day of real payments matched with Wave's
//! transaction list, every category produced on purpose, cases opened,
//! closed by a later run and resolved by a person.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fakes::Fault;
use crate::support::fakes::wave::FakeWave;
use crate::support::fixtures::{events_of, reconcile_day, reconcile_today, today};
use crate::support::*;
use crate::wave::wave_payment;
use crate::*;
use mmc_test_kit::service_test;

fn admin_token(c: &mut mmc_config::Config) {
    c.admin_token = Some(ADMIN.into());
}

/// Wave's price list as the merchant's contract says: 1 % of a checkout payment.
fn rate_card(c: &mut mmc_config::Config) {
    c.books.rate_cards = vec![mmc_config::RateCard {
        account: "wave".into(),
        operator: None,
        operation: "collection".into(),
        percent_bp: 100,
        fixed: 0,
        min: None,
        max: None,
    }];
    c.admin_token = Some(ADMIN.into());
}

async fn books_app(fake: &FakeWave) -> TestApp {
    books_app_with(fake, |_| {}).await
}

/// [`books_app`], its configuration adjusted by `adjust` too.
async fn books_app_with(fake: &FakeWave, adjust: impl FnOnce(&mut mmc_config::Config)) -> TestApp {
    let mut component = fake.component_config();
    component
        .settings
        .insert("operators".into(), "wave-ci".into());
    let app = app_with_adapter("wave", &["wave-ci"], component, |c| {
        rate_card(c);
        adjust(c);
    })
    .await;
    fake.set_callback_url(&format!(
        "{}/api/v1/psp/wave-ci/callback?environment=live",
        app.base
    ));
    app
}

/// A live payment to `operator` at `phone` that completes: its id.
async fn completed(
    app: &TestApp,
    key: &str,
    (country, operator, phone): (&str, &str, &str),
) -> String {
    let p = create(app, key, &live_payment(country, operator, phone)).await;
    let id = id_of(&p);
    wait_for(app, key, &id, "completed", Duration::from_secs(10)).await;
    id
}

/// What `GET /api/v1/balances` says of `account` to `key`.
async fn balances_of(app: &TestApp, key: &str, account: &str) -> Value {
    let (status, balances) = app.get(key, "/api/v1/balances").await;
    assert_eq!(status, 200, "{balances}");
    balances["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["account"] == account)
        .cloned()
        .unwrap_or_else(|| panic!("no {account} in {balances}"))
}

/// A Wave payment the customer paid, completed here.
async fn paid(app: &TestApp, fake: &FakeWave, key: &str) -> String {
    let (id, session) = wave_payment(app, key).await;
    fake.customer_pays(&session).await;
    wait_for(app, key, &id, "completed", Duration::from_secs(10)).await;
    id
}

/// The admin API's cases of `status` (every account's, every merchant's).
async fn admin_cases(app: &TestApp, status: &str) -> (u16, Value) {
    let path = format!("/admin/v1/reconciliation/cases?status={status}");
    admin(app, reqwest::Method::GET, &path, None).await
}

fn counts(report: &Value) -> Value {
    report["counts"].clone()
}

#[service_test]
async fn a_day_with_every_kind_of_difference_gives_the_exact_report_and_one_case_each() {
    let fake = FakeWave::start().await;
    let app = books_app(&fake).await;
    let (merchant, _, live) = app.merchant("Shop");

    let matched = paid(&app, &fake, &live).await;
    let fee_off = paid(&app, &fake, &live).await;
    fake.edit_transactions(&fee_off, |t| t.fee = 20);
    let amount_off = paid(&app, &fake, &live).await;
    fake.edit_transactions(&amount_off, |t| t.amount = 1400);
    let twice = paid(&app, &fake, &live).await;
    fake.duplicate_transaction(&twice);
    // Cancelled here; Wave's books say the customer paid after all (a late arrival).
    let (late, _) = wave_payment(&app, &live).await;
    let (status, p) = app
        .post(
            &live,
            &format!("/api/v1/collect/payments/{late}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, p["status"].as_str()),
        (200, Some("cancelled")),
        "{p}"
    );
    fake.book("api_checkout", 1500, Some(&late));
    // Completed here; Wave has no trace of it, not even by its own status read.
    let (vanished, session) = wave_payment(&app, &live).await;
    fake.customer_pays(&session).await;
    wait_for(&app, &live, &vanished, "completed", Duration::from_secs(10)).await;
    fake.forget_session(&session);
    // Money in that nobody here asked for, and Wave sweeping the wallet to the bank.
    fake.book("api_checkout", 2000, Some("not-one-of-ours"));
    fake.book("merchant_sweep", -5000, None);
    fake.set_page_size(2);

    let report = reconcile_today(&app, "wave").await;
    assert_eq!(report["status"], "reconciled", "{report}");
    assert_eq!(report["method"], "statement");
    assert_eq!(report["final"], false, "today is still under way");
    assert_eq!(
        counts(&report),
        json!({"matched": 1, "missing_at_provider": 1, "missing_here": 1, "status_differs": 1,
               "amount_differs": 1, "fee_differs": 1, "duplicate": 1}),
        "{report}"
    );
    assert_eq!(report["our_records"], 6);
    // Wave's stated balances no longer add up: it lists fees, amounts and a
    // payment its balance never saw.
    assert_eq!(report["wallets"][0]["wallet"], "wave-ci");
    assert_ne!(report["wallets"][0]["drift"], "0", "{report}");
    // Six records' cases, and the wallet's: its day does not add up.
    assert_eq!(report["cases"]["opened"], 7, "{report}");
    let (_, open) = admin_cases(&app, "open").await;
    let drift = open["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == "balance_drift")
        .unwrap_or_else(|| panic!("no balance_drift case: {open}"));
    assert_eq!(drift["subject"], format!("wallet:wave-ci:{}", today()));
    assert_eq!(drift["wallet"], report["wallets"][0], "{drift}");
    assert_eq!(
        drift["merchant_id"],
        Value::Null,
        "the provider account's: {drift}"
    );
    // Wave's totals as its books state them (the duplicate counts: it moved).
    assert_eq!(report["provider"]["collection"]["count"], 7, "{report}");
    assert_eq!(
        report["provider"]["settlement"]["amount"], "5000",
        "{report}"
    );

    // Each subject's category, as the day's lines say.
    let path = format!("/admin/v1/reconciliation/reports/wave/{}/lines", today());
    let (_, lines) = admin(&app, reqwest::Method::GET, &path, None).await;
    let category = |subject: &str| {
        lines["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["subject"] == subject)
            .map(|l| l["category"].clone())
            .unwrap_or(Value::Null)
    };
    assert_eq!(category(&matched), "matched");
    assert_eq!(category(&fee_off), "fee_differs");
    assert_eq!(category(&amount_off), "amount_differs");
    assert_eq!(category(&twice), "duplicate");
    assert_eq!(category(&late), "status_differs");
    assert_eq!(category(&vanished), "missing_at_provider");
    let stray = fake
        .transactions()
        .into_iter()
        .find(|t| t.client_reference.as_deref() == Some("not-one-of-ours"))
        .unwrap();
    assert_eq!(
        category(&format!("provider:{}", stray.transaction_id)),
        "missing_here"
    );

    // The merchant sees its five cases and the day counted over its records.
    let (_, cases) = app
        .get(&live, "/api/v1/reconciliation/cases?status=open")
        .await;
    let mine = cases["data"].as_array().unwrap();
    assert_eq!(mine.len(), 5, "{cases}");
    assert!(mine.iter().all(|c| c["merchant_id"] == merchant.as_str()));
    let (_, reports) = app
        .get(
            &live,
            &format!("/api/v1/reconciliation/reports?date={}", today()),
        )
        .await;
    assert_eq!(reports["data"][0]["counts"]["missing_here"], 0, "{reports}");
    assert_eq!(reports["data"][0]["counts"]["duplicate"], 1);
    // Its webhooks hear of each case.
    let opened = events_of(&app, &live, "reconciliation.case.opened", 5).await;
    assert!(
        opened
            .iter()
            .any(|e| e["data"]["object"]["subject"] == late.as_str())
    );

    // Running the day again changes nothing.
    let again = reconcile_today(&app, "wave").await;
    assert_eq!(counts(&again), counts(&report));
    assert_eq!(again["cases"]["opened"], 0);
    assert_eq!(again["cases"]["open"], 7);
    assert_eq!(
        events_of(&app, &live, "reconciliation.case.opened", 5)
            .await
            .len(),
        5
    );
}

#[service_test]
async fn a_case_closes_by_itself_when_both_books_agree_and_a_person_resolves_the_rest() {
    let fake = FakeWave::start().await;
    // The edits below leave Wave's wallet day off by up to 500: only the records' cases here.
    let app = books_app_with(&fake, |c| c.books.drift_tolerance = 1000).await;
    let live = app.live_key("Shop");
    let fee_off = paid(&app, &fake, &live).await;
    fake.edit_transactions(&fee_off, |t| t.fee = 30);
    let amount_off = paid(&app, &fake, &live).await;
    fake.edit_transactions(&amount_off, |t| t.amount = 1000);
    let first = reconcile_today(&app, "wave").await;
    assert_eq!(first["cases"]["opened"], 2, "{first}");

    // Wave corrects its fee: the next run matches, and the case closes by itself.
    fake.edit_transactions(&fee_off, |t| t.fee = 15);
    let second = reconcile_today(&app, "wave").await;
    assert_eq!(
        (
            second["cases"]["closed"].as_u64(),
            second["cases"]["open"].as_u64()
        ),
        (Some(1), Some(1)),
        "{second}"
    );
    let (_, closed) = admin_cases(&app, "closed").await;
    let closed = &closed["data"][0];
    assert_eq!(closed["subject"], fee_off.as_str());
    assert_eq!(closed["resolution"]["by"], "reconciliation");

    // The amount difference is settled by a person, with a note; it stays settled.
    let (_, open) = admin_cases(&app, "open").await;
    let id = open["data"][0]["id"].as_str().unwrap().to_string();
    let resolve = format!("/admin/v1/reconciliation/cases/{id}/resolve");
    let (status, refused) = admin(
        &app,
        reqwest::Method::POST,
        &resolve,
        Some(br#"{"note":"  "}"#.to_vec()),
    )
    .await;
    assert_eq!(
        (status, refused["error"]["param"].as_str()),
        (400, Some("note")),
        "{refused}"
    );
    let note = br#"{"note":"Wave credited the missing 500 XOF on 2026-12-06 (ticket 4411)"}"#;
    let (status, resolved) =
        admin(&app, reqwest::Method::POST, &resolve, Some(note.to_vec())).await;
    assert_eq!(status, 200, "{resolved}");
    assert_eq!(resolved["status"], "resolved");
    let (status, again) = admin(&app, reqwest::Method::POST, &resolve, Some(note.to_vec())).await;
    assert_eq!(
        (status, again["error"]["code"].as_str()),
        (409, Some("case_not_open"))
    );
    let third = reconcile_today(&app, "wave").await;
    assert_eq!(
        counts(&third)["amount_differs"],
        1,
        "the difference is still there"
    );
    assert_eq!(
        (
            third["cases"]["opened"].as_u64(),
            third["cases"]["open"].as_u64()
        ),
        (Some(0), Some(0))
    );
}

#[service_test]
async fn a_statement_that_cannot_be_read_whole_leaves_the_day_incomplete_with_its_reason() {
    let fake = FakeWave::start().await;
    let app = books_app(&fake).await;
    let live = app.live_key("Shop");
    for _ in 0..3 {
        paid(&app, &fake, &live).await;
    }
    fake.set_page_size(1);

    // The first page errors; then a page is not Wave's shape.
    for (fault, why) in [
        (Fault::Status(500), "unavailable"),
        (Fault::Malformed, "unreadable"),
    ] {
        fake.inject("transactions", fault, 1);
        let report = reconcile_today(&app, "wave").await;
        assert_eq!(report["status"], "incomplete", "{report}");
        assert!(report["reason"].as_str().unwrap().contains(why), "{report}");
        assert_eq!(
            report["cases"]["opened"], 0,
            "nothing judged on half a day: {report}"
        );
        fake.clear_faults();
    }
    let (status, stored) = admin(
        &app,
        reqwest::Method::GET,
        &format!("/admin/v1/reconciliation/reports?date={}", today()),
        None,
    )
    .await;
    assert_eq!(
        (status, stored["data"][0]["status"].as_str()),
        (200, Some("incomplete"))
    );
    let (_, lines) = admin(
        &app,
        reqwest::Method::GET,
        &format!("/admin/v1/reconciliation/reports/wave/{}/lines", today()),
        None,
    )
    .await;
    assert_eq!(lines["data"], json!([]), "no line written from half a day");

    // Read whole again: reconciled.
    let report = reconcile_today(&app, "wave").await;
    assert_eq!(report["status"], "reconciled", "{report}");
    assert_eq!(counts(&report)["matched"], 3);
}

#[service_test]
async fn a_wallet_day_off_by_no_more_than_the_tolerance_opens_no_case() {
    let fake = FakeWave::start().await;
    let app = books_app_with(&fake, |c| c.books.drift_tolerance = 10).await;
    let live = app.live_key("Shop");
    paid(&app, &fake, &live).await;
    let off = paid(&app, &fake, &live).await;
    // Wave states a fee 5 XOF above what its balance took (on a movement
    // after the first: the day's opening is told by the first).
    fake.edit_transactions(&off, |t| t.fee += 5);
    let report = reconcile_today(&app, "wave").await;
    assert_eq!(report["wallets"][0]["drift"], "5", "{report}");
    assert_eq!(counts(&report)["fee_differs"], 1, "{report}");
    assert_eq!(
        report["cases"]["opened"], 1,
        "the fee's case only: {report}"
    );
}

#[service_test]
async fn a_wallet_day_case_closes_by_itself_once_the_day_adds_up() {
    let fake = FakeWave::start().await;
    let app = books_app(&fake).await;
    let live = app.live_key("Shop");
    paid(&app, &fake, &live).await;
    let off = paid(&app, &fake, &live).await;
    fake.edit_transactions(&off, |t| t.fee += 5);
    let first = reconcile_today(&app, "wave").await;
    assert_eq!(
        first["cases"]["opened"], 2,
        "the fee's and the wallet's: {first}"
    );
    // Wave corrects its statement: both close by themselves.
    fake.edit_transactions(&off, |t| t.fee -= 5);
    let second = reconcile_today(&app, "wave").await;
    assert_eq!(second["wallets"][0]["drift"], "0", "{second}");
    assert_eq!(
        (
            second["cases"]["closed"].as_u64(),
            second["cases"]["open"].as_u64()
        ),
        (Some(2), Some(0)),
        "{second}"
    );
    let (_, closed) = admin_cases(&app, "closed").await;
    let wallet = closed["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["category"] == "balance_drift")
        .unwrap_or_else(|| panic!("{closed}"));
    assert_eq!(wallet["wallet"]["drift"], "0", "{wallet}");
    assert_eq!(wallet["resolution"]["by"], "reconciliation");
}

#[service_test]
async fn the_providers_balances_are_shown_as_they_state_them() {
    let fake = FakeWave::start().await;
    let app = books_app(&fake).await;
    let live = app.live_key("Shop");
    paid(&app, &fake, &live).await;
    let (status, balances) = app.get(&live, "/api/v1/balances").await;
    assert_eq!(status, 200, "{balances}");
    let wave = balances["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["account"] == "wave")
        .cloned()
        .unwrap();
    // 1 000 000 to start, + 1 500 collected − 15 of Wave's fee.
    assert_eq!(wave["balances"][0]["available"], "1001485", "{wave}");
    // The day's statement adds up: it opened at 1 000 000 and closed at the balance.
    let report = reconcile_today(&app, "wave").await;
    let day = &report["wallets"][0];
    let said = (&day["opening"], &day["closing"], &day["net"], &day["drift"]);
    assert_eq!(
        said,
        (
            &json!("1000000"),
            &json!("1001485"),
            &json!("1485"),
            &json!("0")
        ),
        "{report}"
    );
    assert_eq!(wave["balances"][0]["currency"], "XOF");
    assert_eq!(wave["balances"][0]["wallet"], "wave-ci");
    let (status, bad) = app
        .get(&live, "/api/v1/reconciliation/reports?date=2026-02-31")
        .await;
    assert_eq!(
        (status, bad["error"]["param"].as_str()),
        (400, Some("date")),
        "{bad}"
    );
}

#[service_test]
async fn mmc_reconcile_prints_the_days_report_with_a_count_per_category() {
    let fake = FakeWave::start().await;
    let app = books_app(&fake).await;
    let live = app.live_key("Shop");
    let id = paid(&app, &fake, &live).await;
    fake.duplicate_transaction(&id);
    let (app_ref, date) = (&app, today());
    let out = tokio::task::spawn_blocking({
        let admin_url = app_ref.admin_base.clone();
        move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_mmc"))
                .args([
                    "reconcile",
                    "--date",
                    &date,
                    "--account",
                    "wave",
                    "--server",
                    &admin_url,
                    "--token",
                    ADMIN,
                ])
                .env_remove("MMC_CONFIG")
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["account"], "wave");
    assert_eq!(report["counts"]["duplicate"], 1, "{report}");
    assert_eq!(report["counts"]["matched"], 0);
}

#[service_test]
async fn a_provider_without_a_statement_is_read_back_by_status_and_a_late_success_is_set_right() {
    use crate::support::fakes::Outcome;
    use crate::support::fakes::mtn::FakeMtn;
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.set_outcome("2290166000002", Outcome::Fail("NOT_ENOUGH_FUNDS"));
    let component = fake.component_config();
    let app = app_with_adapter("momo", &["mtn-bj"], component, admin_token).await;
    let live = app.live_key("Shop");
    completed(&app, &live, ("BJ", "mtn-bj", "+2290166000001")).await;
    let late = create(&app, &live, &live_payment("BJ", "mtn-bj", "+2290166000002")).await;
    let late = id_of(&late);
    wait_for(&app, &live, &late, "failed", Duration::from_secs(10)).await;
    // MTN's books change their mind: the customer's approval went through after all.
    fake.set_status(&operator_id(&late), "SUCCESSFUL", None);

    let report = reconcile_today(&app, "momo").await;
    assert_eq!(
        report["method"], "status",
        "MTN publishes no statement: {report}"
    );
    // The late success is found, and `collect` asked MTN again and recorded it.
    assert_eq!(counts(&report)["matched"], 2, "{report}");
    assert_eq!(counts(&report)["status_differs"], 0, "{report}");
    assert_eq!(
        report["cases"],
        json!({"opened": 1, "closed": 1, "open": 0, "set_right": 1}),
        "{report}"
    );
    assert!(!fake.requests("requesttopay_status").is_empty());
    let (_, p) = app
        .get(&live, &format!("/api/v1/collect/payments/{late}"))
        .await;
    assert_eq!(p["status"], "completed", "the money was taken: {p}");
    // The difference was real: a case, closed by the run that set it right.
    let (_, open) = app
        .get(&live, "/api/v1/reconciliation/cases?status=open")
        .await;
    assert_eq!(open["data"], json!([]), "{open}");
    let (_, case) = app
        .get(&live, "/api/v1/reconciliation/cases?status=closed")
        .await;
    let case = &case["data"][0];
    assert_eq!(case["subject"], late.as_str(), "{case}");
    assert_eq!(case["category"], "status_differs");
    assert_eq!(case["ours"]["stated"], "failed", "as it stood: {case}");
    assert_eq!(case["theirs"][0]["status"], "completed");
    assert_eq!(case["resolution"]["by"], "reconciliation");
    assert!(
        case["resolution"]["note"]
            .as_str()
            .unwrap()
            .contains("set right"),
        "{case}"
    );
    for kind in ["opened", "resolved"] {
        let events = events_of(&app, &live, &format!("reconciliation.case.{kind}"), 1).await;
        assert_eq!(events.len(), 1, "{kind}: {events:?}");
    }
    // Running the day again finds both books agreeing and changes nothing.
    let again = reconcile_today(&app, "momo").await;
    assert_eq!(counts(&again), counts(&report));
    assert_eq!(
        again["cases"],
        json!({"opened": 0, "closed": 0, "open": 0, "set_right": 0}),
        "{again}"
    );

    // MTN's own accounts: what its customers paid in (the late one too), its float for payouts.
    let momo = balances_of(&app, &live, "momo").await;
    let wallet = |name: &str| {
        let wallets = momo["balances"].as_array().unwrap();
        let found = wallets.iter().find(|b| b["wallet"] == name);
        found.map(|b| b["available"].clone()).unwrap_or(Value::Null)
    };
    assert_eq!(wallet("mtn-bj collection"), "3000", "{momo}");
    assert_eq!(wallet("mtn-bj disbursement"), "5000000", "{momo}");
}

#[service_test]
async fn pawapays_statements_are_asked_for_waited_on_and_read_from_their_csv() {
    use crate::support::fakes::pawapay::{FakePawapay, StatementFault};
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.statements_ready_after(2);
    let mut component = fake.component_config();
    component
        .settings
        .insert("statement_poll_ms".into(), "100".into());
    let ops = ["moov-bj", "togocom-tg", "moov-tg", "orange-ci", "moov-ci"];
    let app = app_with_adapter("pawapay", &ops, component, admin_token).await;
    let callback = format!("{}/api/v1/psp/moov-bj/callback?environment=live", app.base);
    fake.set_callback_url(&callback);
    let live = app.live_key("Shop");
    for _ in 0..2 {
        completed(&app, &live, ("BJ", "moov-bj", "+2290195000001")).await;
    }
    // A deposit to the merchant's wallet nobody here asked for, and a top-up.
    fake.add_statement_row("DEPOSIT", &uuid::Uuid::new_v4().to_string(), "700", "BEN");
    fake.add_statement_row("TOP_UP", "top-up-1", "50000", "BEN");

    let report = reconcile_today(&app, "pawapay").await;
    assert_eq!(report["status"], "reconciled", "{report}");
    assert_eq!(counts(&report)["matched"], 2, "{report}");
    assert_eq!(counts(&report)["missing_here"], 1, "{report}");
    assert_eq!(
        report["provider"]["fee"]["amount"], "46",
        "1.5 % of each deposit: {report}"
    );
    assert_eq!(report["provider"]["top_up"]["amount"], "50000");
    // One statement per served country's wallet, each polled until ready, then downloaded.
    assert_eq!(fake.requests("statements").len(), 3);
    assert!(
        fake.requests("statement_status").len() >= 9,
        "PROCESSING twice, then COMPLETED"
    );
    assert_eq!(fake.requests("statement_download").len(), 3);
    let asked = fake.requests("statements")[0].json().unwrap();
    assert_eq!(
        asked["wallet"],
        json!({"country": "BEN", "currency": "XOF"})
    );
    assert_eq!(asked["startDate"], format!("{}T00:00:00Z", today()));

    // Statements that arrive broken leave the day incomplete, with the reason.
    fake.statements_ready_after(0);
    for (fault, why) in [
        (StatementFault::Truncated, "cut off"),
        (StatementFault::UnknownColumn, "unknown column"),
        (StatementFault::Failed, "could not prepare"),
    ] {
        fake.next_statement(fault);
        let report = reconcile_today(&app, "pawapay").await;
        assert_eq!(report["status"], "incomplete", "{report}");
        assert!(
            report["reason"].as_str().unwrap().contains(why),
            "{why}: {report}"
        );
    }
    // The balances pawaPay states per wallet.
    let pawapay = balances_of(&app, &live, "pawapay").await;
    let wallets = pawapay["balances"].as_array().unwrap();
    let ben = wallets.iter().find(|b| b["wallet"] == "BEN").unwrap();
    assert_eq!(ben["available"], "1053654.00", "{pawapay}");
}

#[service_test]
async fn fedapays_balances_are_shown_per_mode_and_its_records_read_back_by_status() {
    use crate::support::fakes::fedapay::FakeFedaPay;
    let fake = FakeFedaPay::start().await;
    fake.settle_after(Duration::from_millis(150));
    let component = fake.component_config();
    let app = app_with_adapter(
        "fedapay",
        &["celtiis-bj", "coris-bj"],
        component,
        admin_token,
    )
    .await;
    let live = app.live_key("Shop");
    completed(&app, &live, ("BJ", "celtiis-bj", "+2290140000001")).await;

    let fedapay = balances_of(&app, &live, "fedapay").await;
    assert_eq!(fedapay["error"], Value::Null, "{fedapay}");
    assert_eq!(
        fedapay["balances"][0]["wallet"], "sbin",
        "Celtiis's mode: {fedapay}"
    );
    assert_eq!(fedapay["balances"][0]["currency"], "XOF");
    assert_eq!(fedapay["balances"][0]["available"], "1500");

    let report = reconcile_today(&app, "fedapay").await;
    let how = (report["method"].as_str(), report["status"].as_str());
    assert_eq!(how, (Some("status"), Some("reconciled")), "{report}");
    assert_eq!(counts(&report)["matched"], 1, "{report}");
}

/// A provider with no statement (MTN) has each day read once, by status:
/// what moves after that read is not seen. So its day is final, and run by
/// itself, only once its operations have stopped moving
/// (`books.status_settle_ms` after the day's end), whatever lag its adapter
/// states (none, for MTN).
#[service_test]
async fn a_day_read_by_status_is_final_only_once_its_operations_have_stopped_moving() {
    use crate::support::fakes::mtn::FakeMtn;
    let fake = FakeMtn::start().await;
    // How long ago yesterday ended (days are UTC).
    let since_end = mmc_common::clock::system_now_ms() % 86_400_000;
    let app_settling = |settle_ms: u64| {
        app_with_adapter("momo", &["mtn-bj"], fake.component_config(), move |c| {
            admin_token(c);
            c.books.status_settle_ms = settle_ms;
        })
    };
    let open = app_settling(since_end + 3_600_000).await;
    let yesterday = mmc_domain::time::date(mmc_common::clock::system_now_ms() - 86_400_000);
    let report = reconcile_day(&open, "momo", &yesterday).await;
    assert_eq!(report["method"], "status", "{report}");
    assert_eq!(
        report["final"], false,
        "yesterday's operations may still move: {report}"
    );
    let settled = app_settling(0).await;
    let report = reconcile_day(&settled, "momo", &yesterday).await;
    assert_eq!(report["final"], true, "{report}");
}
