//! The money-safety fault matrix: every operator call that moves money
//! × every way it can end without an explicit answer × every live protocol.
//!
//! The rule checked in each cell: an operator call that did not end in an
//! explicit answer has an unknown outcome, so the service must find out by
//! asking the operator about our id, and in the end
//!
//! - **money moved at the fake ⇔ the service reports it** (payment
//!   `completed`, payment `refunded` / `collect.refund.completed`, bulk item
//!   `completed`; when no money moved, never those), and
//! - **at most one operator-side id per operation** (distinct
//!   `X-Reference-Id` / `depositId` / `payoutId` / `refundId` /
//!   `client_reference` / `idempotency-key` the fake received, and distinct
//!   records it holds for that operation).
//!
//! Every fault below makes the fake do the work first (the operation is
//! recorded and settles as usual), then lie: answer too late, answer a 5xx,
//! drop the connection, answer garbage, or keep the adapter busy until the
//! host kills it. All cells of one protocol share one fake and one service
//! (two, see [`Lie::Trap`]) and run concurrently; the matrix is printed as a
//! markdown table (`--nocapture`) and saved to `target/fault-matrix.md`.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use mmc_host::config::ComponentConfig;
use serde_json::{Value, json};

use crate::support::fakes::fedapay::FakeFedaPay;
use crate::support::fakes::mtn::{FakeMtn, Kind as MtnKind};
use crate::support::fakes::pawapay::{self, FakePawapay, Kind as PawaKind};
use crate::support::fakes::wave::FakeWave;
use crate::support::fakes::{Fault, Outcome};
use crate::support::*;
use crate::{app_with_adapter, live_payment};

/// How late a slow fake answers (it did the work at once).
const SLOW: Duration = Duration::from_millis(3000);
/// The adapters' `timeout_ms` in the services that take the ordinary faults:
/// well below [`SLOW`], so a slow answer is a timeout.
const TIMEOUT_MS: u64 = 1000;
/// The adapters' `deadline_ms` in the services of the trap row: below
/// [`SLOW`], while their `timeout_ms` ([`TRAP_TIMEOUT_MS`]) is above it.
const TRAP_DEADLINE_MS: u64 = 1500;
const TRAP_TIMEOUT_MS: u64 = 6000;
/// How long "ends up" may take: reconciliation polls at 2 s, then doubling.
const SETTLE: Duration = Duration::from_secs(30);
/// Every look at the service asks the operator first (`?sync=true`).
const LOOK_EVERY: Duration = Duration::from_millis(1000);

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Op {
    Initiate,
    ConfirmOtp,
    Cancel,
    Refund,
    Payout,
    CheckoutSubmit,
}

const OPS: [Op; 6] = [
    Op::Initiate,
    Op::ConfirmOtp,
    Op::Cancel,
    Op::Refund,
    Op::Payout,
    Op::CheckoutSubmit,
];

impl Op {
    fn name(self) -> &'static str {
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

/// How the operator fails to tell us what it did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lie {
    /// Slow past the adapter's `timeout_ms`.
    Timeout,
    /// Accepted, then a 500.
    AcceptThen5xx,
    /// Accepted, then the connection is dropped without a response.
    AcceptThenReset,
    /// Accepted, then 200 with an unreadable body.
    Garbage,
    /// Accepted, then the adapter instance dies mid-call. How: the fake
    /// answers [`SLOW`]ly; the adapter's own `timeout_ms` is longer, but the
    /// component's `deadline_ms` (host config) is shorter, so the host's
    /// epoch interruption traps the instance as soon as it runs again after
    /// the operator did the work. The real adapter, a real trap; no test
    /// component needed. (These cells run on a second service per protocol,
    /// as the deadline and timeout are per component.)
    Trap,
}

const LIES: [Lie; 5] = [
    Lie::Timeout,
    Lie::AcceptThen5xx,
    Lie::AcceptThenReset,
    Lie::Garbage,
    Lie::Trap,
];

impl Lie {
    fn name(self) -> &'static str {
        match self {
            Lie::Timeout => "timeout",
            Lie::AcceptThen5xx => "accept then 5xx",
            Lie::AcceptThenReset => "accept then reset",
            Lie::Garbage => "unreadable answer",
            Lie::Trap => "adapter trap",
        }
    }

    fn fault(self) -> Fault {
        match self {
            Lie::Timeout | Lie::Trap => Fault::Slow(SLOW),
            Lie::AcceptThen5xx => Fault::AcceptThenStatus(500),
            Lie::AcceptThenReset => Fault::AcceptThenReset,
            Lie::Garbage => Fault::AcceptThenGarbage,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Proto {
    Momo,
    Wave,
    Pawapay,
    Fedapay,
}

const PROTOS: [Proto; 4] = [Proto::Momo, Proto::Wave, Proto::Pawapay, Proto::Fedapay];

impl Proto {
    fn name(self) -> &'static str {
        match self {
            Proto::Momo => "momo",
            Proto::Wave => "wave",
            Proto::Pawapay => "pawapay",
            Proto::Fedapay => "fedapay",
        }
    }

    /// Why an operation does not exist for this protocol, if it does not.
    fn not_applicable(self, op: Op) -> Option<&'static str> {
        match (self, op) {
            (Proto::Momo, Op::ConfirmOtp) => Some("MTN has no OTP step"),
            (Proto::Wave, Op::ConfirmOtp) => Some("Wave has no OTP step (paid on Wave's page)"),
            (Proto::Fedapay, Op::ConfirmOtp) => {
                Some("FedaPay has no OTP step (approved on the phone or its page)")
            }
            (Proto::Fedapay, Op::Refund) => Some("FedaPay documents no refund API"),
            _ => None,
        }
    }
}

