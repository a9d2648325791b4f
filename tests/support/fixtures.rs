//! Fixtures: what a test needs before the thing it tests (a merchant's key,
//! a created payment), made in one call and checked as it is made, so that
//! the test says only what it tests.

use serde_json::Value;

use super::{TestApp, id_of, new_key};

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
            .create_key(&merchant, mmc_host::accounts::Environment::Live)
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
