//! `acme` (Acme) against the fake Acme: its entry in the registry
//! of adapters (the contract tests and every cell of the fault matrix run
//! over it) and the tests only its protocol needs.

use std::time::Duration;

use futures::future::BoxFuture;
use mmc_config::ComponentConfig;

use crate::registry::{self, AtOperator, Entry, Harness, Op};
use crate::support::fakes::acme::{self, FakeAcme};
use crate::support::fakes::{Callbacks, Outcome, Plumbing};
use crate::*;

/// `acme` in the registry of adapters (add `&crate::acme::ENTRY` to
/// `registry::ADAPTERS`).
pub const ENTRY: Entry = Entry {
    name: "acme",
    operator: "moov-bj",
    routes: &["moov-bj"],
    country: "BJ",
    phone: |n| format!("+2290195{:06}", 700_000 + n),
    unsupported: &[
        (Op::ConfirmOtp, "Acme has no OTP step"),
        (Op::Refund, "the adapter does not refund yet"),
        (Op::Payout, "the adapter does not pay out yet"),
    ],
    otp: None,
    refund_status_query: false,
    keyless_initiate: None,
    conformance_settings: &[],
    conformance_secrets: &["api_key", "webhook_secret"],
    start: registry::start::<acme::Acme>,
};

/// Acme knows a payment by our id (`reference`); a cancel asks where it
/// stands.
impl Harness for FakeAcme {
    fn plumbing(&self) -> &Plumbing {
        FakeAcme::plumbing(self)
    }

    fn component_config(&self) -> ComponentConfig {
        FakeAcme::component_config(self)
    }

    fn endpoint(&self, op: Op) -> &'static str {
        match op {
            Op::Cancel => "collection_list",
            _ => "collection_create",
        }
    }

    fn target(&self, op: Op, phone: &str, payment_id: &str, _: &str) -> String {
        match op {
            Op::Cancel => payment_id.to_string(),
            _ => phone.to_string(),
        }
    }

    fn customer_approves<'a>(&'a self, payment_id: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            self.customer_acts(payment_id, Outcome::Succeed).await;
            self.collections_for(payment_id)
                .iter()
                .any(|c| c.succeeded())
        })
    }

    fn payment(&self, payment_id: &str) -> AtOperator {
        let collections = self.collections_for(payment_id);
        AtOperator {
            moved: collections.iter().any(|c| c.succeeded()),
            settled: collections.iter().all(|c| c.status != "PENDING"),
            records: collections.len(),
        }
    }

    fn refund(&self, _: &str, _: &str) -> AtOperator {
        AtOperator::nothing()
    }

    fn payout(&self, _: &str) -> AtOperator {
        AtOperator::nothing()
    }
}

/// A payment whose callback is lost completes anyway: the service asks
/// Acme by our id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acme_payment_completes_when_its_callback_is_lost() {
    let (fake, app) = registry::rig(&ENTRY, |_| {}, |_| {}).await;
    *fake.plumbing().callback_mode.lock() = Callbacks::Lost;
    let (_, _, key) = app.merchant("acme");
    let body = live_payment(ENTRY.country, ENTRY.operator, &(ENTRY.phone)(1));
    let p = create(&app, &key, &body).await;
    let id = p["id"].as_str().unwrap();
    assert!(fake.customer_approves(id).await);
    let path = format!("/api/v1/collect/payments/{id}?sync=true");
    let until = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let (_, p) = app.get(&key, &path).await;
        if p["status"] == "completed" {
            break;
        }
        assert!(std::time::Instant::now() < until, "not completed: {p}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
