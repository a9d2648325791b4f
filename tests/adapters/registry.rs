//! The registry of adapters: one [`Entry`] per live adapter, which the
//! contract tests (the conformance kit, a payment through the service) and
//! every cell of the fault matrix (`fault_matrix.rs`) run over. An adapter
//! added to [`ADAPTERS`] is covered by all of them without a new test.
//!
//! An entry is data (the component's name, the operator the tests pay
//! with, the operations it does not support and why) plus its fake as a
//! [`Harness`]: how the tests tell the fake what to do (the customer
//! approves, waits) and read what happened there (money moved, the
//! operator-side ids it received). Each adapter's entry lives next to its
//! own tests (`momo::ENTRY` in `momo.rs`, …).

use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use mmc_config::ComponentConfig;
use serde_json::json;

use crate::support::fakes::{FakeServer, Outcome, Plumbing, Wire};
use crate::support::*;
use crate::{app_with_adapter, live_payment};
use mmc_test_kit::service_test;

/// Every live adapter the tests run over.
pub static ADAPTERS: &[&Entry] = &[
    &crate::momo::ENTRY,
    &crate::wave::ENTRY,
    &crate::pawapay::ENTRY,
    &crate::fedapay::ENTRY,
    &crate::cinetpay::ENTRY,
];

/// The money operations the service asks of an adapter.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op {
    /// A direct payment: the request to pay, push or session.
    Initiate,
    /// The customer's one-time code, for operators that debit with one.
    ConfirmOtp,
    /// Cancelling a payment in progress.
    Cancel,
    /// A full refund of a completed payment.
    Refund,
    /// A bulk payout.
    Payout,
    /// The customer's choice on the hosted checkout page.
    CheckoutSubmit,
}

pub const OPS: [Op; 6] = [
    Op::Initiate,
    Op::ConfirmOtp,
    Op::Cancel,
    Op::Refund,
    Op::Payout,
    Op::CheckoutSubmit,
];

impl Op {
    pub fn name(self) -> &'static str {
        match self {
            Op::Initiate => "initiate",
            Op::ConfirmOtp => "confirm OTP",
            Op::Cancel => "cancel",
            Op::Refund => "refund",
            Op::Payout => "payout",
            Op::CheckoutSubmit => "checkout submit",
        }
    }
}

/// One adapter, as the contract tests and the fault matrix see it.
pub struct Entry {
    /// The component (`target/components/<name>.wasm`, or
    /// `target/python-components/<name>.wasm` for an adapter written in
    /// Python; `[components.<name>]`).
    pub name: &'static str,
    /// The operator the tests pay with, routed to the adapter.
    pub operator: &'static str,
    /// Every operator routed to it in the tests (`operator` first).
    pub routes: &'static [&'static str],
    /// The country of `operator`.
    pub country: &'static str,
    /// A phone number of its own for test `n` on `operator`'s numbering
    /// plan (the fakes' faults are targeted by MSISDN).
    pub phone: fn(usize) -> String,
    /// The operations it does not support, each with the provider's reason.
    pub unsupported: &'static [(Op, &'static str)],
    /// How an operator that debits with a one-time code is paid, if one is
    /// routed to the adapter (needed for [`Op::ConfirmOtp`]).
    pub otp: Option<Otp>,
    /// Whether the provider answers a refund status query. Without one, a
    /// refund whose answer was lost stays `pending`, held for review.
    pub refund_status_query: bool,
    /// Why a request to pay sent again under its id can leave a second
    /// payable object at the provider, when it can (the provider takes no
    /// key for it): the fault matrix's "arrives late" cells of requests to
    /// pay then cannot hold it to one record, and say why instead.
    pub keyless_initiate: Option<&'static str>,
    /// Settings the conformance kit gives the adapter besides its own.
    pub conformance_settings: &'static [(&'static str, &'static str)],
    /// Secrets the conformance kit gives it (each a placeholder value).
    pub conformance_secrets: &'static [&'static str],
    /// Starts its fake ([`start`]).
    pub start: fn() -> BoxFuture<'static, Box<dyn Harness>>,
}

/// An operator whose customers confirm a payment with a one-time code.
pub struct Otp {
    pub operator: &'static str,
    pub country: &'static str,
    /// A phone of its own for test `n`.
    pub phone: fn(usize) -> String,
    /// A code the fake accepts.
    pub code: &'static str,
}

