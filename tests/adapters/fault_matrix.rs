//! The money-safety fault matrix: every operator call that moves money
//! × every way it can end without an explicit answer × every adapter in the
//! registry (`registry.rs`).
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
//! host kills it. One more lie does no work first: the request waits in the
//! operator's gateway and is carried out only after every window the service
//! keeps has passed ([`Lie::ArrivesLate`]): "not found" until then must not
//! be taken for "never"; and the same, with the copy sent again meanwhile
//! refused ([`Lie::LateCopyRefused`]): a refusal of a copy says nothing of
//! the first, so the operation must never be reported failed on the way. All cells of one adapter share one fake and one
//! service (three, see [`Service`]) and run concurrently; the matrix is
//! printed as a markdown table (`--nocapture`) and saved to
//! `target/fault-matrix.md`.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use mmc_config::ComponentConfig;
use serde_json::{Value, json};

use crate::live_payment;
use crate::registry::{self, ADAPTERS, AtOperator, Entry, Harness, OPS, Op};
use crate::support::fakes::Fault;
use crate::support::fakes::pawapay::{self, FakePawapay};
use crate::support::*;
use mmc_test_kit::service_test;

/// How late a slow fake answers (it did the work at once).
const SLOW: Duration = Duration::from_millis(3000);
/// The adapters' `timeout_ms` in the services that take the ordinary faults:
/// well below [`SLOW`], so a slow answer is a timeout.
const TIMEOUT_MS: u64 = 1000;
/// The adapters' `deadline_ms` in the services of the trap row: below
/// [`SLOW`], while their `timeout_ms` ([`TRAP_TIMEOUT_MS`]) is above it.
const TRAP_DEADLINE_MS: u64 = 1500;
const TRAP_TIMEOUT_MS: u64 = 6000;
/// The services of the "arrives late" row: the adapters' deadline and the
/// operator's answer window, so that "not found" is final for the old rule
/// after 4 s (their sum), and how long the fake holds the request before
/// carrying it out: past that window, and past the status query after it.
const LATE_DEADLINE_MS: u64 = 2000;
const LATE_ANSWER_WINDOW_MS: u64 = 2000;
const LATE: Duration = Duration::from_secs(10);
/// How long "ends up" may take: reconciliation polls at 2 s, then doubling.
const SETTLE: Duration = Duration::from_secs(30);
/// Every look at the service asks the operator first (`?sync=true`).
const LOOK_EVERY: Duration = Duration::from_millis(1000);

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
    /// component needed. (These cells run on a second service per adapter,
    /// as the deadline and timeout are per component.)
    Trap,
    /// The request waits in the operator's gateway and is carried out only
    /// after every window the service keeps has passed ([`LATE`]); until
    /// then the operator knows nothing of it. (These cells run on a third
    /// service per adapter, whose windows are short.)
    ArrivesLate,
    /// As [`Lie::ArrivesLate`], and the copy the service sends again under
    /// the same id meanwhile is refused (a 429: nothing done for that copy).
    LateCopyRefused,
}

const LIES: [Lie; 7] = [
    Lie::Timeout,
    Lie::AcceptThen5xx,
    Lie::AcceptThenReset,
    Lie::Garbage,
    Lie::Trap,
    Lie::ArrivesLate,
    Lie::LateCopyRefused,
];

/// Which service of an adapter's a cell runs on.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Service {
    Ordinary,
    /// A short component deadline (see [`Lie::Trap`]).
    Trap,
    /// Short deadlines and answer windows (see [`Lie::ArrivesLate`]).
    Late,
}

