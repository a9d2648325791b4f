//! Failover across two routes: the fault matrix of a request to pay and of
//! a bulk payout, with the first route failing in each way. The service
//! routes MTN Benin to two providers that reach it, `[first, second]`, each
//! with its fake; the first one's fake fails the request to pay, or the
//! payout, in one way per cell.
//!
//! - **It refused** (our own 401, 403, 404 or 429: nothing was done there):
//!   the payment or payout goes through the second route; the money moves
//!   there, once, and the first holds nothing that moved.
//! - **It lied** (did the work, then timed out, answered a 5xx, dropped the
//!   connection or answered garbage): the outcome is unknown, so the payment
//!   or payout stays on the first route until that operator answers (a
//!   payout stays `processing` meanwhile); the second never hears of it.
//!
//! In every cell: exactly one money movement in total, and the service
//! reports it. A payment's route says where it went and what was tried; a
//! payout is a one-item batch created and validated through the API and
//! paid by the payouts job, its route and what was tried read from its
//! operator calls (the admin API), its attempts one per route it was sent
//! through.

use std::time::{Duration, Instant};

use mmc_config::{Candidate, ComponentConfig, RouteSpec};
use serde_json::{Value, json};

use crate::live_payment;
use crate::registry::{AtOperator, Entry, Harness, Op};
use crate::support::fakes::{Fault, REFUSED_BECAUSE_OF_US};
use crate::support::*;

/// The operator every route here reaches, and the numbers its cells pay from.
const OPERATOR: &str = "mtn-bj";
fn phone(n: usize) -> String {
    format!("+2290166{:06}", 800_000 + n)
}

/// The providers that reach MTN Benin, paired so that each is once first
/// and once second.
fn pairs() -> [(&'static Entry, &'static Entry); 3] {
    let (momo, pawapay, fedapay) = (
        &crate::momo::ENTRY,
        &crate::pawapay::ENTRY,
        &crate::fedapay::ENTRY,
    );
    [(momo, pawapay), (pawapay, fedapay), (fedapay, momo)]
}

/// How the first route fails its request to pay.
#[derive(Clone, Debug)]
enum Failing {
    Refused(u16),
    Lie(Fault),
}

impl Failing {
    fn all() -> Vec<Failing> {
        let mut all: Vec<Failing> = REFUSED_BECAUSE_OF_US
            .iter()
            .map(|s| Failing::Refused(*s))
            .collect();
        all.extend([
            Failing::Lie(Fault::Slow(Duration::from_millis(3000))),
            Failing::Lie(Fault::AcceptThenStatus(500)),
            Failing::Lie(Fault::AcceptThenReset),
            Failing::Lie(Fault::AcceptThenGarbage),
        ]);
        all
    }

    fn fault(&self) -> Fault {
        match self {
            Failing::Refused(status) => Fault::Status(*status),
            Failing::Lie(f) => f.clone(),
        }
    }
}

/// Two fakes and a service routing MTN Benin to `[first, second]`.
pub struct TwoRoutes {
    pub first: Box<dyn Harness>,
    pub second: Box<dyn Harness>,
    pub app: TestApp,
}