impl Entry {
    /// `Err(why)` when the adapter does not support `op`.
    pub fn supports(&self, op: Op) -> Result<(), &'static str> {
        match self.unsupported.iter().find(|(o, _)| *o == op) {
            Some((_, why)) => Err(why),
            None if op == Op::ConfirmOtp && self.otp.is_none() => Err("no OTP step"),
            None => Ok(()),
        }
    }

    /// The service's callback URL for this adapter's operator.
    pub fn callback_url(&self, service_base: &str) -> String {
        format!(
            "{service_base}/api/v1/psp/{}/callback?environment=live",
            self.operator
        )
    }

    /// The conformance kit's inputs for this adapter.
    pub fn conformance_inputs(&self) -> mmc_sandbox::conformance::Inputs {
        let pair = |(k, v): (&str, &str)| (k.to_string(), v.to_string());
        mmc_sandbox::conformance::Inputs {
            settings: self
                .conformance_settings
                .iter()
                .copied()
                .map(pair)
                .collect(),
            secrets: self
                .conformance_secrets
                .iter()
                .map(|k| pair((k, "conformance-secret")))
                .collect(),
        }
    }
}

/// What the fake operator did about one operation.
#[derive(Debug, Default)]
pub struct AtOperator {
    /// Money moved (payment approved, refund or payout went through).
    pub moved: bool,
    /// Nothing more will happen there on its own (final, or nothing exists).
    pub settled: bool,
    /// Records it holds for this operation (a second one = a second movement).
    pub records: usize,
}

impl AtOperator {
    /// Nothing was created: nothing moved, nothing will.
    pub fn nothing() -> AtOperator {
        AtOperator {
            settled: true,
            ..AtOperator::default()
        }
    }
}

/// An adapter's fake, as the tests drive it: the kit's plumbing, plus what
/// only the provider's wire format knows.
pub trait Harness: Send + Sync {
    fn plumbing(&self) -> &Plumbing;

    /// The adapter's configuration for this fake.
    fn component_config(&self) -> ComponentConfig;

    /// The fake's endpoint (its name for `inject_for`) that `op`'s
    /// money-moving call goes to.
    fn endpoint(&self, op: Op) -> &'static str;

    /// What identifies `op`'s call at the fake, for faults and ids: the
    /// phone for the creating calls, else the payment as the operator
    /// knows it (from our `payment_id` or its `psp_reference`).
    fn target(&self, op: Op, phone: &str, payment_id: &str, psp_reference: &str) -> String;

    /// The customer behind `phone` does not act until told.
    fn customer_waits(&self, phone: &str) {
        self.plumbing().outcomes.set(phone, Outcome::Stay);
    }

    /// The customer approves the payment now. Returns whether money moved.
    fn customer_approves<'a>(&'a self, payment_id: &'a str) -> BoxFuture<'a, bool>;

    /// The collection `payment_id` at the operator.
    fn payment(&self, payment_id: &str) -> AtOperator;

    /// The refunds of `payment_id` (whose operator reference is `psp_reference`).
    fn refund(&self, payment_id: &str, psp_reference: &str) -> AtOperator;

    /// The payouts to `phone`.
    fn payout(&self, phone: &str) -> AtOperator;

    /// The merchant's payout wallets hold money before any collection, for
    /// fakes whose balance is only what collections brought in (else a
    /// batch is held for float until enough collections are approved).
    fn fund_payouts(&self) {}
}

/// Starts the fake `FakeServer<W>`, for [`Entry::start`].
pub fn start<W: Wire>() -> BoxFuture<'static, Box<dyn Harness>>
where
    FakeServer<W>: Harness,
{
    Box::pin(async { Box::new(FakeServer::<W>::start().await) as Box<dyn Harness> })
}

/// A fake and a service whose live environment routes the entry's
/// operators to the adapter, its callbacks pointed at the service.
pub async fn rig(
    entry: &Entry,
    adjust: impl FnOnce(&mut ComponentConfig),
    adjust_service: impl FnOnce(&mut mmc_config::Config),
) -> (Box<dyn Harness>, TestApp) {
    let fake = (entry.start)().await;
    let app = serve(entry, fake.as_ref(), adjust, adjust_service).await;
    (fake, app)
}

