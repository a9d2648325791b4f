//! Writers that cross: PostgreSQL ends a deadlock by rolling one
//! transaction back, and when that one records an operator's answer, the
//! component runs it again — the answer is recorded, never lost to a 503.
//! Always on PostgreSQL (SQLite's single writer cannot deadlock), whatever
//! `MMC_TEST_STORAGE` says.

use std::time::{Duration, Instant};

use mmc_storage_postgres::test_util::TestDatabase;
use mmc_storage_postgres::tokio_postgres::{self, Client, NoTls};
use mmc_test_kit::service_test;
use serde_json::{Value, json};

use crate::support::*;

/// A connection of the test's own to the service's database.
async fn connect(url: &str) -> Client {
    let (client, connection) = tokio_postgres::connect(url, NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

/// Locks the rows of `table` in the `collect` component's store whose key
/// holds `id`, in the caller's open transaction; how many.
async fn lock_rows(c: &Client, table: &str, id: &str) -> usize {
    c.query(
        "SELECT k FROM kv WHERE ns = 'collect' AND tbl = $1 \
         AND position(convert_to($2, 'UTF8') in k) > 0 FOR UPDATE",
        &[&table, &id],
    )
    .await
    .unwrap()
    .len()
}

/// Makes the component's transaction on payment `id` a deadlock's victim:
/// the test holds the payment's listing row; once `request` has started
/// and its transaction (holding the payment's row) waits for that listing
/// row, the test asks for the payment's row. The server's deadlock check
/// runs in a waiter `deadlock_timeout` after it began to wait, and the
/// test's session waits a minute before checking: the component's check
/// (a second after it began, the server's default) finds the cycle first
/// however late a loaded machine runs it, and rolls it back; the test then
/// lets go. Returns what `request` answered, once the server has counted
/// the deadlock.
async fn crossed_on_listing<T>(
    db: &TestDatabase,
    id: &str,
    request: impl FnOnce() -> tokio::task::JoinHandle<T>,
) -> T {
    let (holder, watcher) = (connect(&db.url).await, connect(&db.url).await);
    let holder_pid: i32 = holder
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    holder
        .batch_execute("SET deadlock_timeout = '60s'; BEGIN")
        .await
        .unwrap();
    assert_eq!(lock_rows(&holder, "listing", id).await, 1, "listed once");
    let answer = request();

    // The component's transaction waits for the listing row, which the test holds…
    let waiting = "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))";
    let since = Instant::now();
    while watcher
        .query_one(waiting, &[&holder_pid])
        .await
        .unwrap()
        .get::<_, i64>(0)
        == 0
    {
        assert!(
            since.elapsed() < Duration::from_secs(20),
            "the component's transaction never waited for the listing row"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // …and the test for the payment's row, which it holds: a deadlock, of
    // which the server's check rolls the component's transaction back.
    assert_eq!(lock_rows(&holder, "payments", id).await, 1);
    holder.batch_execute("ROLLBACK").await.unwrap();
    let answered = answer.await.unwrap();

    // It was a deadlock the server resolved, not a wait that timed out.
    let since = Instant::now();
    loop {
        watcher
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .await
            .unwrap();
        let deadlocks: i64 = watcher
            .query_one(
                "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if deadlocks >= 1 {
            return answered;
        }
        assert!(
            since.elapsed() < Duration::from_secs(15),
            "the server counted no deadlock"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A service on a database of its own (the deadlock count is the database's).
async fn spawn_on(db: &TestDatabase) -> TestApp {
    let url = db.url.clone();
    spawn_app_with(move |c| {
        c.storage.url = Some(url);
        c.storage.pool_size = Some(6);
        c.webhooks.secrets_key = Some(TEST_SECRETS_KEY.to_string());
        c.admin_token = Some(ADMIN.into());
    })
    .await
}

/// The payment's recording transaction, after the operator accepted the
/// code, is the deadlock's victim; the component runs it again once the
/// test lets go, and the confirmation answers the operator's outcome.
#[service_test]
async fn an_otp_answer_whose_recording_is_rolled_back_by_a_deadlock_is_recorded_when_run_again() {
    let db = TestDatabase::create();
    let app = spawn_on(&db).await;
    let key = app.test_key("Shop");
    let mut otp = direct_payment("+2290166000001");
    otp["operator"] = json!("coris");
    let (id, p) = app.create_ok(&key, &otp).await;
    assert_eq!(p["status"], "awaiting_otp", "{p}");

    let (status, confirmed) = crossed_on_listing(&db, &id, || {
        let (client, url, key) = (
            app.client.clone(),
            app.url(&format!("/api/v1/collect/payments/{id}/confirm")),
            key.clone(),
        );
        tokio::spawn(async move {
            let resp = client
                .post(url)
                .bearer_auth(key)
                .json(&json!({"otp": "123456"}))
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            (status, resp.json::<Value>().await.unwrap_or(Value::Null))
        })
    })
    .await;
    assert_eq!(
        status, 200,
        "the operator's answer is recorded: {confirmed}"
    );
    assert_ne!(confirmed["status"], "awaiting_otp", "{confirmed}");
    let (_, stored) = app
        .get(&key, &format!("/api/v1/collect/payments/{id}"))
        .await;
    assert_eq!(stored["status"], confirmed["status"], "{stored}");
}

/// A customer's choice on the hosted page: the intent's transaction (the
/// operator and number, before the request to pay leaves) is the
/// deadlock's victim; run again, it is stored and the request sent once.
#[service_test]
async fn a_hosted_choice_whose_intent_is_rolled_back_by_a_deadlock_is_stored_when_run_again() {
    let db = TestDatabase::create();
    let app = spawn_on(&db).await;
    let key = app.test_key("Shop");
    let body = json!({"reference": "hosted-crossed", "amount": 1000, "currency": "XOF",
        "country": "CI", "mode": "hosted"});
    let (id, p) = app.create_ok(&key, &body).await;
    let page = p["checkout_url"].as_str().unwrap().to_string();

    let (status, html) = crossed_on_listing(&db, &id, || {
        let client = app.client.clone();
        tokio::spawn(async move {
            let resp = client
                .post(page)
                .form(&[("operator", "orange-ci"), ("phone", "0700000001")])
                .send()
                .await
                .unwrap();
            (resp.status().as_u16(), resp.text().await.unwrap())
        })
    })
    .await;
    assert_eq!(status, 200, "the page after the choice: {html}");
    let (_, stored) = app
        .get(&key, &format!("/api/v1/collect/payments/{id}"))
        .await;
    assert_eq!(stored["operator"], "orange-ci", "{stored}");
    assert_ne!(stored["status"], "awaiting_payment", "{stored}");
    calls_once_listed(&app, &id, "initiate", 1).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let calls = calls_of(&app, &id).await;
    let sent = calls
        .iter()
        .filter(|c| c["operation"] == "initiate")
        .count();
    assert_eq!(sent, 1, "one request to pay: {calls:?}");
}