impl Lie {
    fn name(self) -> &'static str {
        match self {
            Lie::Timeout => "timeout",
            Lie::AcceptThen5xx => "accept then 5xx",
            Lie::AcceptThenReset => "accept then reset",
            Lie::Garbage => "unreadable answer",
            Lie::Trap => "adapter trap",
            Lie::ArrivesLate => "arrives late",
            Lie::LateCopyRefused => "arrives late, its copy refused",
        }
    }

    fn service(self) -> Service {
        match self {
            Lie::Trap => Service::Trap,
            Lie::ArrivesLate | Lie::LateCopyRefused => Service::Late,
            _ => Service::Ordinary,
        }
    }

    /// Whether the request is held in the gateway and carried out late.
    fn arrives_late(self) -> bool {
        matches!(self, Lie::ArrivesLate | Lie::LateCopyRefused)
    }

    /// Why this lie is not run on `op` over `entry`, if it is not.
    fn skips(self, op: Op, entry: &Entry) -> Option<&'static str> {
        let late = if self.arrives_late() {
            Lie::ArrivesLate
        } else {
            self
        };
        match (late, op) {
            (Lie::ArrivesLate, Op::Initiate | Op::CheckoutSubmit)
                if entry.keyless_initiate.is_some() =>
            {
                entry.keyless_initiate
            }
            // What a cancel sends (a status query, a session's expiry) moves
            // no money: held in the gateway, it is a timeout.
            (Lie::ArrivesLate, Op::Cancel) => Some("a cancel's call moves no money"),
            // A code's confirmation is not sent again under its id: unknown
            // to the operator once nothing of ours can be on its way, the
            // payment fails (`operator_not_reached`).
            (Lie::ArrivesLate, Op::ConfirmOtp) => {
                Some("a one-time code's confirmation is not sent again")
            }
            _ => None,
        }
    }

    fn fault(self) -> Fault {
        match self {
            Lie::Timeout | Lie::Trap => Fault::Slow(SLOW),
            Lie::AcceptThen5xx => Fault::AcceptThenStatus(500),
            Lie::AcceptThenReset => Fault::AcceptThenReset,
            Lie::Garbage => Fault::AcceptThenGarbage,
            Lie::ArrivesLate | Lie::LateCopyRefused => Fault::ArrivesLate(LATE),
        }
    }
}

/// One registered adapter's fake and a service whose live environment
/// routes its operators to it.
struct Rig {
    entry: &'static Entry,
    fake: Box<dyn Harness>,
    app: TestApp,
    service: Service,
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
    /// The service reported the operation failed at some point (its event).
    said_failed: bool,
}

impl Look {
    fn agrees(&self) -> bool {
        self.at.settled && self.at.moved == self.reported && (self.at.moved || self.terminal)
    }
}

type Verdict = Result<String, String>;

impl Rig {
    async fn start(entry: &'static Entry, service: Service) -> Rig {
        let trap = service == Service::Trap;
        let limits = |c: &mut ComponentConfig| {
            let timeout = if trap { TRAP_TIMEOUT_MS } else { TIMEOUT_MS };
            c.settings.insert("timeout_ms".into(), timeout.to_string());
            if trap {
                c.deadline_ms = Some(TRAP_DEADLINE_MS);
            }
        };
        // Payouts left unanswered are asked about after the grace (default 60 s).
        // The route's circuit never opens: every cell lies to the same
        // route, and each cell's own operation is what is judged (an open
        // circuit would hold the payouts; routing has its own tests).
        let bulk = |c: &mut mmc_config::Config| {
            let b = c.components.entry("bulk".into()).or_default();
            b.settings.insert("claim_grace_ms".into(), "5000".into());
            c.route_health.min_failures = usize::MAX;
            // Small pools, so that fifteen services and the test beside them
            // stay within a PostgreSQL server's 100 connections.
            c.storage.pool_size = Some(if service == Service::Late { 2 } else { 3 });
            if service == Service::Late {
                c.limits.adapter_deadline_ms = LATE_DEADLINE_MS;
                for component in ["collect", "bulk"] {
                    c.components
                        .entry(component.into())
                        .or_default()
                        .settings
                        .insert(
                            "operator_answer_window_ms".into(),
                            LATE_ANSWER_WINDOW_MS.to_string(),
                        );
                }
            }
        };
        let (fake, app) = registry::rig(entry, limits, bulk).await;
        // The payout cells judge the payout's fault, not a float hold: the
        // wallets hold money before the collection cells bring any in.
        fake.fund_payouts();
        Rig {
            entry,
            fake,
            app,
            service,
        }
    }

    fn inject(&self, endpoint: &'static str, key: &str, lie: Lie) {
        let plumbing = self.fake.plumbing();
        plumbing.inject_for(endpoint, key, lie.fault(), 1);
        if lie == Lie::LateCopyRefused {
            plumbing.inject_for(endpoint, key, Fault::Status(429), 1);
        }
    }