enum Fake {
    Mtn(FakeMtn),
    Wave(FakeWave),
    Pawapay(FakePawapay),
    Fedapay(FakeFedaPay),
}

/// One fake operator and one service whose live environment routes to it.
struct Rig {
    proto: Proto,
    fake: Fake,
    app: TestApp,
}

/// What the fake operator did about one operation.
#[derive(Debug, Default)]
struct AtOperator {
    /// Money moved (payment approved, refund or payout went through).
    moved: bool,
    /// Nothing more will happen there on its own (final, or nothing exists).
    settled: bool,
    /// Records it holds for this operation (a second one = a second movement).
    records: usize,
}

/// One look at both sides.
struct Look {
    at: AtOperator,
    /// What the service says, for the report.
    state: String,
    /// The service reports the money movement.
    reported: bool,
    /// The service's answer is final.
    terminal: bool,
}

impl Look {
    fn agrees(&self) -> bool {
        self.at.settled && self.at.moved == self.reported && (self.at.moved || self.terminal)
    }
}

type Verdict = Result<String, String>;

impl Rig {
    async fn start(proto: Proto, trap: bool) -> Rig {
        let limits = |c: &mut ComponentConfig| {
            let timeout = if trap { TRAP_TIMEOUT_MS } else { TIMEOUT_MS };
            c.settings.insert("timeout_ms".into(), timeout.to_string());
            if trap {
                c.deadline_ms = Some(TRAP_DEADLINE_MS);
            }
        };
        // Payouts left unanswered are asked about after the grace (default 60 s).
        let bulk = |c: &mut mmc_host::config::Config| {
            let b = c.components.entry("bulk".into()).or_default();
            b.settings.insert("claim_grace_ms".into(), "5000".into());
        };
        match proto {
            Proto::Momo => {
                let fake = FakeMtn::start().await;
                let mut c = fake.component_config();
                limits(&mut c);
                let app = app_with_adapter("momo", &["mtn-bj"], c, bulk).await;
                Rig {
                    proto,
                    fake: Fake::Mtn(fake),
                    app,
                }
            }
            Proto::Wave => {
                let fake = FakeWave::start().await;
                let mut c = fake.component_config();
                limits(&mut c);
                // The payer's number travels with the session: the fake can
                // then tell one cell's session from another's.
                c.settings
                    .insert("restrict_payer_mobile".into(), "true".into());
                let app = app_with_adapter("wave", &["wave-ci"], c, bulk).await;
                fake.set_webhook_url(&format!(
                    "{}/api/v1/psp/wave-ci/callback?environment=live",
                    app.base
                ));
                Rig {
                    proto,
                    fake: Fake::Wave(fake),
                    app,
                }
            }
            Proto::Pawapay => {
                let fake = FakePawapay::start().await;
                let mut c = fake.component_config();
                limits(&mut c);
                let app = app_with_adapter("pawapay", &["moov-bj", "orange-ci"], c, bulk).await;
                fake.set_callback_url(&format!(
                    "{}/api/v1/psp/moov-bj/callback?environment=live",
                    app.base
                ));
                Rig {
                    proto,
                    fake: Fake::Pawapay(fake),
                    app,
                }
            }
            Proto::Fedapay => {
                let fake = FakeFedaPay::start().await;
                let mut c = fake.component_config();
                limits(&mut c);
                let app = app_with_adapter("fedapay", &["celtiis-bj"], c, bulk).await;
                fake.set_webhook_url(&format!(
                    "{}/api/v1/psp/celtiis-bj/callback?environment=live",
                    app.base
                ));
                Rig {
                    proto,
                    fake: Fake::Fedapay(fake),
                    app,
                }
            }
        }
    }

    /// A phone of its own for cell `n` (faults are targeted by MSISDN).
    fn phone(&self, n: usize) -> String {
        match self.proto {
            Proto::Momo => format!("+2290166{:06}", 700_000 + n),
            Proto::Wave => format!("+22507{:08}", 70_000_000 + n),
            Proto::Pawapay => format!("+2290195{:06}", 700_000 + n),
            Proto::Fedapay => format!("+2290140{:06}", 700_000 + n),
        }
    }