impl TwoRoutes {
    /// `first_config` adjusts the first adapter's configuration; `health`
    /// the routes' health settings (the matrix keeps every route closed, to
    /// see each cell's own failover).
    pub async fn start(
        first: &Entry,
        second: &Entry,
        first_config: impl FnOnce(&mut ComponentConfig),
        health: impl FnOnce(&mut mmc_config::RouteHealthConfig),
    ) -> TwoRoutes {
        let (a, b) = ((first.start)().await, (second.start)().await);
        // Both serve MTN Benin here (aggregators name the operators they serve).
        let config = |fake: &dyn Harness| {
            let mut c: ComponentConfig = fake.component_config();
            c.settings.insert("timeout_ms".into(), "1000".into());
            c.settings.insert("operators".into(), OPERATOR.into());
            c
        };
        let (mut ca, cb) = (config(a.as_ref()), config(b.as_ref()));
        first_config(&mut ca);
        let app = spawn_app_with(|c| {
            c.components.insert(first.name.into(), ca);
            c.components.insert(second.name.into(), cb);
            let routes = vec![
                Candidate::Name(first.name.into()),
                Candidate::Name(second.name.into()),
            ];
            let live = c.routing.entry("live".into()).or_default();
            live.insert(OPERATOR.into(), RouteSpec::List(routes));
            health(&mut c.route_health);
            // Hundreds of payments a second from one key, in the scenario.
            c.rate_limit.per_second = 0.0;
            // A payout's calls are read from the admin API.
            c.admin_token = Some(ADMIN.into());
            c.rate_limit.per_client_per_second = 0.0;
        })
        .await;
        // Each provider's notifications name its route, as its address says.
        for (fake, entry) in [(&a, first), (&b, second)] {
            let url = format!(
                "{}/api/v1/psp/{OPERATOR}/callback?environment=live&via={}",
                app.base, entry.name
            );
            *fake.plumbing().callback_url.lock() = Some(url);
        }
        TwoRoutes {
            first: a,
            second: b,
            app,
        }
    }

    /// Requests to pay `phone` that reached `fake`.
    pub fn asked(fake: &dyn Harness, phone: &str) -> usize {
        let endpoint = fake.endpoint(Op::Initiate);
        let target = fake.target(Op::Initiate, phone, "", "");
        fake.plumbing().requests_for(endpoint, &target).len()
    }

    pub async fn route(&self, key: &str, id: &str) -> Value {
        let path = format!("/api/v1/collect/payments/{id}/route");
        let (status, r) = self.app.get(key, &path).await;
        assert_eq!(status, 200, "{r}");
        r
    }
}

async fn read(app: &TestApp, key: &str, id: &str) -> Value {
    let path = format!("/api/v1/collect/payments/{id}?sync=true");
    app.get(key, &path).await.1
}