    fn fault_hit(&self, endpoint: &str, key: &str) -> bool {
        self.fake.plumbing().faults_left(endpoint, key) == 0
    }

    /// Distinct ids the operation was created under, at `endpoint`, about `key`.
    fn ids(&self, endpoint: &str, key: &str) -> BTreeSet<String> {
        self.fake.plumbing().ids_for(endpoint, key)
    }
}

/// How a cell whose faulted call was never made says so (and is known to
/// have tested nothing).
const NEVER_HIT: &str = "test: the fault at";

/// One cell: an adapter's rig, an operation, a lie, and a merchant of its
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
    /// Where the cell's fault was injected (endpoint, key).
    injected: std::sync::Mutex<Option<(&'static str, String)>>,
}

impl Cell<'_> {
    fn app(&self) -> &TestApp {
        &self.rig.app
    }

    async fn run(&self) -> Verdict {
        let verdict = match self.op {
            Op::Initiate => self.initiate().await,
            Op::ConfirmOtp => self.confirm_otp().await,
            Op::Cancel => self.cancel().await,
            Op::Refund => self.refund().await,
            Op::Payout => self.payout().await,
            Op::CheckoutSubmit => self.checkout_submit().await,
        }?;
        // Where no copy went out under the same id (an adapter that finds
        // the first by our id instead, or a refund with no status query),
        // the cell is "arrives late" again, and says so.
        let injected = self.injected.lock().unwrap().clone();
        if self.lie == Lie::LateCopyRefused
            && let Some((endpoint, key)) = injected
            && !self.rig.fault_hit(endpoint, &key)
        {
            return Ok(format!("no copy was sent again to refuse; {verdict}"));
        }
        Ok(verdict)
    }

    /// A cell whose faulted call was never made tested nothing. Under the
    /// suite's load a step before it can fail, finally and rightly (a
    /// FedaPay transaction or an MTN token not obtained in time asks the
    /// customer nothing): run once more under a new number; a second miss
    /// fails the cell.
    async fn run_or_again(&self) -> Verdict {
        match self.run().await {
            Err(missed) if missed.starts_with(NEVER_HIT) => {
                let again = Cell {
                    rig: self.rig,
                    op: self.op,
                    lie: self.lie,
                    n: self.n + 500,
                    key: self.key.clone(),
                    approver: self.approver.clone(),
                    injected: Default::default(),
                };
                again
                    .run()
                    .await
                    .map_err(|e| format!("{e} (run again after: {missed})"))
            }
            verdict => verdict,
        }
    }

    /// Injects the cell's fault at `endpoint` for the operation `key` names.
    fn inject(&self, endpoint: &'static str, key: &str) {
        self.rig.inject(endpoint, key, self.lie);
        *self.injected.lock().unwrap() = Some((endpoint, key.to_string()));
    }

    /// From when the cell's outcome may be judged: at once, but for a
    /// request held in the gateway, once it has surely been carried out
    /// (the fault hits within a few seconds of this call).
    fn judged_from(&self) -> Instant {
        match self.lie {
            _ if self.lie.arrives_late() => Instant::now() + LATE + Duration::from_secs(3),
            _ => Instant::now(),
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
        let path = format!("/api/v1/events?payment={id}&limit=100");
        let (_, events) = self.app().get(&self.key, &path).await;
        let said_failed = events["data"]
            .as_array()
            .is_some_and(|a| a.iter().any(|e| e["type"] == "collect.payment.failed"));
        Look {
            said_failed,
            at: self.rig.fake.payment(id),
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
        let look = until_agreed(self.judged_from(), || self.look_at_payment(id)).await;
        let endpoint = self.rig.fake.endpoint(Op::Initiate);
        let ids = self.rig.ids(endpoint, phone).len();
        verdict(&look, ids.max(look.at.records), "payment")
    }

    async fn initiate(&self) -> Verdict {
        let phone = (self.rig.entry.phone)(self.n);
        let endpoint = self.rig.fake.endpoint(Op::Initiate);
        self.inject(endpoint, &phone);
        let body = live_payment(self.rig.entry.country, self.rig.entry.operator, &phone);
        let p = self.create(&body).await?;
        let id = p["id"].as_str().unwrap();
        // Said with the payment as created: what kept its request from the
        // faulted endpoint (a step before it, say).
        self.fault_hit(endpoint, &phone).map_err(|e| {
            let said = json!({"status": p["status"], "failure_code": p["failure_code"], "failure_message": p["failure_message"]});
            format!("{e}; the create answered {said}")
        })?;
        self.approves_once_asked(id).await;
        self.judge_payment(id, &phone).await
    }

    /// The customer approves the request to pay; one held in the gateway
    /// reaches the customer only once a copy of it is carried out.
    async fn approves_once_asked(&self, id: &str) {
        if self.lie.arrives_late() {
            let until = Instant::now() + LATE + Duration::from_secs(5);
            while self.rig.fake.payment(id).records == 0 && Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        self.rig.fake.customer_approves(id).await;
    }

    /// The customer's code for an operator that debits with one: nothing is
    /// sent before the code; the faulted call carries it.
    async fn confirm_otp(&self) -> Verdict {
        let otp = self.rig.entry.otp.as_ref().expect("an OTP operator");
        let phone = (otp.phone)(self.n);
        let body = live_payment(otp.country, otp.operator, &phone);
        let p = self.create(&body).await?;
        let id = p["id"].as_str().unwrap();
        if p["status"] != "awaiting_otp" {
            return Err(format!("setup: payment {} not awaiting_otp", p["status"]));
        }
        let endpoint = self.rig.fake.endpoint(Op::ConfirmOtp);
        self.inject(endpoint, &phone);
        let confirm = format!("/api/v1/collect/payments/{id}/confirm");
        self.app()
            .post(&self.key, &confirm, json!({"otp": otp.code}))
            .await;
        self.fault_hit(endpoint, &phone)?;
        self.judge_payment(id, &phone).await
    }

    /// The fault hits the cancel's call to the operator (MTN, pawaPay: the
    /// status query; Wave: the session's expiry); then the customer
    /// approves. A cancel that succeeded must mean no money moved.
    async fn cancel(&self) -> Verdict {
        let phone = (self.rig.entry.phone)(self.n);
        self.rig.fake.customer_waits(&phone);
        let body = live_payment(self.rig.entry.country, self.rig.entry.operator, &phone);
        let p = self.create(&body).await?;
        let id = p["id"].as_str().unwrap();
        let endpoint = self.rig.fake.endpoint(Op::Cancel);
        let psp_reference = p["psp_reference"].as_str().unwrap_or_default();
        let target = self.rig.fake.target(Op::Cancel, &phone, id, psp_reference);
        self.inject(endpoint, &target);
        let path = format!("/api/v1/collect/payments/{id}/cancel");
        let (status, answer) = self.app().post(&self.key, &path, json!({})).await;
        let asked = self.rig.fault_hit(endpoint, &target);
        let paid = self.rig.fake.customer_approves(id).await;
        let look = until_agreed(self.judged_from(), || self.look_at_payment(id)).await;
        let ids = self
            .rig
            .ids(self.rig.fake.endpoint(Op::Initiate), &phone)
            .len();
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
        let phone = (self.rig.entry.phone)(self.n);
        let body = live_payment(self.rig.entry.country, self.rig.entry.operator, &phone);
        let p = self.create(&body).await?;
        let id = p["id"].as_str().unwrap();
        self.rig.fake.customer_approves(id).await;
        let p = self.until_status(id, &["completed"]).await?;
        let session = p["psp_reference"].as_str().unwrap_or_default().to_string();
        let endpoint = self.rig.fake.endpoint(Op::Refund);
        let target = self.rig.fake.target(Op::Refund, &phone, id, &session);
        self.inject(endpoint, &target);
        let path = format!("/api/v1/collect/payments/{id}/refunds");
        // As a merchant sends it: a 503 says nothing was sent and to send it
        // again with the same Idempotency-Key.
        let key = new_key();
        let (mut status, mut answer) = self.refund_request(&path, &key).await;
        for _ in 0..3 {
            if status != 503 || self.rig.fault_hit(endpoint, &target) {
                break;
            }
            tokio::time::sleep(LOOK_EVERY).await;
            (status, answer) = self.refund_request(&path, &key).await;
        }
        self.fault_hit(endpoint, &target)
            .map_err(|e| format!("{e} (the refund answered {status} {})", brief(&answer)))?;
        let look = until_agreed(self.judged_from(), || self.look_at_refund(id, &session)).await;
        let ids = self.rig.ids(endpoint, &target).len();
        if !self.rig.entry.refund_status_query && look.at.moved && !look.reported && !look.terminal
        {
            return self.refund_held_for_review(id, &look, ids).await;
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

    async fn refund_request(&self, path: &str, idempotency_key: &str) -> (u16, Value) {
        let resp = self
            .app()
            .client
            .post(self.app().url(path))
            .bearer_auth(&self.key)
            .header("Idempotency-Key", idempotency_key)
            .json(&json!({}))
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// A provider without a refund status query (Wave): a refund whose
    /// answer was lost cannot be settled by asking. What must hold is that
    /// nothing is lost or doubled: the refund stays `pending` (never
    /// failed), its amount stays reserved (a second refund is refused), one
    /// refund reached the provider, and the service counted it for a person
    /// to check in the provider's portal.
    async fn refund_held_for_review(&self, id: &str, look: &Look, ids: usize) -> Verdict {
        if ids > 1 || look.at.records > 1 {
            return Err(format!("{ids} refunds sent to the provider for one"));
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
                return Err("the pending refund was never flagged for review".into());
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
        Ok(format!(
            "money moved, service says {}: held for review (no refund status query), second refund refused",
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
            said_failed: failed,
            at: self.rig.fake.refund(id, session),
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
        let phone = (self.rig.entry.phone)(self.n);
        let endpoint = self.rig.fake.endpoint(Op::Payout);
        self.inject(endpoint, &phone);
        let item = json!({"beneficiary_name": "Awa Koné", "phone": phone, "amount": 2500,
                          "currency": "XOF", "reference": format!("cell-{}", self.n),
                          "operator": self.rig.entry.operator});
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
        let look = until_agreed(self.judged_from(), || self.look_at_item(batch_id, &phone)).await;
        if let Err(never) = self.fault_hit(endpoint, &phone) {
            // Why the payout was not sent, as the batch says it.
            let (_, b) = self
                .app()
                .get(&self.key, &format!("/api/v1/bulk-payments/{batch_id}/"))
                .await;
            return Err(format!(
                "{never}; batch {}, insufficient_float {}",
                b["status"], b["insufficient_float"]
            ));
        }
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
            // Failed, or failed once and then completed by a late success.
            said_failed: status == "failed" || item["review"]["code"] == "late_success",
            at: self.rig.fake.payout(phone),
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
        let phone = (self.rig.entry.phone)(self.n);
        let hosted = json!({"reference": format!("h-{}", uuid::Uuid::new_v4()), "amount": 1500,
                            "currency": "XOF", "country": self.rig.entry.country, "mode": "hosted"});
        let p = self.create(&hosted).await?;
        let id = p["id"].as_str().unwrap();
        let endpoint = self.rig.fake.endpoint(Op::CheckoutSubmit);
        self.inject(endpoint, &phone);
        let page_url = self.app().url(&format!("/checkout/{id}"));
        let form = [
            ("operator", self.rig.entry.operator),
            ("phone", phone.as_str()),
        ];
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
        self.approves_once_asked(id).await;
        let verdict = self.judge_payment(id, &phone).await;
        if form_again {
            return Err(format!(
                "the form is shown again after the submit; {}",
                verdict.unwrap_or_else(|e| e)
            ));
        }
        verdict
    }

    /// The targeted fault must have been used: otherwise the cell tested
    /// nothing. (The refusal of a copy comes later: see [`Cell::run`].)
    fn fault_hit(&self, endpoint: &str, key: &str) -> Result<(), String> {
        let left = self.rig.fake.plumbing().faults_left(endpoint, key);
        if left == 0 || (self.lie == Lie::LateCopyRefused && left == 1) {
            Ok(())
        } else {
            Err(format!("{NEVER_HIT} {endpoint} never hit"))
        }
    }
}

/// Looks until the operator has settled and the service agrees with it,
/// or [`SETTLE`] passes; returns the last look. An agreement seen before
/// `not_before` does not count (a request held in the operator's gateway
/// may still be carried out until then).
async fn until_agreed<F, Fut>(not_before: Instant, mut look: F) -> Look
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Look>,
{
    let until = Instant::now().max(not_before) + SETTLE;
    loop {
        let l = look().await;
        let now = Instant::now();
        if (l.agrees() && now >= not_before) || now >= until {
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
    if look.at.moved && look.said_failed {
        return Err(format!(
            "money moved, and the service reported it failed on the way; now {}",
            look.state
        ));
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

/// How many calls of the rig's adapter the host killed at its deadline.
async fn deadline_hits(rig: &Rig) -> f64 {
    let labels = format!("component=\"{}\",outcome=\"deadline\"", rig.entry.name);
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
#[service_test]
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

#[service_test]
async fn fault_matrix_unknown_outcomes_never_lose_or_double_money() {
    let started = Instant::now();
    // Three rigs per registered adapter: the ordinary faults, the traps,
    // and the requests that arrive late.
    let rigs = futures::future::join_all(ADAPTERS.iter().flat_map(|entry| {
        [Service::Ordinary, Service::Trap, Service::Late].map(|s| Rig::start(entry, s))
    }))
    .await;
    let rig = |entry: &Entry, service: Service| {
        rigs.iter()
            .find(|r| std::ptr::eq(r.entry, entry) && r.service == service)
            .expect("a rig per adapter and kind")
    };

    // Every applicable cell, as a concurrent task.
    let mut cells = Vec::new();
    for (o, op) in OPS.into_iter().enumerate() {
        for (l, lie) in LIES.into_iter().enumerate() {
            for &entry in ADAPTERS {
                if entry.supports(op).is_err() || lie.skips(op, entry).is_some() {
                    continue;
                }
                let rig = rig(entry, lie.service());
                let name = format!("{}-{}-{}", op.name(), lie.name(), entry.name);
                let (key, approver) = rig.app.maker_and_checker(&name);
                cells.push(Cell {
                    rig,
                    op,
                    lie,
                    n: o * 10 + l,
                    key,
                    approver,
                    injected: Default::default(),
                });
            }
        }
    }
    let verdicts = futures::future::join_all(cells.iter().map(|c| c.run_or_again())).await;

    let find = |op: Op, lie: Lie, entry: &Entry| {
        cells
            .iter()
            .zip(&verdicts)
            .find(|(c, _)| c.op == op && c.lie == lie && std::ptr::eq(c.rig.entry, entry))
            .map(|(_, v)| v)
    };
    let names: Vec<&str> = ADAPTERS.iter().map(|e| e.name).collect();
    let mut table = format!(
        "| operation × fault | {} |\n|---|{}\n",
        names.join(" | "),
        "---|".repeat(names.len())
    );
    let mut details = String::new();
    let mut failures = 0;
    for op in OPS {
        for lie in LIES {
            table.push_str(&format!("| {} × {} |", op.name(), lie.name()));
            for &entry in ADAPTERS {
                let skipped = entry.supports(op).err().or(lie.skips(op, entry));
                let cell = match (skipped, find(op, lie, entry)) {
                    (Some(why), _) => format!("n/a ({why})"),
                    (None, Some(Ok(note))) => {
                        details.push_str(&format!(
                            "- {} × {} × {}: pass — {note}\n",
                            op.name(),
                            lie.name(),
                            entry.name
                        ));
                        if note.starts_with("no copy was sent again") {
                            "pass (no copy sent again)".to_string()
                        } else {
                            "pass".to_string()
                        }
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
    for &entry in ADAPTERS {
        let wanted = cells
            .iter()
            .filter(|c| c.lie == Lie::Trap && std::ptr::eq(c.rig.entry, entry))
            .count();
        let hits = deadline_hits(rig(entry, Service::Trap)).await;
        if hits < wanted as f64 {
            failures += 1;
        }
        traps.push(format!("{} {hits}/{wanted}", entry.name));
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