    fn country(&self) -> &'static str {
        match self.proto {
            Proto::Wave => "CI",
            _ => "BJ",
        }
    }

    fn operator(&self) -> &'static str {
        match self.proto {
            Proto::Momo => "mtn-bj",
            Proto::Wave => "wave-ci",
            Proto::Pawapay => "moov-bj",
            Proto::Fedapay => "celtiis-bj",
        }
    }

    /// The fake's endpoint that the operation's creating call goes to.
    fn endpoint(&self, op: Op) -> &'static str {
        match (self.proto, op) {
            (Proto::Momo, Op::Cancel) => "requesttopay_status",
            (Proto::Momo, Op::Refund) => "refund",
            (Proto::Momo, Op::Payout) => "transfer",
            (Proto::Momo, _) => "requesttopay",
            (Proto::Wave, Op::Cancel) => "session_expire",
            (Proto::Wave, Op::Refund) => "session_refund",
            (Proto::Wave, Op::Payout) => "payout_create",
            (Proto::Wave, _) => "session_create",
            (Proto::Pawapay, Op::Cancel) => "deposit_status",
            (Proto::Pawapay, Op::Refund) => "refunds",
            (Proto::Pawapay, Op::Payout) => "payouts",
            (Proto::Pawapay, _) => "deposits",
            // The cancel asks where the transaction stands (FedaPay documents
            // no withdrawal); the push and the payout's start move money.
            (Proto::Fedapay, Op::Cancel) => "transaction_get",
            (Proto::Fedapay, Op::Payout) => "payout_start",
            (Proto::Fedapay, _) => "push",
        }
    }

    /// How the operator knows our operation `id`: MTN and pawaPay by the
    /// UUIDv4 made from it, Wave by `client_reference` and FedaPay by
    /// `custom_metadata` (the id itself).
    fn op_key(&self, id: &str) -> String {
        match self.proto {
            Proto::Wave | Proto::Fedapay => id.to_string(),
            _ => operator_id(id),
        }
    }

    fn inject(&self, endpoint: &'static str, key: &str, lie: Lie) {
        match &self.fake {
            Fake::Mtn(f) => f.inject_for(endpoint, key, lie.fault(), 1),
            Fake::Wave(f) => f.inject_for(endpoint, key, lie.fault(), 1),
            Fake::Pawapay(f) => f.inject_for(endpoint, key, lie.fault(), 1),
            Fake::Fedapay(f) => f.inject_for(endpoint, key, lie.fault(), 1),
        }
    }

    fn fault_hit(&self, endpoint: &str, key: &str) -> bool {
        0 == match &self.fake {
            Fake::Mtn(f) => f.faults_left(endpoint, key),
            Fake::Wave(f) => f.faults_left(endpoint, key),
            Fake::Pawapay(f) => f.faults_left(endpoint, key),
            Fake::Fedapay(f) => f.faults_left(endpoint, key),
        }
    }

    /// Distinct ids the operation was created under, at `endpoint`, about `key`.
    fn ids(&self, endpoint: &str, key: &str) -> BTreeSet<String> {
        match &self.fake {
            Fake::Mtn(f) => f.ids_for(endpoint, key),
            Fake::Wave(f) => f.ids_for(endpoint, key),
            Fake::Pawapay(f) => f.ids_for(endpoint, key),
            Fake::Fedapay(f) => f.ids_for(endpoint, key),
        }
    }

    /// The customer behind `phone` will not answer the prompt until told.
    fn customer_waits(&self, phone: &str) {
        match &self.fake {
            Fake::Mtn(f) => f.set_outcome(phone, Outcome::Stay),
            Fake::Pawapay(f) => f.set_outcome(phone, Outcome::Stay),
            Fake::Fedapay(f) => f.set_outcome(phone, Outcome::Stay),
            Fake::Wave(_) => {} // Wave's customer only pays when told anyway.
        }
    }

    /// The customer approves the payment now (Wave: pays an open session
    /// opened for it). Returns whether the operator took the money.
    async fn customer_approves(&self, payment_id: &str) -> bool {
        match &self.fake {
            Fake::Mtn(f) => {
                let key = self.op_key(payment_id);
                f.customer_acts(&key, Outcome::Succeed).await;
                f.transaction(&key).is_some_and(|t| t.succeeded())
            }
            Fake::Pawapay(f) => {
                let key = self.op_key(payment_id);
                f.customer_acts(&key, Outcome::Succeed).await;
                f.record(&key).is_some_and(|r| r.completed())
            }
            Fake::Wave(f) => {
                let mut paid = false;
                for s in f.sessions_for(payment_id) {
                    if f.mark_paid(&s.id) {
                        f.notify("checkout.session.completed", &s.id).await;
                        paid = true;
                    }
                }
                paid
            }
            // The pushed transaction made for our id (pending until the customer acts).
            Fake::Fedapay(f) => {
                for t in f.transactions_for(payment_id) {
                    if t.status == "pending" && t.pushes > 0 {
                        f.customer_pays(&t.id.to_string()).await;
                    }
                }
                f.transactions_for(payment_id).iter().any(|t| t.paid())
            }
        }
    }

    /// The collection `payment_id` at the operator.
    fn payment_at_operator(&self, payment_id: &str) -> AtOperator {
        match &self.fake {
            Fake::Mtn(f) => match f.transaction(&self.op_key(payment_id)) {
                Some(t) => AtOperator {
                    moved: t.succeeded(),
                    settled: t.status != "PENDING",
                    records: 1,
                },
                None => AtOperator {
                    settled: true,
                    ..AtOperator::default()
                },
            },
            Fake::Pawapay(f) => match f.record(&self.op_key(payment_id)) {
                Some(r) => AtOperator {
                    moved: r.completed(),
                    settled: matches!(r.status.as_str(), "COMPLETED" | "FAILED"),
                    records: 1,
                },
                None => AtOperator {
                    settled: true,
                    ..AtOperator::default()
                },
            },
            Fake::Wave(f) => {
                let sessions = f.sessions_for(payment_id);
                AtOperator {
                    moved: sessions.iter().any(|s| s.paid()),
                    // The test pays (or fails to pay) at once: nothing pending.
                    settled: true,
                    records: sessions.len(),
                }
            }
            Fake::Fedapay(f) => {
                let transactions = f.transactions_for(payment_id);
                AtOperator {
                    moved: transactions.iter().any(|t| t.paid()),
                    // Never pushed: nothing can happen to it on its own.
                    settled: transactions
                        .iter()
                        .all(|t| t.status != "pending" || t.pushes == 0),
                    records: transactions.len(),
                }
            }
        }
    }

    /// The refunds of `payment_id` at the operator (Wave: of its session).
    fn refund_at_operator(&self, payment_id: &str, session: &str) -> AtOperator {
        match &self.fake {
            Fake::Mtn(f) => {
                let refunds = f.refunds_of(&self.op_key(payment_id));
                AtOperator {
                    moved: refunds.iter().any(|t| t.succeeded()),
                    settled: refunds.iter().all(|t| t.status != "PENDING"),
                    records: refunds.len(),
                }
            }
            Fake::Pawapay(f) => {
                let refunds: Vec<_> = f
                    .records()
                    .into_iter()
                    .filter(|r| {
                        r.kind == PawaKind::Refund
                            && r.deposit_id.as_deref() == Some(self.op_key(payment_id).as_str())
                    })
                    .collect();
                AtOperator {
                    moved: refunds.iter().any(|r| r.completed()),
                    settled: refunds
                        .iter()
                        .all(|r| matches!(r.status.as_str(), "COMPLETED" | "FAILED")),
                    records: refunds.len(),
                }
            }
            Fake::Wave(f) => {
                let refunded = f.session(session).is_some_and(|s| s.refunded);
                AtOperator {
                    moved: refunded,
                    settled: true,
                    records: usize::from(refunded),
                }
            }
            Fake::Fedapay(_) => unreachable!("FedaPay refunds are not applicable"),
        }
    }

    /// The payouts to `phone` at the operator.
    fn payout_at_operator(&self, phone: &str) -> AtOperator {
        let digits = crate::support::fakes::normal_key(phone);
        match &self.fake {
            Fake::Mtn(f) => {
                let transfers: Vec<_> = f
                    .transactions()
                    .into_iter()
                    .filter(|t| t.kind == MtnKind::Transfer && t.party == digits)
                    .collect();
                AtOperator {
                    moved: transfers.iter().any(|t| t.succeeded()),
                    settled: transfers.iter().all(|t| t.status != "PENDING"),
                    records: transfers.len(),
                }
            }
            Fake::Pawapay(f) => {
                let payouts: Vec<_> = f
                    .records()
                    .into_iter()
                    .filter(|r| r.kind == PawaKind::Payout && r.phone == digits)
                    .collect();
                AtOperator {
                    moved: payouts.iter().any(|r| r.completed()),
                    settled: payouts
                        .iter()
                        .all(|r| matches!(r.status.as_str(), "COMPLETED" | "FAILED")),
                    records: payouts.len(),
                }
            }
            Fake::Wave(f) => {
                let payouts: Vec<_> = f
                    .payouts()
                    .into_iter()
                    .filter(|p| p.mobile == phone)
                    .collect();
                AtOperator {
                    moved: payouts.iter().any(|p| p.succeeded()),
                    settled: payouts.iter().all(|p| p.status != "processing"),
                    records: payouts.len(),
                }
            }
            // A created payout moves nothing until started; every one made
            // for the number counts (a second one would be a second payout).
            Fake::Fedapay(f) => {
                let payouts: Vec<_> = f
                    .payouts()
                    .into_iter()
                    .filter(|p| p.phone == digits)
                    .collect();
                AtOperator {
                    moved: payouts.iter().any(|p| p.sent()),
                    settled: payouts.iter().all(|p| p.status != "started"),
                    records: payouts.len(),
                }
            }
        }
    }
}