/// One cell: returns what happened, or why it broke the rule.
async fn cell(
    rig: &TwoRoutes,
    names: (&str, &str),
    failing: &Failing,
    n: usize,
) -> Result<String, String> {
    let (_, _, key) = rig.app.merchant(&format!("failover {n}"));
    let phone = phone(n);
    let refused = matches!(failing, Failing::Refused(_));
    let (first, second) = (rig.first.as_ref(), rig.second.as_ref());
    let target = first.target(Op::Initiate, &phone, "", "");
    // A refusal twice: an adapter holding a token renews it after a 401 and
    // sends once more (MTN's tokens expire), and is refused again.
    let times = if refused { 2 } else { 1 };
    first.plumbing().inject_for(
        first.endpoint(Op::Initiate),
        &target,
        failing.fault(),
        times,
    );
    let body = live_payment("BJ", OPERATOR, &phone);
    let (status, p) = rig.app.create(&key, &new_key(), &body).await;
    let id = match p["id"].as_str() {
        Some(id) if status == 201 => id.to_string(),
        _ => return Err(format!("create answered {status}: {p}")),
    };
    // The customer approves wherever the request reached.
    let paying = if refused { second } else { first };
    paying.customer_approves(&id).await;
    let until = Instant::now() + Duration::from_secs(30);
    let p = loop {
        let p = read(&rig.app, &key, &id).await;
        if p["status"] == "completed" || Instant::now() >= until {
            break p;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    one_movement(
        "movements",
        refused,
        &first.payment(&id),
        &second.payment(&id),
    )?;
    if p["status"] != "completed" {
        return Err(format!("money moved, the service says {}", p["status"]));
    }
    let asked_second = TwoRoutes::asked(second, &phone);
    let route = rig.route(&key, &id).await;
    let (want, tried) = if refused {
        (names.1, json!([names.0]))
    } else {
        (names.0, json!([]))
    };
    let tried_now: Vec<&Value> = route["tried"]
        .as_array()
        .map(|t| t.iter().map(|t| &t["adapter"]).collect())
        .unwrap_or_default();
    if route["adapter"] != want || json!(tried_now) != tried {
        return Err(format!("route: {route}"));
    }
    if !refused && asked_second != 0 {
        return Err(format!(
            "after an unknown outcome the second route was asked {asked_second} times"
        ));
    }
    Ok(format!(
        "through {want}; {}",
        route["explanation"]["reason"].as_str().unwrap_or("?")
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_moves_money_once_whichever_way_the_first_route_fails() {
    let mut matrix = Matrix::default();
    for (p, (first, second)) in pairs().into_iter().enumerate() {
        // Every route stays closed: each cell shows its own failover.
        let rig = TwoRoutes::start(first, second, |_| {}, |h| h.min_failures = 1_000).await;
        let cells = Failing::all().into_iter().enumerate().map(|(i, failing)| {
            let rig = &rig;
            async move {
                let n = p * 100 + i;
                let verdict = cell(rig, (first.name, second.name), &failing, n).await;
                (failing, verdict)
            }
        });
        for (failing, verdict) in futures::future::join_all(cells).await {
            matrix.cell((first.name, second.name), &failing, verdict);
        }
    }
    matrix.conclude("failover-matrix.md");
}

/// Exactly one money movement across the two providers, and at the one the
/// rule says: the second when the first refused, else the first. A provider
/// may hold a record of a refused request (FedaPay creates the transaction
/// or payout, then refuses to start it): it must never move money.
fn one_movement(
    what: &str,
    refused: bool,
    at_first: &AtOperator,
    at_second: &AtOperator,
) -> Result<(), String> {
    let moved = usize::from(at_first.moved) + usize::from(at_second.moved);
    let (paying_at, other) = if refused {
        (at_second, at_first)
    } else {
        (at_first, at_second)
    };
    if moved != 1 || paying_at.records != 1 || other.moved || !other.settled {
        return Err(format!(
            "{moved} {what}: first {at_first:?}, second {at_second:?}"
        ));
    }
    Ok(())
}

/// A two-route matrix's report: a row per cell, and the cells that failed.
struct Matrix {
    report: Vec<String>,
    failures: Vec<String>,
}

impl Default for Matrix {
    fn default() -> Matrix {
        Matrix {
            report: vec![
                "| first → second | first route | outcome |".into(),
                "|---|---|---|".into(),
            ],
            failures: Vec::new(),
        }
    }
}

impl Matrix {
    fn cell(
        &mut self,
        (first, second): (&str, &str),
        failing: &Failing,
        verdict: Result<String, String>,
    ) {
        let (mark, text) = match verdict {
            Ok(t) => ("ok", t),
            Err(e) => {
                self.failures
                    .push(format!("{first} → {second}, {failing:?}: {e}"));
                ("FAILED", e)
            }
        };
        self.report.push(format!(
            "| {first} → {second} | {failing:?} | {mark}: {text} |"
        ));
    }

    /// Prints the table, keeps it as `target/<file>`, and fails on any failed cell.
    fn conclude(self, file: &str) {
        let table = self.report.join("\n");
        println!("{table}");
        let _ = std::fs::write(target_dir().join(file), format!("{table}\n"));
        assert!(self.failures.is_empty(), "{:#?}", self.failures);
    }
}

/// A batch of `items` created through the API; its id, and whether it
/// waits for validation.
async fn create_batch(app: &TestApp, key: &str, items: &[Value]) -> Result<(String, bool), String> {
    let resp = app
        .client
        .post(app.url("/api/v1/bulk-payments/"))
        .bearer_auth(key)
        .header("Idempotency-Key", new_key())
        .json(&json!({"name": "Failover", "items": items}))
        .send()
        .await
        .map_err(|e| format!("create: {e}"))?;
    let status = resp.status().as_u16();
    let b: Value = resp.json().await.unwrap_or(Value::Null);
    match b["id"].as_str() {
        Some(id) if status == 201 => Ok((id.to_string(), b["requires_validation"] == true)),
        _ => Err(format!("create answered {status}: {b}")),
    }
}

/// Approves a batch with a second key (maker-checker).
async fn validate(app: &TestApp, approver: &str, batch_id: &str) -> Result<(), String> {
    let path = format!("/api/v1/bulk-payments/{batch_id}/validate/");
    match app.post(approver, &path, json!({})).await {
        (200, _) => Ok(()),
        (status, v) => Err(format!("validate answered {status}: {v}")),
    }
}

/// A bulk payout's operator calls, as the admin API lists them (oldest
/// first): `(operation, adapter, outcome)`.
async fn calls(app: &TestApp, item_id: &str) -> Vec<(String, String, String)> {
    calls_of(app, item_id)
        .await
        .iter()
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (text("operation"), text("adapter"), text("outcome"))
        })
        .collect()
}

/// One payout cell: a one-item batch to `phone(n)`, created through the
/// API, validated by a second key (maker-checker), paid by the payouts job;
/// returns what happened, or why it broke the rule.
async fn payout_cell(
    rig: &TwoRoutes,
    names: (&str, &str),
    failing: &Failing,
    n: usize,
) -> Result<String, String> {
    let (key, approver) = rig.app.maker_and_checker(&format!("payout failover {n}"));
    let phone = phone(n);
    let refused = matches!(failing, Failing::Refused(_));
    let (first, second) = (rig.first.as_ref(), rig.second.as_ref());
    let endpoint = first.endpoint(Op::Payout);
    let target = first.target(Op::Payout, &phone, "", "");
    // Twice for a refusal, as for a request to pay: a token renewed after a
    // 401 is refused again.
    let times = if refused { 2 } else { 1 };
    first
        .plumbing()
        .inject_for(endpoint, &target, failing.fault(), times);
    let item = json!({"beneficiary_name": "Awa Koné", "phone": phone, "amount": 2500,
                      "currency": "XOF", "reference": format!("failover-{n}"),
                      "operator": OPERATOR});
    let (batch_id, needs_validation) = create_batch(&rig.app, &key, &[item]).await?;
    if needs_validation {
        validate(&rig.app, &approver, &batch_id).await?;
    }
    // Every status the item shows on its way: an unknown outcome is never
    // `failed`, and the item is never pending again once claimed.
    let items = format!("/api/v1/bulk-payments/{batch_id}/items/");
    let mut seen: Vec<String> = Vec::new();
    let until = Instant::now() + Duration::from_secs(30);
    let item = loop {
        let (_, page) = rig.app.get(&key, &items).await;
        let item = page["results"][0].clone();
        let status = item["status"].as_str().unwrap_or("unreadable").to_string();
        if seen.last() != Some(&status) {
            seen.push(status.clone());
        }
        if matches!(status.as_str(), "completed" | "failed") || Instant::now() >= until {
            break item;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    if first.plumbing().faults_left(endpoint, &target) == times {
        return Err(format!("test: the fault at {endpoint} never hit"));
    }
    let (at_first, at_second) = (first.payout(&phone), second.payout(&phone));
    one_movement("payouts", refused, &at_first, &at_second)?;
    if item["status"] != "completed" {
        return Err(format!(
            "money moved, the item is {}: {item}",
            item["status"]
        ));
    }
    // Lied to, it stays processing until that operator answers (asked
    // 2 s later at the earliest); refused, it may complete at once.
    let path: Vec<&str> = seen.iter().map(String::as_str).collect();
    let claimed: Vec<&str> = path
        .iter()
        .copied()
        .skip_while(|s| *s == "pending")
        .collect();
    let ways: &[&[&str]] = if refused {
        &[&["processing", "completed"], &["completed"]]
    } else {
        &[&["processing", "completed"]]
    };
    if !ways.contains(&claimed.as_slice()) {
        return Err(format!("the item went {}", path.join(" → ")));
    }
    // One attempt per route it was sent through.
    let attempts = if refused { 2 } else { 1 };
    if item["attempts"] != attempts {
        return Err(format!("{} attempts: {item}", item["attempts"]));
    }
    // Its route and what was tried, from its calls: the route a payout was
    // sent through last, the routes before it that answered nothing was done.
    let item_id = item["id"].as_str().unwrap_or_default();
    let (want_route, want_tried) = if refused {
        (names.1, vec![names.0])
    } else {
        (names.0, vec![])
    };
    let until = Instant::now() + Duration::from_secs(5);
    let trail = loop {
        // The audit trail is written behind the calls.
        let trail = calls(&rig.app, item_id).await;
        let paid = trail.iter().any(|(op, adapter, outcome)| {
            op == "payout" && adapter == want_route && outcome == "ok"
        });
        if paid || Instant::now() >= until {
            break trail;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let sent: Vec<&(String, String, String)> =
        trail.iter().filter(|(op, _, _)| op == "payout").collect();
    let route = sent.last().map(|(_, adapter, _)| adapter.as_str());
    let tried: Vec<&str> = sent[..sent.len().saturating_sub(1)]
        .iter()
        .filter(|(_, _, outcome)| {
            ["rejected", "not_sent", "not_supported"].contains(&outcome.as_str())
        })
        .map(|(_, adapter, _)| adapter.as_str())
        .collect();
    if route != Some(want_route) || tried != want_tried || sent.len() != want_tried.len() + 1 {
        return Err(format!("calls: {trail:?}"));
    }
    let failover = trail
        .iter()
        .any(|(op, adapter, outcome)| op == "route" && adapter == names.1 && outcome == "failover");
    if refused != failover {
        return Err(format!("route choices: {trail:?}"));
    }
    // After an unknown outcome the second provider never hears of it.
    if !refused {
        let asked = second
            .plumbing()
            .requests_for(second.endpoint(Op::Payout), &phone)
            .len();
        let named = trail.iter().any(|(_, adapter, _)| adapter == names.1);
        if asked != 0 || at_second.records != 0 || named {
            return Err(format!(
                "after an unknown outcome the second route was asked: {asked} requests, {at_second:?}, calls {trail:?}"
            ));
        }
    }
    let first_outcome = &sent[0].2;
    Ok(format!(
        "through {want_route}; first route answered {first_outcome}; item {}",
        path.join(" → ")
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_pays_out_once_whichever_way_the_first_route_fails() {
    // The pairs run at once, each with its fake and service, and so do the
    // cells of each (the payouts job sends one payout at a time).
    let pairs = pairs()
        .into_iter()
        .enumerate()
        .map(|(p, (first, second))| async move {
            // Every route stays closed: an open circuit would hold the payouts
            // (a payout waits for a route), and each cell shows its own failover.
            let rig = TwoRoutes::start(first, second, |_| {}, |h| h.min_failures = 1_000).await;
            let cells = Failing::all().into_iter().enumerate().map(|(i, failing)| {
                let rig = &rig;
                async move {
                    let n = 500 + p * 100 + i;
                    let verdict = payout_cell(rig, (first.name, second.name), &failing, n).await;
                    (failing, verdict)
                }
            });
            let verdicts = futures::future::join_all(cells).await;
            (first, second, verdicts)
        });
    let mut matrix = Matrix::default();
    for (first, second, verdicts) in futures::future::join_all(pairs).await {
        for (failing, verdict) in verdicts {
            matrix.cell((first.name, second.name), &failing, verdict);
        }
    }
    matrix.conclude("failover-payout-matrix.md");
}

/// A batch whose operator no route can take now (its routes replaced by
/// one that is not loaded) waits: its items are held, and the batch says
/// how many and why. Once its routes are back, they go by themselves, once
/// each, and the batch completes without `held`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_batch_says_how_many_wait_and_why_then_completes_when_a_route_returns() {
    let (first, second) = (&crate::momo::ENTRY, &crate::pawapay::ENTRY);
    let rig = TwoRoutes::start(first, second, |_| {}, |_| {}).await;
    let (key, approver) = rig.app.maker_and_checker("held batch");
    let phones = [phone(995), phone(996)];
    let items: Vec<Value> = phones
        .iter()
        .enumerate()
        .map(|(i, phone)| {
            json!({"beneficiary_name": "Awa Koné", "phone": phone, "amount": 2500,
                   "currency": "XOF", "reference": format!("held-{i}"), "operator": OPERATOR})
        })
        .collect();
    let (id, needs_validation) = create_batch(&rig.app, &key, &items).await.unwrap();
    // Its routes go away before it is paid.
    let routes = format!("/admin/v1/routes/live/{OPERATOR}");
    let body = json!({"routes": ["ghost"], "note": "MTN Benin unreachable"});
    let (status, r) = admin(
        &rig.app,
        reqwest::Method::PUT,
        &routes,
        Some(body.to_string().into_bytes()),
    )
    .await;
    assert_eq!(status, 200, "{r}");
    if needs_validation {
        validate(&rig.app, &approver, &id).await.unwrap();
    }
    let path = format!("/api/v1/bulk-payments/{id}/");
    let started = Instant::now();
    let batch = loop {
        let (status, batch) = rig.app.get(&key, &path).await;
        assert_eq!(status, 200, "{batch}");
        if batch["held"]["count"] == 2 {
            break batch;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "{batch}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(batch["status"], "processing", "{batch}");
    assert_eq!(batch["items_by_status"]["pending"], 2, "{batch}");
    assert!(batch["held"]["since"].is_string(), "{batch}");
    let reasons = batch["held"]["reasons"].as_array().unwrap();
    assert_eq!(reasons.len(), 1, "{batch}");
    assert_eq!(reasons[0]["count"], 2, "{batch}");
    let reason = reasons[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("no provider can take a payout to {OPERATOR}")),
        "{reason}"
    );
    // Held: nothing was sent anywhere.
    for phone in &phones {
        for fake in [&rig.first, &rig.second] {
            assert_eq!(fake.payout(phone).records, 0, "{phone}");
        }
    }

    // Its routes again (the configuration's): the payouts go by themselves,
    // once each.
    let rollback = "/admin/v1/routes/rollback";
    let (status, r) = admin(&rig.app, reqwest::Method::POST, rollback, None).await;
    assert_eq!(status, 200, "{r}");
    let started = Instant::now();
    let batch = loop {
        let (_, batch) = rig.app.get(&key, &path).await;
        if batch["status"] == "completed" {
            break batch;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "{batch}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert!(batch.get("held").is_none(), "{batch}");
    assert_eq!(batch["items_by_status"]["completed"], 2, "{batch}");
    for phone in &phones {
        let (a, b) = (rig.first.payout(phone), rig.second.payout(phone));
        assert!(
            a.moved && a.records == 1 && b.records == 0,
            "{phone}: first {a:?}, second {b:?}"
        );
    }
}

/// A route that cannot send (its credentials are missing) answers that
/// nothing was sent: the payment takes the next route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_that_sends_nothing_passes_the_payment_on() {
    let (first, second) = (&crate::momo::ENTRY, &crate::pawapay::ENTRY);
    let rig = TwoRoutes::start(first, second, |c| c.secrets.clear(), |_| {}).await;
    let (_, _, key) = rig.app.merchant("not sent");
    let phone = phone(990);
    let p = crate::create(&rig.app, &key, &live_payment("BJ", OPERATOR, &phone)).await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(TwoRoutes::asked(rig.first.as_ref(), &phone), 0);
    assert_eq!(TwoRoutes::asked(rig.second.as_ref(), &phone), 1);
    let route = rig.route(&key, id).await;
    assert_eq!(route["adapter"], second.name, "{route}");
    assert_eq!(route["tried"][0]["adapter"], first.name, "{route}");
    assert_eq!(route["explanation"]["reason"], "failover", "{route}");
    rig.second.customer_approves(id).await;
    crate::wait_for(&rig.app, &key, id, "completed", Duration::from_secs(20)).await;
}

/// Failures open the first route's circuit: new payments skip it before
/// anything is sent, `/metrics` and the catalogue show it, and once the
/// circuit may close, one trial payment goes to it; its success closes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_circuit_is_skipped_then_a_trial_closes_it() {
    let (first, second) = (&crate::momo::ENTRY, &crate::pawapay::ENTRY);
    let rig = TwoRoutes::start(
        first,
        second,
        |_| {},
        |h| {
            h.min_failures = 3;
            h.open_ms = 3_000;
            h.trial_every_ms = 60_000;
        },
    )
    .await;
    let (_, _, key) = rig.app.merchant("circuit");
    // Three refusals in a row (403: a 401 with a cached token makes MTN's
    // adapter fetch a new one and try again, as its tokens expire): each
    // payment fails over, the circuit opens.
    for n in 0..3 {
        let phone = phone(900 + n);
        let target = rig.first.target(Op::Initiate, &phone, "", "");
        let endpoint = rig.first.endpoint(Op::Initiate);
        rig.first
            .plumbing()
            .inject_for(endpoint, &target, Fault::Status(403), 1);
        let p = crate::create(&rig.app, &key, &live_payment("BJ", OPERATOR, &phone)).await;
        let route = rig.route(&key, p["id"].as_str().unwrap()).await;
        assert_eq!(route["adapter"], second.name, "{route}");
    }
    let metrics = rig.app.metrics().await;
    let open = format!(
        "mmc_route_state{{environment=\"live\",adapter=\"{}\",operator=\"{OPERATOR}\"}} 3",
        first.name
    );
    assert!(metrics.contains(&open), "{metrics}");
    // Skipped before sending: the first route's fake hears nothing of it.
    let phone_skipped = phone(903);
    let p = crate::create(
        &rig.app,
        &key,
        &live_payment("BJ", OPERATOR, &phone_skipped),
    )
    .await;
    let route = rig.route(&key, p["id"].as_str().unwrap()).await;
    assert_eq!(route["adapter"], second.name, "{route}");
    assert_eq!(route["explanation"]["reason"], "next", "{route}");
    let note = route["explanation"]["candidates"][0]["note"]
        .as_str()
        .unwrap();
    assert!(note.starts_with("circuit open: 3 of its last 3"), "{note}");
    assert_eq!(TwoRoutes::asked(rig.first.as_ref(), &phone_skipped), 0);
    // After `open_ms`, one trial: it succeeds and the route is healthy again.
    tokio::time::sleep(Duration::from_millis(3_200)).await;
    let phone_trial = phone(904);
    let p = crate::create(&rig.app, &key, &live_payment("BJ", OPERATOR, &phone_trial)).await;
    let route = rig.route(&key, p["id"].as_str().unwrap()).await;
    assert_eq!(route["adapter"], first.name, "{route}");
    assert_eq!(route["explanation"]["reason"], "trial", "{route}");
    let phone_after = phone(905);
    let p = crate::create(&rig.app, &key, &live_payment("BJ", OPERATOR, &phone_after)).await;
    let route = rig.route(&key, p["id"].as_str().unwrap()).await;
    assert_eq!(
        (&route["adapter"], &route["explanation"]["reason"]),
        (&json!(first.name), &json!("preferred")),
        "{route}"
    );
    let choices = rig.app.metrics().await;
    for reason in ["failover", "next", "trial", "preferred"] {
        assert!(
            choices.contains(&format!("reason=\"{reason}\"")),
            "mmc_route_choices_total lacks {reason}: {choices}"
        );
    }
}

/// The first provider goes down in the middle of 1,000 payments (every
/// request to pay answered 503 from then on: an unknown outcome, as far as
/// the service can tell). The few payments it took then stay in progress,
/// asked about until it answers; its circuit opens, and every later payment
/// goes through the second route. Measured: the share completed, how long
/// the switch took, and duplicates (none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_going_down_mid_run_switches_routes_without_a_duplicate() {
    use futures::StreamExt;
    const PAYMENTS: usize = 1_000;
    const DOWN_AT: usize = 300;
    let (first, second) = (&crate::momo::ENTRY, &crate::pawapay::ENTRY);
    let rig = TwoRoutes::start(first, second, |_| {}, |_| {}).await;
    let (_, _, key) = rig.app.merchant("scenario");
    let down_since = parking_lot::Mutex::new(None::<Instant>);
    let started = Instant::now();
    let created: Vec<(usize, String, Instant)> = futures::stream::iter(0..PAYMENTS)
        .map(|i| {
            let (rig, key, down_since) = (&rig, &key, &down_since);
            async move {
                if i == DOWN_AT {
                    let endpoint = rig.first.endpoint(Op::Initiate);
                    rig.first
                        .plumbing()
                        .inject(endpoint, Fault::Status(503), 1_000_000);
                    *down_since.lock() = Some(Instant::now());
                }
                let body = live_payment("BJ", OPERATOR, &phone(10_000 + i));
                let (status, p) = rig.app.create(key, &new_key(), &body).await;
                assert_eq!(status, 201, "payment {i}: {p}");
                (i, p["id"].as_str().unwrap().to_string(), Instant::now())
            }
        })
        .buffer_unordered(8)
        .collect()
        .await;
    let run = started.elapsed();
    let down_since = down_since.lock().expect("the provider went down");
    // Every payment a provider holds settles there (300 ms) and is then
    // reported; wait for the service to report each of them.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut waiting: Vec<&String> = created.iter().map(|(_, id, _)| id).collect();
    while !waiting.is_empty() && Instant::now() < deadline {
        let mut still = Vec::new();
        for id in waiting {
            let held = rig.first.payment(id).records + rig.second.payment(id).records > 0;
            if held && read(&rig.app, &key, id).await["status"] != "completed" {
                still.push(id);
            }
        }
        waiting = still;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let (mut completed, mut in_progress, mut not_reached) = (0, 0, 0);
    let (mut duplicates, mut switched_at) = (0, None);
    let mut failed = Vec::new();
    for (i, id, at) in &created {
        let (a, b) = (rig.first.payment(id), rig.second.payment(id));
        if a.records + b.records > 1 {
            duplicates += 1;
        }
        if b.records == 1 && *i >= DOWN_AT {
            let after = at.saturating_duration_since(down_since);
            switched_at = Some(switched_at.map_or(after, |s: Duration| s.min(after)));
        }
        let p = read(&rig.app, &key, id).await;
        match (p["status"].as_str(), p["failure_code"].as_str()) {
            (Some("completed"), _) => completed += 1,
            (Some("pending" | "processing"), _) => in_progress += 1,
            // The operator said it never got it, once nothing could be in
            // flight: an explicit answer, and nothing at either provider.
            (Some("failed"), Some("operator_not_reached")) if a.records + b.records == 0 => {
                not_reached += 1
            }
            (other, code) => failed.push(format!("{i} {id}: {other:?} {code:?}")),
        }
    }
    let share = completed as f64 * 100.0 / PAYMENTS as f64;
    let report = format!(
        "| payments | first route down at | completed | in progress (unknown outcome, asked until answered) | never reached the operator, it says | other failures | duplicates | first payment through the second route after the outage | run |\n\
         |---|---|---|---|---|---|---|---|---|\n\
         | {PAYMENTS} | payment {DOWN_AT} | {completed} ({share:.1}%) | {in_progress} | {not_reached} | {} | {duplicates} | {:.0?} | {run:.1?} |\n",
        failed.len(),
        switched_at.unwrap_or_default(),
    );
    println!("{report}");
    let _ = std::fs::write(target_dir().join("failover-scenario.md"), &report);
    assert_eq!(duplicates, 0, "{report}");
    assert!(
        failed.is_empty(),
        "failed otherwise than by the operator's word: {:?}",
        &failed[..failed.len().min(5)]
    );
    assert!(
        switched_at.is_some(),
        "no payment went through the second route"
    );
    assert!(share >= 95.0, "{report}");
}
