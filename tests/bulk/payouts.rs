//! Payout execution against the test environment's simulator: final
//! states with exact counts and reasons, and the per-operator cap; and the
//! status queries of payouts whose answer was lost, asked at once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::helpers::*;
use crate::support::fixtures::reconcile_today;
use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mixed_batch_ends_partially_completed_with_exact_counts_and_reasons() {
    let app = spawn_app().await;
    let (_, key, _) = app.merchant("Mixed");
    let b = create(
        &app,
        &key,
        vec![
            item(&bj(1001), 1000, "ok-bj"),
            item(&bj(2), 2000, "funds-bj"),
            item("+22890000003", 3000, "declined-tg"),
            item(&bj(5), 4000, "operator-bj"),
            item("+2250700000005", 5000, "operator-ci"),
            item(&bj(1), 7000, "ok-bj-0001"),
            item("+22890001234", 8000, "ok-tg"),
            item("+22899000002", 9000, "funds-tg-moov"),
        ],
    )
    .await;
    let id = b["id"].as_str().unwrap();
    assert_eq!(validate(&app, &key, id).await.0, 200);

    let done = wait_until_final(&app, &key, id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "partially_completed", "{done}");
    assert_eq!(
        done["items_by_status"],
        json!({"pending": 0, "processing": 0, "completed": 3, "failed": 5})
    );
    assert_eq!(done["amount_completed"], 1000 + 7000 + 8000);
    assert_eq!(done["amount_failed"], 2000 + 3000 + 4000 + 5000 + 9000);
    assert_eq!(done["total_amount"], 39000);

    let items = all_items(&app, &key, id, "").await;
    let by_ref: HashMap<&str, &Value> = items
        .iter()
        .map(|i| (i["reference"].as_str().unwrap(), i))
        .collect();
    let reason = |r: &str| by_ref[r]["failure_code"].as_str().map(str::to_string);
    for ok in ["ok-bj", "ok-bj-0001", "ok-tg"] {
        assert_eq!(by_ref[ok]["status"], "completed");
        assert_eq!(reason(ok), None);
    }
    assert_eq!(reason("funds-bj").as_deref(), Some("insufficient_funds"));
    assert_eq!(
        reason("funds-tg-moov").as_deref(),
        Some("insufficient_funds")
    );
    assert_eq!(by_ref["funds-tg-moov"]["operator"], "moov-tg");
    assert_eq!(
        reason("declined-tg").as_deref(),
        Some("declined_by_customer")
    );
    assert_eq!(reason("operator-bj").as_deref(), Some("operator_error"));
    assert_eq!(reason("operator-ci").as_deref(), Some("operator_error"));
    for i in &items {
        assert_eq!(i["attempts"], 1, "each item is sent once: {i}");
        if i["status"] == "failed" {
            assert!(!i["failure_message"].as_str().unwrap().is_empty());
        }
    }
    // One event tells the merchant how the batch ended, with its counts.
    let events = batch_events(&app, &key, id).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "bulk.batch.partially_completed");
    assert_eq!(
        events[0]["data"]["object"]["items_by_status"],
        done["items_by_status"]
    );

    // The failed items, as a merchant would list them to retry.
    let failed = all_items(&app, &key, id, "&status=failed").await;
    assert_eq!(failed.len(), 5);
    assert!(failed.iter().all(|i| i["status"] == "failed"));
}