/// One cell: a protocol's rig, an operation, a lie, and a merchant of its
/// own (rate limits are per key; 80 cells poll at once).
struct Cell<'a> {
    rig: &'a Rig,
    op: Op,
    lie: Lie,
    n: usize,
    key: String,
    /// A second key of the merchant, to approve its batches (maker-checker
    /// is on by default for live keys).
    approver: String,
}

impl Cell<'_> {
    fn app(&self) -> &TestApp {
        &self.rig.app
    }

    async fn run(&self) -> Verdict {
        match self.op {
            Op::Initiate => self.initiate().await,
            Op::ConfirmOtp => self.confirm_otp().await,
            Op::Cancel => self.cancel().await,
            Op::Refund => self.refund().await,
            Op::Payout => self.payout().await,
            Op::CheckoutSubmit => self.checkout_submit().await,
        }
    }

    /// Creates a payment; returns it (any status) or why not.
    async fn create(&self, body: &Value) -> Result<Value, String> {
        let (status, p) = self.app().create(&self.key, &new_key(), body).await;
        match p["id"].as_str() {
            Some(_) if status == 201 => Ok(p),
            _ => Err(format!("create answered {status}: {}", brief(&p))),
        }
    }

    /// The payment as the service sees it after asking the operator.
    async fn read(&self, id: &str) -> Value {
        let path = format!("/api/v1/collect/payments/{id}?sync=true");
        self.app().get(&self.key, &path).await.1
    }

    /// Reads the payment until its status is one of `want` (setup steps).
    async fn until_status(&self, id: &str, want: &[&str]) -> Result<Value, String> {
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            let p = self.read(id).await;
            if want.iter().any(|w| p["status"] == *w) {
                return Ok(p);
            }
            if Instant::now() >= until {
                return Err(format!("setup: payment {} not {want:?}", p["status"]));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }

    /// The payment, both sides.
    async fn look_at_payment(&self, id: &str) -> Look {
        let p = self.read(id).await;
        let status = p["status"].as_str().unwrap_or("unreadable").to_string();
        Look {
            at: self.rig.payment_at_operator(id),
            reported: matches!(status.as_str(), "completed" | "refunded"),
            terminal: matches!(
                status.as_str(),
                "completed" | "refunded" | "failed" | "cancelled" | "expired"
            ),
            state: match p["failure_code"].as_str() {
                Some(code) => format!("{status} ({code})"),
                None => status,
            },
        }
    }

    /// The end of a collection cell: both sides agree, one id at the operator.
    async fn judge_payment(&self, id: &str, phone: &str) -> Verdict {
        let look = until_agreed(|| self.look_at_payment(id)).await;
        let endpoint = self.rig.endpoint(Op::Initiate);
        let ids = self.rig.ids(endpoint, phone).len();
        verdict(&look, ids.max(look.at.records), "payment")
    }

    async fn initiate(&self) -> Verdict {
        let phone = self.rig.phone(self.n);
        let endpoint = self.rig.endpoint(Op::Initiate);
        self.rig.inject(endpoint, &phone, self.lie);
        let body = live_payment(self.rig.country(), self.rig.operator(), &phone);
        let p = self.create(&body).await?;
        let id = p["id"].as_str().unwrap();
        self.fault_hit(endpoint, &phone)?;
        self.rig.customer_approves(id).await;
        self.judge_payment(id, &phone).await
    }

    async fn confirm_otp(&self) -> Verdict {
        // Orange CI (PREAUTH at pawaPay): nothing is sent before the code;
        // the deposit carries it.
        let phone = format!("+225070{:07}", 7_000_000 + self.n);
        let body = live_payment("CI", "orange-ci", &phone);
        let p = self.create(&body).await?;
        let id = p["id"].as_str().unwrap();
        if p["status"] != "awaiting_otp" {
            return Err(format!("setup: payment {} not awaiting_otp", p["status"]));
        }
        self.rig.inject("deposits", &phone, self.lie);
        let confirm = format!("/api/v1/collect/payments/{id}/confirm");
        self.app()
            .post(&self.key, &confirm, json!({"otp": pawapay::GOOD_OTP}))
            .await;
        self.fault_hit("deposits", &phone)?;
        self.judge_payment(id, &phone).await
    }

    /// The fault hits the cancel's call to the operator (MTN, pawaPay: the
    /// status query; Wave: the session's expiry); then the customer
    /// approves. A cancel that succeeded must mean no money moved.
    async fn cancel(&self) -> Verdict {
        let phone = self.rig.phone(self.n);
        self.rig.customer_waits(&phone);
        let body = live_payment(self.rig.country(), self.rig.operator(), &phone);
        let p = self.create(&body).await?;
        let id = p["id"].as_str().unwrap();
        let endpoint = self.rig.endpoint(Op::Cancel);
        // Wave's expiry is about the session; the status queries, about our id.
        let target = match self.rig.proto {
            Proto::Wave => p["psp_reference"].as_str().unwrap_or(id).to_string(),
            _ => self.rig.op_key(id),
        };
        self.rig.inject(endpoint, &target, self.lie);
        let path = format!("/api/v1/collect/payments/{id}/cancel");
        let (status, answer) = self.app().post(&self.key, &path, json!({})).await;
        let asked = self.rig.fault_hit(endpoint, &target);
        let paid = self.rig.customer_approves(id).await;
        let look = until_agreed(|| self.look_at_payment(id)).await;
        let ids = self.rig.ids(self.rig.endpoint(Op::Initiate), &phone).len();
        if status == 200 && paid {
            return Err(format!(
                "cancel answered 200 ({}), then the customer paid; service says {}",
                answer["status"].as_str().unwrap_or("?"),
                look.state
            ));
        }
        let note = format!(
            "cancel {status} {}{}",
            answer["error"]["code"].as_str().unwrap_or(""),
            if asked { "" } else { ", operator not asked" }
        );
        verdict(&look, ids.max(look.at.records), "payment").map(|v| format!("{note}; {v}"))
    }

    /// A completed payment, then a full refund whose call is faulted.
    async fn refund(&self) -> Verdict {
        let phone = self.rig.phone(self.n);
        let body = live_payment(self.rig.country(), self.rig.operator(), &phone);
        let p = self.create(&body).await?;
        let id = p["id"].as_str().unwrap();
        self.rig.customer_approves(id).await;
        let p = self.until_status(id, &["completed"]).await?;
        let session = p["psp_reference"].as_str().unwrap_or_default().to_string();
        let endpoint = self.rig.endpoint(Op::Refund);
        // MTN and pawaPay refunds name the payment; Wave's, the session.
        let target = match self.rig.proto {
            Proto::Wave => session.clone(),
            _ => self.rig.op_key(id),
        };
        self.rig.inject(endpoint, &target, self.lie);
        let path = format!("/api/v1/collect/payments/{id}/refunds");
        let (status, answer) = self.app().post(&self.key, &path, json!({})).await;
        self.fault_hit(endpoint, &target)?;
        let look = until_agreed(|| self.look_at_refund(id, &session)).await;
        let ids = self.rig.ids(endpoint, &target).len();
        if self.rig.proto == Proto::Wave && look.at.moved && !look.reported && !look.terminal {
            return self.wave_refund_held_for_review(id, &look, ids).await;
        }
        verdict(&look, ids.max(look.at.records), "refund").map(|v| {
            format!(
                "refund {status} {}; {v}",
                answer["status"]
                    .as_str()
                    .or(answer["error"]["code"].as_str())
                    .unwrap_or("")
            )
        })
    }

    /// Wave has no refund status query: a refund whose answer was lost cannot
    /// be settled by asking. What must hold is that nothing is lost or
    /// doubled: the refund stays `pending` (never failed), its amount stays
    /// reserved (a second refund is refused), one refund reached Wave, and
    /// the service counted it for a person to check in Wave's portal.
    async fn wave_refund_held_for_review(&self, id: &str, look: &Look, ids: usize) -> Verdict {
        if ids > 1 || look.at.records > 1 {
            return Err(format!("{ids} refunds sent to Wave for one"));
        }
        let path = format!("/api/v1/collect/payments/{id}/refunds");
        let (status, again) = self.app().post(&self.key, &path, json!({})).await;
        if status != 400 || again["error"]["code"] != "refund_amount_exceeds_remaining" {
            return Err(format!(
                "a second refund was not refused: {status} {}",
                brief(&again)
            ));
        }
        let until = Instant::now() + SETTLE;
        loop {
            let reviewed = metric(
                &self.app().metrics().await,
                "mmc_component_events_total",
                r#"component="collect",event="refund_needs_review""#,
            );
            if reviewed >= 1.0 {
                break;
            }
            if Instant::now() >= until {
                return Err("the pending Wave refund was never flagged for review".into());
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
        Ok(format!(
            "money moved, service says {}: held for review (Wave has no refund status query), second refund refused",
            look.state
        ))
    }

    /// The refund, both sides: the payment `refunded` or a
    /// `collect.refund.completed` event = reported; `.failed` = final.
    async fn look_at_refund(&self, id: &str, session: &str) -> Look {
        let p = self.read(id).await;
        // Refund events are about the refund (`?payment=` does not find
        // them); the cell's merchant has only this payment.
        let (_, events) = self.app().get(&self.key, "/api/v1/events?limit=100").await;
        let has = |t: &str| {
            events["data"].as_array().is_some_and(|a| {
                a.iter()
                    .any(|e| e["type"] == t && e["data"]["object"]["payment_id"] == id)
            })
        };
        let (completed, failed) = (
            has("collect.refund.completed"),
            has("collect.refund.failed"),
        );
        let refunded = p["status"] == "refunded" || completed;
        Look {
            at: self.rig.refund_at_operator(id, session),
            reported: refunded,
            terminal: refunded || failed,
            state: format!(
                "payment {}, refund {}",
                p["status"].as_str().unwrap_or("?"),
                if completed {
                    "completed"
                } else if failed {
                    "failed"
                } else {
                    "pending"
                }
            ),
        }
    }

    /// A one-line batch, validated; the bulk component's payout is faulted.
    async fn payout(&self) -> Verdict {
        let phone = self.rig.phone(self.n);
        let endpoint = self.rig.endpoint(Op::Payout);
        self.rig.inject(endpoint, &phone, self.lie);
        let item = json!({"beneficiary_name": "Awa Koné", "phone": phone, "amount": 2500,
                          "currency": "XOF", "reference": format!("cell-{}", self.n),
                          "operator": self.rig.operator()});
        let batch = json!({"name": "Fault matrix", "items": [item]});
        let (status, b) = self.create_batch(&batch).await;
        let Some(batch_id) = b["id"].as_str().filter(|_| status == 201) else {
            return Err(format!("setup: batch answered {status}: {}", brief(&b)));
        };
        let validate = format!("/api/v1/bulk-payments/{batch_id}/validate/");
        let (status, v) = self.app().post(&self.approver, &validate, json!({})).await;
        if status != 200 {
            return Err(format!("setup: validate answered {status}: {}", brief(&v)));
        }
        let look = until_agreed(|| self.look_at_item(batch_id, &phone)).await;
        self.fault_hit(endpoint, &phone)?;
        let ids = self.rig.ids(endpoint, &phone).len();
        verdict(&look, ids.max(look.at.records), "payout")
    }

    async fn create_batch(&self, batch: &Value) -> (u16, Value) {
        let resp = self
            .app()
            .client
            .post(self.app().url("/api/v1/bulk-payments/"))
            .bearer_auth(&self.key)
            .header("Idempotency-Key", new_key())
            .json(batch)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    async fn look_at_item(&self, batch_id: &str, phone: &str) -> Look {
        let path = format!("/api/v1/bulk-payments/{batch_id}/items/");
        let (_, page) = self.app().get(&self.key, &path).await;
        let item = &page["results"][0];
        let status = item["status"].as_str().unwrap_or("unreadable").to_string();
        Look {
            at: self.rig.payout_at_operator(phone),
            reported: status == "completed",
            terminal: matches!(status.as_str(), "completed" | "failed"),
            state: match item["failure_code"].as_str() {
                Some(code) => format!("item {status} ({code})"),
                None => format!("item {status}"),
            },
        }
    }

    /// A hosted payment; the customer picks the operator on our page.
    async fn checkout_submit(&self) -> Verdict {
        let phone = self.rig.phone(self.n);
        let hosted = json!({"reference": format!("h-{}", uuid::Uuid::new_v4()), "amount": 1500,
                            "currency": "XOF", "country": self.rig.country(), "mode": "hosted"});
        let p = self.create(&hosted).await?;
        let id = p["id"].as_str().unwrap();
        let endpoint = self.rig.endpoint(Op::CheckoutSubmit);
        self.rig.inject(endpoint, &phone, self.lie);
        let page_url = self.app().url(&format!("/checkout/{id}"));
        let form = [("operator", self.rig.operator()), ("phone", phone.as_str())];
        let submitted = self.app().client.post(&page_url).form(&form).send().await;
        self.fault_hit(endpoint, &phone)?;
        // Whatever the submit showed, the page must not offer the form again:
        // a second submit would be a second request to pay.
        let page = match submitted {
            Ok(_) => self.app().client.get(&page_url).send().await,
            Err(e) => Err(e),
        };
        let form_again = match page {
            Ok(r) => r.text().await.unwrap_or_default().contains(r#"id="pay""#),
            Err(_) => false,
        };
        self.rig.customer_approves(id).await;
        let verdict = self.judge_payment(id, &phone).await;
        if form_again {
            return Err(format!(
                "the form is shown again after the submit; {}",
                verdict.unwrap_or_else(|e| e)
            ));
        }
        verdict
    }

    /// The targeted fault must have been used: otherwise the cell tested nothing.
    fn fault_hit(&self, endpoint: &str, key: &str) -> Result<(), String> {
        if self.rig.fault_hit(endpoint, key) {
            Ok(())
        } else {
            Err(format!("test: the fault at {endpoint} never hit"))
        }
    }
}

/// Looks until the operator has settled and the service agrees with it,
/// or [`SETTLE`] passes; returns the last look.
async fn until_agreed<F, Fut>(mut look: F) -> Look
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Look>,
{
    let until = Instant::now() + SETTLE;
    loop {
        let l = look().await;
        if l.agrees() || Instant::now() >= until {
            return l;
        }
        tokio::time::sleep(LOOK_EVERY).await;
    }
}

/// The rule: money moved ⇔ reported; one operator-side id per operation.
fn verdict(look: &Look, ids: usize, what: &str) -> Verdict {
    if !look.at.settled {
        return Err(format!("test: the {what} never settled at the fake"));
    }
    if look.at.moved && !look.reported {
        return Err(format!("money moved, service says {}", look.state));
    }
    if !look.at.moved && look.reported {
        return Err(format!("no money moved, service says {}", look.state));
    }
    if ids > 1 {
        return Err(format!("{ids} operator-side ids for one {what}"));
    }
    let moved = if look.at.moved {
        "moved"
    } else {
        "did not move"
    };
    Ok(format!("money {moved}, service says {}", look.state))
}

/// How many calls of the protocol's adapter the host killed at its deadline.
async fn deadline_hits(rig: &Rig, proto: Proto) -> f64 {
    let labels = format!("component=\"{}\",outcome=\"deadline\"", proto.name());
    metric(
        &rig.app.metrics().await,
        "mmc_component_calls_total",
        &labels,
    )
}

/// A short, single-line rendering of an answer for the report.
fn brief(v: &Value) -> String {
    let s = v["error"]["code"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| v.to_string());
    s.chars().take(120).collect()
}

/// The fakes' lies are real: the work is done and the client gets an error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_then_fail_faults_do_the_work_and_then_fail_the_client() {
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(50));
    let client = reqwest::Client::new();
    let deposit = |phone: &str| {
        let id = uuid::Uuid::new_v4().to_string();
        let body = json!({"depositId": id, "amount": "1500", "currency": "XOF",
            "payer": {"type": "MMO", "accountDetails": {"phoneNumber": phone, "provider": "MOOV_BEN"}}});
        let req = client
            .post(format!("{}/v2/deposits", fake.base_url()))
            .bearer_auth(pawapay::API_TOKEN)
            .timeout(Duration::from_secs(5))
            .json(&body);
        (id, req)
    };

    // Reset: no HTTP response at all, yet the deposit was taken.
    fake.inject_for("deposits", "+2290195000101", Fault::AcceptThenReset, 1);
    let (id, req) = deposit("2290195000101");
    let err = req.send().await.expect_err("a reset, not a response");
    assert!(!err.is_timeout(), "{err:?}");
    assert_eq!(fake.faults_left("deposits", "2290195000101"), 0);
    assert!(fake.record(&id).is_some(), "the work was done");

    // 5xx after the work.
    fake.inject_for("deposits", "2290195000102", Fault::AcceptThenStatus(502), 1);
    let (id5, req) = deposit("2290195000102");
    assert_eq!(req.send().await.unwrap().status(), 502);
    assert!(fake.record(&id5).is_some());

    // Garbage after the work.
    fake.inject_for("deposits", "2290195000103", Fault::AcceptThenGarbage, 1);
    let (idg, req) = deposit("2290195000103");
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.json::<Value>().await.is_err(), "unreadable");
    assert!(fake.record(&idg).is_some());

    // The old refusal before any work still exists.
    fake.inject_for("deposits", "2290195000104", Fault::Status(503), 1);
    let (idr, req) = deposit("2290195000104");
    assert_eq!(req.send().await.unwrap().status(), 503);
    assert!(fake.record(&idr).is_none(), "nothing done");

    // Targeted faults hit only their operation; the others settle as usual.
    let (ok, req) = deposit("2290195000105");
    assert_eq!(req.send().await.unwrap().status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    for id in [&id, &id5, &idg, &ok] {
        assert!(fake.record(id).unwrap().completed(), "money moved for {id}");
    }
    assert_eq!(
        fake.ids_for("deposits", "+229 0195 000101"),
        BTreeSet::from([id.clone()])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fault_matrix_unknown_outcomes_never_lose_or_double_money() {
    let started = Instant::now();
    let mut rigs = Vec::new();
    for proto in PROTOS {
        rigs.push(Rig::start(proto, false).await);
        rigs.push(Rig::start(proto, true).await);
    }
    let rig = |proto: Proto, trap: bool| {
        let index = PROTOS.iter().position(|p| *p == proto).unwrap() * 2 + usize::from(trap);
        &rigs[index]
    };

    // Every applicable cell, as a concurrent task.
    let mut cells = Vec::new();
    for (o, op) in OPS.into_iter().enumerate() {
        for (l, lie) in LIES.into_iter().enumerate() {
            for proto in PROTOS {
                if proto.not_applicable(op).is_some() {
                    continue;
                }
                let rig = rig(proto, lie == Lie::Trap);
                let name = format!("{}-{}-{}", op.name(), lie.name(), proto.name());
                let (merchant, _, key) = rig.app.merchant(&name);
                let approver = rig
                    .app
                    .accounts
                    .create_key(&merchant, mmc_host::accounts::Environment::Live)
                    .unwrap()
                    .key;
                cells.push(Cell {
                    rig,
                    op,
                    lie,
                    n: o * 10 + l,
                    key,
                    approver,
                });
            }
        }
    }
    let verdicts = futures::future::join_all(cells.iter().map(|c| c.run())).await;

    let find = |op: Op, lie: Lie, proto: Proto| {
        cells
            .iter()
            .zip(&verdicts)
            .find(|(c, _)| c.op == op && c.lie == lie && c.rig.proto == proto)
            .map(|(_, v)| v)
    };
    let mut table = String::from(
        "| operation × fault | momo | wave | pawapay | fedapay |\n|---|---|---|---|---|\n",
    );
    let mut details = String::new();
    let mut failures = 0;
    for op in OPS {
        for lie in LIES {
            table.push_str(&format!("| {} × {} |", op.name(), lie.name()));
            for proto in PROTOS {
                let cell = match (proto.not_applicable(op), find(op, lie, proto)) {
                    (Some(why), _) => format!("n/a ({why})"),
                    (None, Some(Ok(note))) => {
                        details.push_str(&format!(
                            "- {} × {} × {}: pass — {note}\n",
                            op.name(),
                            lie.name(),
                            proto.name()
                        ));
                        "pass".to_string()
                    }
                    (None, Some(Err(reason))) => {
                        failures += 1;
                        format!("FAIL: {reason}")
                    }
                    (None, None) => unreachable!("every applicable cell ran"),
                };
                table.push_str(&format!(" {} |", cell.replace('|', "/")));
            }
            table.push('\n');
        }
    }
    // The trap row tested traps only if the host really killed the
    // adapter: one deadline hit per trap cell, at least.
    let mut traps = Vec::new();
    for proto in PROTOS {
        let wanted = cells
            .iter()
            .filter(|c| c.lie == Lie::Trap && c.rig.proto == proto)
            .count();
        let hits = deadline_hits(rig(proto, true), proto).await;
        if hits < wanted as f64 {
            failures += 1;
        }
        traps.push(format!("{} {hits}/{wanted}", proto.name()));
    }
    let report = format!(
        "# Fault matrix\n\n{table}\n{failures} failing of {} applicable cells; {:.0?}.\n\
         Adapter instances killed at their deadline in the trap services (hits/trap cells): {}.\n\n\
         ## Passing cells\n\n{details}",
        cells.len(),
        started.elapsed(),
        traps.join(", ")
    );
    println!("{report}");
    let _ = std::fs::write(target_dir().join("fault-matrix.md"), &report);
    assert_eq!(failures, 0, "see the matrix above");
}
