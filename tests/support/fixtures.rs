//! Fixtures: what a test needs before the thing it tests (a merchant's key,
//! a created payment), made in one call and checked as it is made, so that
//! the test says only what it tests.

use serde_json::Value;

use super::{TestApp, base_config, id_of, new_key, test_storage};

impl TestApp {
    /// A new merchant named `name`, with a key in each environment: its
    /// test key (see [`TestApp::merchant`] for its id and live key).
    pub fn test_key(&self, name: &str) -> String {
        self.merchant(name).1
    }

    /// A new merchant named `name`, with a key in each environment: its
    /// live key, for a test of the live routes (the operators' adapters).
    pub fn live_key(&self, name: &str) -> String {
        self.merchant(name).2
    }

    /// A new merchant named `name` with two live keys: one that creates a
    /// bulk batch and another that approves it (maker-checker tells keys
    /// apart), in that order.
    pub fn maker_and_checker(&self, name: &str) -> (String, String) {
        let (merchant, _, maker) = self.merchant(name);
        let checker = self
            .accounts
            .create_key(&merchant, mmc_accounts::Environment::Live)
            .unwrap()
            .key;
        (maker, checker)
    }

    /// A new merchant named `name`, with a key in each environment: its id,
    /// for a test that acts as the merchant's people rather than its keys.
    pub fn new_merchant(&self, name: &str) -> String {
        self.merchant(name).0
    }

    /// Creates the payment `body` under a fresh Idempotency-Key, which must
    /// be answered 201: the payment's id and JSON.
    pub async fn create_ok(&self, key: &str, body: &Value) -> (String, Value) {
        let (status, p) = self.create(key, &new_key(), body).await;
        assert_eq!(status, 201, "{p}");
        (id_of(&p), p)
    }
}

/// Moves the stored deadline of the payment `id` (in progress) into the
/// past, as if its five minutes were over: the expiry job ends it.
pub fn overdue(data_dir: &std::path::Path, id: &str) {
    let db = test_storage(&base_config(data_dir)).backend;
    let mut tx = db.begin("collect").unwrap();
    let entries = tx.scan("expiry", "", "", 1000).unwrap();
    let (k, v) = entries
        .iter()
        .find(|(k, _)| k.ends_with(id))
        .expect("its deadline");
    tx.delete("expiry", k).unwrap();
    tx.put("expiry", &format!("0000000000001{}", &k[13..]), v)
        .unwrap();
    let record_key = k[14..].to_string(); // env/merchant/id after "<13 digits>/"
    let mut record =
        mmc_domain::record::decode(&tx.get("payments", &record_key).unwrap().unwrap()).unwrap();
    record.expires_at_ms = 1;
    tx.put(
        "payments",
        &record_key,
        &mmc_domain::record::encode(&record),
    )
    .unwrap();
    tx.commit().unwrap();
}

/// The stored record of payment `id` (the collect component's `payments`
/// table): its key and its bytes as stored.
pub fn payment_record(app: &TestApp, id: &str) -> (String, Vec<u8>) {
    let storage = &app.service.site.app.runtime.services.storage;
    let mut tx = storage.begin("collect").unwrap();
    tx.scan("payments", "", "~", 1000)
        .unwrap()
        .into_iter()
        .find(|(k, _)| k.ends_with(id))
        .expect("the payment's record")
}

/// Today (UTC), written as the books write a day.
pub fn today() -> String {
    mmc_domain::time::date(mmc_common::clock::system_now_ms())
}

/// `account`'s day `today()` reconciled through the admin API (the app
/// takes [`super::ADMIN`]): its report.
pub async fn reconcile_today(app: &TestApp, account: &str) -> Value {
    reconcile_day(app, account, &today()).await
}

/// `date` of `account` reconciled now through the admin API: its report.
pub async fn reconcile_day(app: &TestApp, account: &str, date: &str) -> Value {
    let body = serde_json::json!({"date": date, "account": account}).to_string();
    let (status, answer) = super::admin(
        app,
        reqwest::Method::POST,
        "/admin/v1/reconciliation/runs",
        Some(body.into_bytes()),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    answer["data"][0].clone()
}

/// The events of `kind` the merchant's `key` lists, once there are
/// `at_least` (or after 10 s, as many as there are).
pub async fn events_of(app: &TestApp, key: &str, kind: &str, at_least: usize) -> Vec<Value> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let (_, list) = app.get(key, &format!("/api/v1/events?type={kind}")).await;
        let events = list["data"].as_array().cloned().unwrap_or_default();
        if events.len() >= at_least || std::time::Instant::now() > until {
            return events;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
