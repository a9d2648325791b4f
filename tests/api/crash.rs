//! Crash recovery: creates (with a webhook endpoint) against the real binary,
//! SIGKILLed at random moments 20 times and restarted each time, requests
//! cut by a kill sent again as a merchant would. Afterwards: every request
//! sent again once more is acknowledged (none stuck or refused), the store
//! holds exactly the payments acknowledged (one per idempotency key and per
//! reference, none unnamed by an answer), every 201 exists with the same
//! content, and every stored payment's events were delivered at least once.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::process::{ServerProcess, cli, cli_merchant, get_json, post_json};
use crate::receiver::Receiver;
use crate::support::fakes::Fault;
use crate::support::fakes::mtn::FakeMtn;
use crate::support::fakes::pawapay::{self, FakePawapay};
use crate::support::*;
use mmc_test_kit::service_test;

struct Attempt {
    key: String,
    body: Value,
    status: Option<u16>,
    payment: Value,
}

#[service_test]
async fn sigkill_twenty_times_loses_nothing_and_duplicates_nothing() {
    let data = tempfile::tempdir().unwrap();
    let (merchant, key) = cli_merchant(data.path(), "Crash", "test");
    let receiver = Receiver::start().await;
    cli(
        data.path(),
        &[
            "webhooks",
            "add",
            "--merchant",
            &merchant,
            "--env",
            "test",
            "--url",
            &receiver.url(),
        ],
    );
    let env = [
        ("MMC_WEBHOOKS__RETRY_SCHEDULE_MS", "[100]"),
        ("MMC_WEBHOOKS__POLL_INTERVAL_MS", "20"),
        ("MMC_WEBHOOKS__TIMEOUT_MS", "1000"),
        ("MMC_RATE_LIMIT__PER_SECOND", "0"),
        // The in-flight window stays at its default (90 s): a request cut by
        // a kill is no longer run by anyone once its process is gone, so its
        // retry is answered at once (on PostgreSQL, once the dead process's
        // liveness lease has expired: 5 s, and the next heartbeat), not 409 for the whole window.
    ];
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut attempts: Vec<Attempt> = Vec::new();
    let mut rng = Xorshift(0x9e37_79b9_7f4a_7c15);
    let rounds = 20;
    for round in 0..rounds {
        let server = ServerProcess::start(data.path(), &env);
        let base = server.base.clone();
        // Requests that never got an acknowledgement are retried with the
        // same key and body, as a merchant would (the oldest first, a few a
        // round: they too can be cut by the next kill).
        let mut batch: Vec<(String, Value)> = unacknowledged(&attempts)
            .into_iter()
            .take(8)
            .map(|a| (a.key.clone(), a.body.clone()))
            .collect();
        for i in 0..40 {
            let mut body = direct_payment(if i % 3 == 0 {
                "+2290166000001"
            } else {
                "+2290166004321"
            });
            body["reference"] = json!(format!("crash-{round}-{i}"));
            batch.push((new_key(), body));
        }
        // The kill falls at a random point of the batch's progress, not of the
        // clock: after a random number of answers, then a short random delay
        // (so not always just after a commit). A kill timed from the start
        // fell before nearly every answer on a loaded machine (7 creates
        // acknowledged in 20 rounds) and after every one on a fast machine.
        let answers_before_kill = rng.below(40) as usize;
        let delay_before_kill = Duration::from_millis(rng.below(20));
        // The sends run in this task (`join_all`), so they borrow the count.
        let answered = &AtomicUsize::new(0);
        let sends = batch.into_iter().map(|(k, body)| {
            let (client, base, key) = (client.clone(), base.clone(), key.clone());
            async move {
                let resp = client
                    .post(format!("{base}/api/v1/collect/payments"))
                    .bearer_auth(&key)
                    .header("Idempotency-Key", &k)
                    .json(&body)
                    .send()
                    .await;
                let (status, payment) = match resp {
                    Ok(r) => {
                        let s = r.status().as_u16();
                        let payment = r.json::<Value>().await.unwrap_or(Value::Null);
                        answered.fetch_add(1, Ordering::SeqCst);
                        (Some(s), payment)
                    }
                    Err(_) => (None, Value::Null),
                };
                Attempt {
                    key: k,
                    body,
                    status,
                    payment,
                }
            }
        });
        let all = futures::future::join_all(sends);
        tokio::pin!(all);
        let kill_point = async {
            while answered.load(Ordering::SeqCst) < answers_before_kill {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
            tokio::time::sleep(delay_before_kill).await;
        };
        let results = tokio::select! {
            r = &mut all => { tokio::time::sleep(delay_before_kill).await; server.kill(); r }
            _ = kill_point => { server.kill(); all.await }
        };
        attempts.extend(results);
    }

    // A last run, left alive, to finish deliveries and reconciliation.
    let server = ServerProcess::start(data.path(), &env);
    // Every request still without an acknowledgement, sent again until it
    // has one: the kill left each either committed (a replay now; a 409 only
    // while the killed process may count as alive) or not (created now);
    // none is stuck or refused.
    let last: Vec<(String, Value)> = unacknowledged(&attempts)
        .into_iter()
        .map(|a| (a.key.clone(), a.body.clone()))
        .collect();
    let retried = last.len();
    // Far less than the in-flight window (90 s): the kill, not a timeout,
    // ends a cut request.
    let until = std::time::Instant::now() + Duration::from_secs(20);
    let mut told_to_wait = 0;
    for (k, body) in last {
        let url = format!("{}/api/v1/collect/payments", server.base);
        let (status, payment) = loop {
            let (status, payment) = post_json(&client, &url, &key, Some(&k), &body).await;
            let in_progress =
                status == 409 && payment["error"]["code"] == "idempotency_request_in_progress";
            if !in_progress || std::time::Instant::now() > until {
                break (status, payment);
            }
            told_to_wait += 1;
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        assert!(
            matches!(status, 200 | 201),
            "a request cut by a kill, sent again: {status} {payment}"
        );
        attempts.push(Attempt {
            key: k,
            body,
            status: Some(status),
            payment,
        });
    }
    // Every process that ran them is dead: on SQLite (one process serves the
    // file) none is still counted as running.
    assert!(
        on_postgres() || told_to_wait == 0,
        "{told_to_wait} retries told to wait for a killed process"
    );
    let acknowledged: Vec<&Attempt> = attempts
        .iter()
        .filter(|a| matches!(a.status, Some(200 | 201)))
        .collect();
    let created: Vec<&Attempt> = attempts.iter().filter(|a| a.status == Some(201)).collect();
    for a in &created {
        let id = id_of(&a.payment);
        let stored = get_json(
            &client,
            &format!("{}/api/v1/collect/payments/{id}", server.base),
            &key,
        )
        .await;
        for field in [
            "id",
            "reference",
            "amount",
            "currency",
            "country",
            "operator",
            "customer",
            "created_at",
        ] {
            assert_eq!(
                stored[field], a.payment[field],
                "{field} of an acknowledged payment changed or vanished"
            );
        }
    }
    let mut ids_by_key: HashMap<&str, HashSet<String>> = HashMap::new();
    for a in &acknowledged {
        ids_by_key
            .entry(a.key.as_str())
            .or_default()
            .insert(id_of(&a.payment));
    }
    assert!(
        ids_by_key.values().all(|ids| ids.len() == 1),
        "an idempotency key produced two payments"
    );
    let mut ids_by_reference: HashMap<String, HashSet<String>> = HashMap::new();
    for a in &acknowledged {
        ids_by_reference
            .entry(a.body["reference"].as_str().unwrap().to_string())
            .or_default()
            .insert(id_of(&a.payment));
    }
    assert!(
        ids_by_reference.values().all(|ids| ids.len() == 1),
        "a reference produced two payments"
    );

    // What the store holds is exactly what was acknowledged: every key now
    // has its payment, and there is no payment no answer named (one a killed
    // request committed is the replay its retry got).
    let mut stored: Vec<Value> = Vec::new();
    let mut cursor = String::new();
    loop {
        let page = get_json(
            &client,
            &format!("{}/api/v1/collect/payments?limit=100{cursor}", server.base),
            &key,
        )
        .await;
        stored.extend(page["data"].as_array().unwrap().iter().cloned());
        if page["has_more"] != true {
            break;
        }
        cursor = format!(
            "&starting_after={}",
            page["next_starting_after"].as_str().unwrap()
        );
    }
    let stored_ids: HashSet<String> = stored.iter().map(id_of).collect();
    let answered_ids: HashSet<String> = ids_by_key.values().flatten().cloned().collect();
    let keys: HashSet<&str> = attempts.iter().map(|a| a.key.as_str()).collect();
    assert_eq!(stored.len(), stored_ids.len(), "a payment listed twice");
    assert_eq!(
        ids_by_key.len(),
        keys.len(),
        "every idempotency key has its payment"
    );
    assert_eq!(
        stored_ids, answered_ids,
        "the payments stored are the payments acknowledged"
    );

    // Every committed change's event arrives at least once: each stored
    // payment's creation (those whose first request was cut before its
    // answer too), and each processing a 201 reported.
    let processing = created
        .iter()
        .filter(|a| a.payment["status"] == "processing")
        .map(|a| (id_of(&a.payment), "collect.payment.processing"));
    let expected: HashSet<(String, &str)> = stored_ids
        .iter()
        .map(|id| (id.clone(), "collect.payment.created"))
        .chain(processing)
        .collect();
    let got = receiver
        .wait_for(60, |r| {
            let seen: HashSet<(String, String)> = r
                .iter()
                .map(|x| x.json())
                .map(|e| {
                    (
                        e["data"]["object"]["id"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                        e["type"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect();
            expected
                .iter()
                .all(|(id, t)| seen.contains(&(id.clone(), t.to_string())))
        })
        .await;
    let unanswered = attempts.iter().filter(|a| a.status.is_none()).count();
    let distinct_events: HashSet<String> = got.iter().map(|r| id_of(&r.json())).collect();
    println!(
        "crash test: {rounds} SIGKILLs; {} requests: {} created (201), {} replayed (200), {} unanswered (killed mid-request), {} other; \
         {retried} keys sent again after the last kill ({told_to_wait} times told to wait); {} payments stored, each acknowledged once; \
         {} events expected and all delivered ({} deliveries of {} distinct events)",
        attempts.len(),
        created.len(),
        acknowledged.len() - created.len(),
        unanswered,
        attempts.len() - acknowledged.len() - unanswered,
        stored.len(),
        expected.len(),
        got.len(),
        distinct_events.len()
    );
    assert!(
        created.len() >= 100,
        "enough load to mean something: {}",
        created.len()
    );
}

/// The attempts of keys that no attempt got a 200 or 201 for, one per key, oldest first.
fn unacknowledged(attempts: &[Attempt]) -> Vec<&Attempt> {
    let acknowledged: HashSet<&str> = attempts
        .iter()
        .filter(|a| matches!(a.status, Some(200 | 201)))
        .map(|a| a.key.as_str())
        .collect();
    let mut seen = HashSet::new();
    attempts
        .iter()
        .filter(|a| !acknowledged.contains(a.key.as_str()) && seen.insert(a.key.as_str()))
        .collect()
}

/// `mmc.toml` for a live environment whose operator `route.0` goes to the
/// adapter `route.1`, configured as `adapter` says.
fn live_config(
    dir: &std::path::Path,
    adapter_deadline_ms: u64,
    answer_window_ms: u64,
    route: (&str, &str),
    adapter: &mmc_config::ComponentConfig,
) -> std::path::PathBuf {
    let table = |m: &std::collections::BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| format!("{k:?} = {v:?}\n"))
            .collect::<String>()
    };
    let (slug, name) = route;
    let config = dir.join("mmc.toml");
    std::fs::write(
        &config,
        format!(
            "[limits]\nadapter_deadline_ms = {adapter_deadline_ms}\n\n\
             [routing.live]\n{slug:?} = {name:?}\n\n\
             [components.collect.settings]\noperator_answer_window_ms = \"{answer_window_ms}\"\n\n\
             [components.{name}]\nallowed_hosts = {:?}\n\n[components.{name}.settings]\n{}\n\
             [components.{name}.secrets]\n{}",
            adapter.allowed_hosts,
            table(&adapter.settings),
            table(&adapter.secrets)
        ),
    )
    .unwrap();
    config
}

/// `mmc serve` on the set-up in `data` with `config` (again after a kill: the same storage).
fn serve_live(data: &std::path::Path, config: &std::path::Path) -> ServerProcess {
    let env = [
        ("MMC_CONFIG", config.to_str().unwrap()),
        ("MMC_RATE_LIMIT__PER_SECOND", "0"),
    ];
    ServerProcess::start(data, &env)
}

/// Waits (5 s at most) until the operator has received one request: `received`
/// counts them.
async fn until_received(received: impl Fn() -> usize, what: &str) {
    for _ in 0..100 {
        if received() > 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(received(), 1, "{what} reached the operator");
}

/// A live merchant whose `mtn-bj` goes through the real `momo` adapter to a
/// fake MTN (it settles 100 ms after a request), for tests that kill the
/// server while MTN is answering. The in-flight window is given: the adapter
/// deadline plus the operator's answer window.
struct LiveMtn {
    fake: FakeMtn,
    data: tempfile::TempDir,
    key: String,
    config: std::path::PathBuf,
}

impl LiveMtn {
    async fn start(merchant: &str, adapter_deadline_ms: u64, answer_window_ms: u64) -> LiveMtn {
        let fake = FakeMtn::start().await;
        fake.settle_after(Duration::from_millis(100));
        let data = tempfile::tempdir().unwrap();
        let (_, key) = cli_merchant(data.path(), merchant, "live");
        let config = live_config(
            data.path(),
            adapter_deadline_ms,
            answer_window_ms,
            ("mtn-bj", "momo"),
            &fake.component_config(),
        );
        LiveMtn {
            fake,
            data,
            key,
            config,
        }
    }

    /// `mmc serve` on this set-up (again after a kill: the same storage).
    fn serve(&self) -> ServerProcess {
        serve_live(self.data.path(), &self.config)
    }

    /// A POST the kill will cut: sent in a task of its own, no answer expected.
    fn cut_post(
        &self,
        url: String,
        idempotency_key: Option<String>,
        body: Value,
    ) -> JoinHandle<()> {
        let key = self.key.clone();
        tokio::spawn(async move {
            let mut req = reqwest::Client::new()
                .post(&url)
                .bearer_auth(&key)
                .json(&body);
            if let Some(k) = idempotency_key {
                req = req.header("Idempotency-Key", k);
            }
            let _ = req.send().await;
        })
    }

    /// Waits (5 s at most) until MTN has received the request at `endpoint`.
    async fn until_mtn_has(&self, endpoint: &str) {
        until_received(|| self.fake.requests(endpoint).len(), endpoint).await;
    }

    /// Reads payment `id` through `server` until its status is `want`.
    async fn until_status(&self, server: &ServerProcess, id: &str, want: &str) -> Value {
        let (client, url) = (
            reqwest::Client::new(),
            format!("{}/api/v1/collect/payments/{id}", server.base),
        );
        wait_until(|| get_json(&client, &url, &self.key), want).await
    }
}

/// A refund stored `pending` whose operator answer never came back (the
/// process was SIGKILLed while MTN was answering) is asked about after the
/// restart, and its reserved amount settles: the payment ends `refunded`,
/// with one refund at MTN.
#[service_test]
async fn a_refund_left_pending_by_a_crash_is_polled_after_restart() {
    // A short in-flight window so the restarted process asks about the refund soon.
    let mtn = LiveMtn::start("Refunds", 2000, 0).await;
    let client = reqwest::Client::new();
    let server = mtn.serve();
    let (status, p) = post_json(
        &client,
        &format!("{}/api/v1/collect/payments", server.base),
        &mtn.key,
        Some(&new_key()),
        &json!({"reference": "crash-refund", "amount": 1500, "currency": "XOF", "country": "BJ",
                "operator": "mtn-bj", "customer": {"phone": "+2290166000001"}}),
    )
    .await;
    assert_eq!(status, 201, "{p}");
    let id = id_of(&p);
    mtn.until_status(&server, &id, "completed").await;

    // MTN records the refund, then takes 30 s to say so: we die meanwhile.
    mtn.fake
        .inject("refund", Fault::Slow(Duration::from_secs(30)), 1);
    let refund = mtn.cut_post(
        format!("{}/api/v1/collect/payments/{id}/refunds", server.base),
        None,
        json!({}),
    );
    mtn.until_mtn_has("refund").await;
    server.kill();
    refund.abort();

    let server = mtn.serve();
    let done = mtn.until_status(&server, &id, "refunded").await;
    assert_eq!(done["status"], "refunded", "{done}");
    assert_eq!(mtn.fake.requests("refund").len(), 1, "never sent again");
}

/// A create SIGKILLed while MTN was still answering it (MTN took the request
/// to pay): while the process lived, a retry of the Idempotency-Key was told
/// 409; after the restart the retry is answered at once with the payment as
/// stored, not 409 for the rest of the in-flight window (here 60 s; on
/// PostgreSQL once the dead process's liveness lease has expired). Nothing
/// is sent to MTN again, and MTN is asked about it by our id: it completes.
#[service_test]
async fn a_create_cut_by_a_crash_is_answered_at_once_after_the_restart() {
    let mtn = LiveMtn::start("Cut", 30_000, 30_000).await;
    let client = reqwest::Client::new();
    let key = &mtn.key;
    let idempotency_key = new_key();
    let body = json!({"reference": "cut-by-a-crash", "amount": 2500, "currency": "XOF",
                      "country": "BJ", "operator": "mtn-bj",
                      "customer": {"phone": "+2290166000001"}});
    let server = mtn.serve();
    let url = format!("{}/api/v1/collect/payments", server.base);
    // MTN takes the request to pay, then takes 30 s to say so: we die meanwhile.
    mtn.fake
        .inject("requesttopay", Fault::Slow(Duration::from_secs(30)), 1);
    let first = mtn.cut_post(url.clone(), Some(idempotency_key.clone()), body.clone());
    mtn.until_mtn_has("requesttopay").await;
    let (status, busy) = post_json(&client, &url, key, Some(&idempotency_key), &body).await;
    assert_eq!(status, 409, "while the first request runs: {busy}");
    assert_eq!(busy["error"]["code"], "idempotency_request_in_progress");
    server.kill();
    first.abort();

    let server = mtn.serve();
    let restarted = std::time::Instant::now();
    let url = format!("{}/api/v1/collect/payments", server.base);
    let (status, p) = loop {
        let (status, p) = post_json(&client, &url, key, Some(&idempotency_key), &body).await;
        // On PostgreSQL the killed process counts as alive until its
        // liveness lease expires (5 s, then a heartbeat); one process serves a SQLite file.
        if status != 409 || !on_postgres() || restarted.elapsed() > Duration::from_secs(15) {
            break (status, p);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(
        status, 200,
        "the payment as stored, not 409 for the window: {p}"
    );
    assert_eq!(p["reference"], "cut-by-a-crash");
    // Pending, or already settled by the poll its intent scheduled.
    assert!(
        p["status"] == "pending" || p["status"] == "completed",
        "its outcome is not known yet, or MTN told us: {p}"
    );
    let id = id_of(&p);
    let done = mtn.until_status(&server, &id, "completed").await;
    assert_eq!(done["amount"], 2500);
    assert_eq!(
        mtn.fake.requests("requesttopay").len(),
        1,
        "never sent again"
    );
    let (status, again) = post_json(&client, &url, key, Some(&idempotency_key), &body).await;
    assert_eq!((status, &again["id"]), (200, &json!(id)), "{again}");
}

/// A create SIGKILLed while MTN was still answering it, and never retried
/// (the merchant gave up): after the restart MTN is asked about it by our id
/// within seconds — the poll its intent scheduled before MTN was called —
/// rather than at its expiry 15 minutes later. It completes, and nothing is
/// sent to MTN again.
#[service_test]
async fn a_create_cut_by_a_crash_and_never_retried_is_settled_soon_after_the_restart() {
    let mtn = LiveMtn::start("Abandoned", 30_000, 30_000).await;
    let server = mtn.serve();
    mtn.fake
        .inject("requesttopay", Fault::Slow(Duration::from_secs(30)), 1);
    let cut = mtn.cut_post(
        format!("{}/api/v1/collect/payments", server.base),
        Some(new_key()),
        json!({"reference": "abandoned", "amount": 3500, "currency": "XOF", "country": "BJ",
               "operator": "mtn-bj", "customer": {"phone": "+2290166000001"}}),
    );
    mtn.until_mtn_has("requesttopay").await;
    server.kill();
    cut.abort();

    let server = mtn.serve();
    let client = reqwest::Client::new();
    let list = get_json(
        &client,
        &format!("{}/api/v1/collect/payments", server.base),
        &mtn.key,
    )
    .await;
    let stored = &list["data"][0];
    assert_eq!(stored["reference"], "abandoned", "{list}");
    let id = id_of(stored);
    let done = mtn.until_status(&server, &id, "completed").await;
    assert_eq!(done["amount"], 3500);
    assert_eq!(
        mtn.fake.requests("requesttopay").len(),
        1,
        "never sent again"
    );
}

/// An OTP confirmation cut by our crash while pawaPay was taking the deposit
/// (Orange Money CI is PREAUTH: the deposit travels with the customer's code)
/// and never retried: after the restart pawaPay is asked about it by our id
/// within seconds — the poll the confirmation's intent scheduled — rather
/// than at the payment's expiry. It completes, and the deposit is not sent again.
#[service_test]
async fn an_otp_confirmation_cut_by_a_crash_is_settled_soon_after_the_restart() {
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(100));
    let data = tempfile::tempdir().unwrap();
    let (_, key) = cli_merchant(data.path(), "Otp", "live");
    let config = live_config(
        data.path(),
        30_000,
        30_000,
        ("orange-ci", "pawapay"),
        &fake.component_config(),
    );
    let server = serve_live(data.path(), &config);
    let client = reqwest::Client::new();
    let (status, p) = post_json(
        &client,
        &format!("{}/api/v1/collect/payments", server.base),
        &key,
        Some(&new_key()),
        &json!({"reference": "otp-cut", "amount": 2500, "currency": "XOF", "country": "CI",
                "operator": "orange-ci", "customer": {"phone": "+2250700000001"}}),
    )
    .await;
    assert_eq!((status, &p["status"]), (201, &json!("awaiting_otp")), "{p}");
    let id = id_of(&p);

    fake.inject("deposits", Fault::Slow(Duration::from_secs(30)), 1);
    let confirm = {
        let (url, key) = (
            format!("{}/api/v1/collect/payments/{id}/confirm", server.base),
            key.clone(),
        );
        tokio::spawn(async move {
            let body = json!({"otp": pawapay::GOOD_OTP});
            let _ = post_json(&reqwest::Client::new(), &url, &key, None, &body).await;
        })
    };
    until_received(|| fake.requests("deposits").len(), "the deposit").await;
    server.kill();
    confirm.abort();

    let server = serve_live(data.path(), &config);
    let url = format!("{}/api/v1/collect/payments/{id}", server.base);
    let done = wait_until(|| get_json(&client, &url, &key), "completed").await;
    assert_eq!(done["amount"], 2500);
    assert_eq!(fake.requests("deposits").len(), 1, "never sent again");
}

/// Reads until the payment's status is `want` (20 s at most); returns the last read.
async fn wait_until<F, Fut>(read: F, want: &str) -> Value
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Value>,
{
    let mut last = Value::Null;
    for _ in 0..200 {
        last = read().await;
        if last["status"] == want {
            return last;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never {want}: {last}");
}