/// A service whose live environment routes the entry's operators to the
/// adapter, configured for `fake` (an adapter's own tests start their fake
/// by its type, to reach what only its provider has), its callbacks
/// pointed at the service.
pub async fn serve(
    entry: &Entry,
    fake: &dyn Harness,
    adjust: impl FnOnce(&mut ComponentConfig),
    adjust_service: impl FnOnce(&mut mmc_config::Config),
) -> TestApp {
    let mut c = fake.component_config();
    adjust(&mut c);
    let app = app_with_adapter(entry.name, entry.routes, c, adjust_service).await;
    *fake.plumbing().callback_url.lock() = Some(entry.callback_url(&app.base));
    app
}

/// The contract, on every registered adapter: the conformance kit passes.
#[test]
fn every_registered_adapter_passes_the_conformance_kit() {
    for entry in ADAPTERS {
        let file = component_file(entry.name);
        let checks =
            mmc_sandbox::conformance::run(&file, &cache_dir(), &entry.conformance_inputs())
                .unwrap();
        let problems: Vec<String> = checks
            .iter()
            .filter(|c| !c.passed || c.detail.starts_with("not exercised"))
            .map(|c| format!("{}: {}", c.name, c.detail))
            .collect();
        assert!(problems.is_empty(), "{}: {problems:#?}", entry.name);
    }
}

/// The contract, on every registered adapter, through the service: a
/// payment the customer approves is reported completed, once at the
/// operator; a full refund, where supported, is reported and moves money.
#[service_test]
async fn every_registered_adapter_collects_and_refunds_through_the_service() {
    let runs = ADAPTERS.iter().map(|entry| async move {
        let result = collect_and_refund(entry).await;
        (entry.name, result)
    });
    let failures: Vec<String> = futures::future::join_all(runs)
        .await
        .into_iter()
        .filter_map(|(name, r)| r.err().map(|e| format!("{name}: {e}")))
        .collect();
    assert!(failures.is_empty(), "{failures:#?}");
}

async fn collect_and_refund(entry: &Entry) -> Result<(), String> {
    let (fake, app) = rig(entry, |_| {}, |_| {}).await;
    let key = app.live_key(entry.name);
    let phone = (entry.phone)(99);
    let body = live_payment(entry.country, entry.operator, &phone);
    let (status, p) = app.create(&key, &new_key(), &body).await;
    let id = match p["id"].as_str() {
        Some(id) if status == 201 => id.to_string(),
        _ => return Err(format!("create answered {status}: {p}")),
    };
    if !fake.customer_approves(&id).await {
        return Err("the customer could not pay at the fake".into());
    }
    let p = until(&app, &key, &id, |p| p["status"] == "completed").await?;
    let at = fake.payment(&id);
    if !at.moved || at.records != 1 {
        return Err(format!("at the operator: {at:?}"));
    }
    let ids = fake.plumbing().ids_for(fake.endpoint(Op::Initiate), &phone);
    if ids.len() > 1 {
        return Err(format!("{} operator-side ids for one payment", ids.len()));
    }
    if entry.supports(Op::Refund).is_err() {
        return Ok(());
    }
    let psp_reference = p["psp_reference"].as_str().unwrap_or_default().to_string();
    let path = format!("/api/v1/collect/payments/{id}/refunds");
    let (status, answer) = app.post(&key, &path, json!({})).await;
    if !(200..=202).contains(&status) {
        return Err(format!("refund answered {status}: {answer}"));
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let at = fake.refund(&id, &psp_reference);
        let p = read(&app, &key, &id).await;
        if at.moved && at.records == 1 && p["status"] == "refunded" {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(format!("refund: at the operator {at:?}, service says {p}"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn read(app: &TestApp, key: &str, id: &str) -> serde_json::Value {
    let path = format!("/api/v1/collect/payments/{id}?sync=true");
    app.get(key, &path).await.1
}

async fn until(
    app: &TestApp,
    key: &str,
    id: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> Result<serde_json::Value, String> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let p = read(app, key, id).await;
        if done(&p) {
            return Ok(p);
        }
        if Instant::now() >= deadline {
            return Err(format!("payment never got there: {p}"));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
