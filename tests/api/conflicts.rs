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

/// The payment's recording transaction (after the operator accepted the
/// code) holds the payment's row and waits for its listing row, which the
/// test holds; the test then waits for the payment's row. The server's
/// deadlock check runs in the transaction that waited first, the
/// component's, and rolls it back; the component runs it again once the
/// test lets go, and the confirmation answers the operator's outcome.
#[service_test]
async fn an_otp_answer_whose_recording_is_rolled_back_by_a_deadlock_is_recorded_when_run_again() {
    let db = TestDatabase::create();
    let url = db.url.clone();
    let app = spawn_app_with(move |c| {
        c.storage.url = Some(url);
        c.storage.pool_size = Some(6);
        c.webhooks.secrets_key = Some(TEST_SECRETS_KEY.to_string());
    })
    .await;
    let key = app.test_key("Shop");
    let mut otp = direct_payment("+2290166000001");
    otp["operator"] = json!("coris");
    let (id, p) = app.create_ok(&key, &otp).await;
    assert_eq!(p["status"], "awaiting_otp", "{p}");

    let (holder, watcher) = (connect(&db.url).await, connect(&db.url).await);
    let holder_pid: i32 = holder
        .query_one("SELECT pg_backend_pid()", &[])
        .await
        .unwrap()
        .get(0);
    holder.batch_execute("BEGIN").await.unwrap();
    assert_eq!(lock_rows(&holder, "listing", &id).await, 1, "listed once");

    let confirm = {
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
    };

    // The recording transaction waits for the listing row, which the test holds…
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
            "the confirmation's recording never waited for the listing row"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // …and the test for the payment's row, which it holds: a deadlock, of
    // which the server's check rolls the component's transaction back.
    assert_eq!(lock_rows(&holder, "payments", &id).await, 1);
    holder.batch_execute("ROLLBACK").await.unwrap();

    let (status, confirmed) = confirm.await.unwrap();
    assert_eq!(
        status, 200,
        "the operator's answer is recorded: {confirmed}"
    );
    assert_ne!(confirmed["status"], "awaiting_otp", "{confirmed}");
    let (_, stored) = app
        .get(&key, &format!("/api/v1/collect/payments/{id}"))
        .await;
    assert_eq!(stored["status"], confirmed["status"], "{stored}");

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
            break;
        }
        assert!(
            since.elapsed() < Duration::from_secs(15),
            "the server counted no deadlock"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