/// A payout the operator never settles is never failed on our side: past
/// `max_pending_ms` it stays processing (asked again and again), and a
/// person is told through the log and `/metrics`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payout_the_operator_never_settles_stays_processing_and_is_counted() {
    let app = spawn_app_with(|c| bulk_settings(c, &[("max_pending_ms", "500")])).await;
    let (_, key, _) = app.merchant("Patient");
    let b = create(
        &app,
        &key,
        vec![
            item("+2250700000004", 6000, "never-settles-ci"),
            item(&bj(1), 1000, "ok"),
        ],
    )
    .await;
    let id = b["id"].as_str().unwrap();
    assert_eq!(validate(&app, &key, id).await.0, 200);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = app.metrics().await;
        if metric(
            &text,
            "mmc_component_events_total",
            r#"component="bulk",event="payout_unconfirmed""#,
        ) >= 1.0
        {
            break;
        }
        assert!(Instant::now() < deadline, "never counted: {text}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let items = all_items(&app, &key, id, "").await;
    let stuck = items
        .iter()
        .find(|i| i["reference"] == "never-settles-ci")
        .unwrap();
    assert_eq!(
        stuck["status"], "processing",
        "unknown is never failed: {stuck}"
    );
    assert_eq!(stuck["attempts"], 1, "and never sent again: {stuck}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_whose_every_payout_fails_ends_failed() {
    let app = spawn_app().await;
    let (_, key, _) = app.merchant("Unlucky");
    let b = create(
        &app,
        &key,
        vec![item(&bj(2), 1000, "a"), item("+22890000003", 1000, "b")],
    )
    .await;
    let id = b["id"].as_str().unwrap();
    assert_eq!(validate(&app, &key, id).await.0, 200);
    let done = wait_until_final(&app, &key, id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "failed");
    assert_eq!(done["items_by_status"]["failed"], 2);
    assert_eq!(done["amount_failed"], 2000);
    assert_eq!(done["amount_completed"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payouts_in_flight_per_operator_are_capped_without_holding_up_other_operators() {
    let app = spawn_app_with(|c| bulk_settings(c, &[("max_in_flight_per_operator", "2")])).await;
    let (_, key, _) = app.merchant("Capped");
    // Five MTN Benin payouts that stay pending at the operator, then two Togo ones.
    let mut items: Vec<Value> = (0..5)
        .map(|i| item(&bj(10_004 + 10_000 * i), 1000, &format!("mtn-{i}")))
        .collect();
    items.push(item("+22890001001", 1000, "tg-1"));
    items.push(item("+22890001002", 1000, "tg-2"));
    let b = create(&app, &key, items).await;
    let id = b["id"].as_str().unwrap();
    assert_eq!(validate(&app, &key, id).await.0, 200);

    let started = Instant::now();
    loop {
        let (_, b) = get(&app, &key, &format!("{ROOT}{id}/")).await;
        if b["items_by_status"]["completed"] == 2 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(15), "{b}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Several more runs of the job: the cap still holds.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let (_, b) = get(&app, &key, &format!("{ROOT}{id}/")).await;
    assert_eq!(b["status"], "processing");
    assert_eq!(
        b["items_by_status"],
        json!({"pending": 3, "processing": 2, "completed": 2, "failed": 0})
    );
    let items = all_items(&app, &key, id, "").await;
    let sent: Vec<&str> = items
        .iter()
        .filter(|i| i["attempts"] == 1)
        .map(|i| i["reference"].as_str().unwrap())
        .collect();
    assert_eq!(sent, ["mtn-0", "mtn-1", "tg-1", "tg-2"]);
}

/// Payouts whose answer was lost (the operator took them, then answered 503)
/// are asked about by their id, and the queries of one round go out at once,
/// not one after another: a live operator takes up to seconds per query.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payouts_whose_answer_was_lost_are_asked_about_together_and_paid_once() {
    use std::sync::atomic::Ordering;
    let (recorder, addr) = Recorder::start(0).await;
    recorder.accept_then_fail.store(4, Ordering::SeqCst);
    *recorder.status_delay.lock() = Duration::from_millis(300);
    let dir = tempfile::tempdir().unwrap();
    let app =
        spawn_app_paying_to(addr, dir.path(), &[("validation_threshold", "1000000000")]).await;
    let (_, key, _) = app.merchant("Asked");
    let items = (0..4)
        .map(|i| item(&bj(3_000 + i), 1000, &format!("q{i}")))
        .collect();
    let b = create(&app, &key, items).await;
    let id = b["id"].as_str().unwrap();
    let b = wait_until_final(&app, &key, id, Duration::from_secs(30)).await;
    assert_eq!(b["status"], "completed", "{b}");
    assert_eq!(b["items_by_status"]["completed"], 4, "{b}");
    let mut posts = recorder.posts();
    posts.sort();
    posts.dedup();
    assert_eq!(posts.len(), 4, "each payout sent once");
    assert!(
        recorder.status_queries.lock().values().all(|n| *n >= 1),
        "each asked about"
    );
    let at_once = recorder.status_most_at_once.load(Ordering::SeqCst);
    assert!(
        at_once >= 2,
        "the round's queries went out together: {at_once} at once"
    );
}

/// The simulator's books hold what it paid out: a batch's payouts are
/// reconciled with them, each test number making its difference.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batchs_payouts_are_reconciled_with_the_simulators_books() {
    let app = spawn_app_with(|c| {
        c.admin_token = Some(ADMIN.into());
        // Today's day is judged as of now: with the default grace, a run in
        // the last half hour of the UTC day reads the record missing from the
        // statement back by status, finds it settled and calls it matched.
        c.books.missing_grace_ms = 0;
    })
    .await;
    let (_, key, _) = app.merchant("Payroll");
    let b = create(
        &app,
        &key,
        vec![
            item(&bj(1), 1000, "paid"),
            item(&bj(8), 2000, "paid-twice-there"),
            item(&bj(9), 3000, "unknown-there"),
            item(&bj(10), 4000, "failed-here-paid-there"),
        ],
    )
    .await;
    let id = b["id"].as_str().unwrap();
    assert_eq!(validate(&app, &key, id).await.0, 200);
    let done = wait_until_final(&app, &key, id, Duration::from_secs(30)).await;
    assert_eq!(done["items_by_status"]["failed"], 1, "{done}");
    tokio::time::sleep(Duration::from_millis(300)).await; // the simulator's journal

    let report = &reconcile_today(&app, "simulator").await;
    assert_eq!(report["our_records"], 4, "{report}");
    assert_eq!(
        report["counts"],
        json!({"matched": 1, "missing_at_provider": 1, "missing_here": 0, "status_differs": 1,
               "amount_differs": 0, "fee_differs": 0, "duplicate": 1}),
        "{report}"
    );
    assert_eq!(
        report["provider"]["payout"]["count"], 4,
        "the duplicate moved too: {report}"
    );
    assert_eq!(
        report["provider"]["payout"]["fee"], "90",
        "1 % of 1000, 2000 twice and 4000: {report}"
    );
}

/// A payout the operator said failed, then made after all: the books find
/// it, `bulk` asks the operator again by the payout's id and records it
/// completed (flagged for review, never paid again), and the batch follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_payout_the_operator_made_after_saying_it_failed_is_set_right_by_reconciliation() {
    let app = spawn_app_with(|c| {
        c.admin_token = Some(ADMIN.into());
        c.components
            .entry("simulator".into())
            .or_default()
            .settings
            .insert("late_success_ms".into(), "1000".into());
    })
    .await;
    let (_, key, _) = app.merchant("Payroll");
    let b = create(
        &app,
        &key,
        vec![item(&bj(1), 1000, "paid"), item(&bj(13), 2000, "paid-late")],
    )
    .await;
    let id = b["id"].as_str().unwrap();
    assert_eq!(validate(&app, &key, id).await.0, 200);
    let done = wait_until_final(&app, &key, id, Duration::from_secs(30)).await;
    assert_eq!(done["status"], "partially_completed", "{done}");
    tokio::time::sleep(Duration::from_millis(1300)).await; // the operator changes its mind

    let report = reconcile_today(&app, "simulator").await;
    assert_eq!(report["counts"]["matched"], 2, "{report}");
    assert_eq!(report["cases"]["set_right"], 1, "{report}");
    let b = wait_until_final(&app, &key, id, Duration::from_secs(5)).await;
    assert_eq!(b["status"], "completed", "{b}");
    assert_eq!(
        b["items_by_status"],
        json!({"pending": 0, "processing": 0, "completed": 2, "failed": 0}),
        "{b}"
    );
    let items = all_items(&app, &key, id, "").await;
    let late = items
        .iter()
        .find(|i| i["reference"] == "paid-late")
        .unwrap();
    assert_eq!(late["status"], "completed", "{late}");
    assert_eq!(late["review"]["code"], "late_success", "{late}");
    assert_eq!(late["expected_fee"], 20, "the simulator's 1 %: {late}");

    // Asked again, the books agree: nothing more moves, nothing more opens.
    let again = reconcile_today(&app, "simulator").await;
    assert_eq!(again["counts"], report["counts"], "{again}");
    assert_eq!(again["cases"]["opened"], 0, "{again}");
}
