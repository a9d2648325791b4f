//! A fleet's bad days: a node frozen in the middle of a write transaction
//! (SIGSTOP: a paused VM, a partition), its PostgreSQL restarted under
//! load, a node whose wall clock runs behind the others', and a node paused
//! in a way its clocks never see (libfaketime), each while an operator's
//! gateway holds a request and refuses it late. Real `mmc serve`
//! processes, a real server.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mmc_storage_postgres::cluster::Cluster;
use mmc_storage_postgres::test_util::{TestDatabase, namespace_lock_ids};
use mmc_storage_postgres::tokio_postgres;
use serde_json::{Value, json};

use crate::fleet::Fleet;
use crate::support::fakes::mtn::{self, FakeMtn};
use crate::support::fakes::pawapay::FakePawapay;
use crate::support::fakes::{Fault, Gate, normal_key};
use crate::support::*;
use mmc_test_kit::service_test;

/// The requirement's freeze: well past every timeout in play (the server's
/// idle-in-transaction 3 s, a writer's lock wait 4 s, the pool's waits
/// 10 s, keepalives 25 s, statements 30 s).
const FREEZE: Duration = Duration::from_secs(60);

/// How long the other nodes' writes may be held up by a frozen one.
const HELD_UP_AT_MOST: Duration = Duration::from_secs(10);

/// One answer: status (0: none within the client's 10 s), `Retry-After`, body, time taken.
#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    retry_after: Option<String>,
    body: Value,
    took: Duration,
}

async fn post(
    fleet: &Fleet,
    node: usize,
    path: &str,
    key: &str,
    idem: &str,
    body: &Value,
) -> Answer {
    let started = Instant::now();
    let sent = fleet
        .client
        .post(fleet.url(node, path))
        .bearer_auth(key)
        .header("Idempotency-Key", idem)
        .json(body)
        .send()
        .await;
    match sent {
        Ok(resp) => Answer {
            status: resp.status().as_u16(),
            retry_after: resp
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
            body: resp.json().await.unwrap_or(Value::Null),
            took: started.elapsed(),
        },
        Err(_) => Answer {
            status: 0,
            retry_after: None,
            body: Value::Null,
            took: started.elapsed(),
        },
    }
}

/// The first column of `sql`'s first row, as the test's own session sees it.
async fn query_i64(url: &str, sql: &str) -> i64 {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("the test reaches the database");
    let conn = tokio::spawn(conn);
    let n = client.query_one(sql, &[]).await.unwrap().get(0);
    drop(client);
    let _ = conn.await;
    n
}

fn signal(pid: u32, sig: &str) {
    let ok = std::process::Command::new("kill")
        .args([sig, &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "kill {sig} {pid}");
}

/// Every payment of `ids` reads the same, whole, from each of `nodes`.
async fn readable_everywhere(fleet: &Fleet, nodes: &[usize], key: &str, payments: &[&Value]) {
    for p in payments {
        let id = p["id"].as_str().expect("an acknowledged payment has an id");
        let mut seen = Vec::new();
        for &n in nodes {
            let (status, stored) = fleet
                .get(n, &format!("/api/v1/collect/payments/{id}"), key)
                .await;
            assert_eq!(status, 200, "node {n}, payment {id}: {stored}");
            assert_eq!(stored["reference"], p["reference"], "{stored}");
            assert_eq!(stored["amount"], p["amount"], "{stored}");
            // What was acknowledged; the status may move on between two reads
            // (the simulated operator completes payments meanwhile).
            let whole: Vec<Value> = [
                "id",
                "reference",
                "amount",
                "currency",
                "country",
                "customer",
                "created_at",
                "expires_at",
            ]
            .iter()
            .map(|f| stored[*f].clone())
            .collect();
            seen.push(whole);
        }
        assert!(
            seen.windows(2).all(|w| w[0] == w[1]),
            "nodes disagree: {seen:?}"
        );
    }
}

/// Whether node A has a session idle inside one of the `collect`
/// component's open transactions (each holds its namespace's lock, shared):
/// what a node frozen mid-transaction leaves.
async fn a_holds_collects_lock_idle(url: &str) -> bool {
    let (classid, objid) = namespace_lock_ids("collect");
    let sql = format!(
        "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity s ON s.pid = l.pid \
         WHERE s.application_name = 'mmc-node-0' AND s.state = 'idle in transaction' \
         AND l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
         AND l.classid = {classid}::bigint::oid AND l.objid = {objid}::bigint::oid"
    );
    query_i64(url, &sql).await > 0
}

/// Node A creates and cancels payments (cancels run as interactive
/// transactions) and is frozen with SIGSTOP; the test freezes it again
/// until the server shows A's session idle inside an open transaction, so
/// A is provably stopped mid-transaction (no hook in the product). Node B's
/// creates then succeed within seconds (they need none of the keys A
/// holds), A's transaction is rolled back, and once A runs again (after the requirement's
/// 60 s) it serves without anyone's help; every acknowledged payment and
/// cancel reads whole from both nodes.
#[service_test]
async fn a_node_frozen_mid_transaction_holds_the_others_up_seconds_and_loses_nothing() {
    let db = TestDatabase::create();
    let url = db.url.clone();
    let fleet = Arc::new(Fleet::start_on(&url, Some(db), 2, &[]));
    let (_, key, _) = fleet.merchant();
    let stop = Arc::new(AtomicBool::new(false));

    // A's load: create, then cancel (in progress at the operator: cancellable).
    let workers: Vec<_> = (0..4)
        .map(|_| {
            let (fleet, key, stop) = (fleet.clone(), key.clone(), stop.clone());
            tokio::spawn(async move {
                let mut done: Vec<(Answer, Option<Answer>)> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let body = direct_payment("+2290166000004");
                    let created = post(
                        &fleet,
                        0,
                        "/api/v1/collect/payments",
                        &key,
                        &new_key(),
                        &body,
                    )
                    .await;
                    let cancelled = match (created.status, created.body["id"].as_str()) {
                        (201, Some(id)) => Some(
                            post(
                                &fleet,
                                0,
                                &format!("/api/v1/collect/payments/{id}/cancel"),
                                &key,
                                &new_key(),
                                &json!({}),
                            )
                            .await,
                        ),
                        _ => None,
                    };
                    done.push((created, cancelled));
                }
                done
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(2)).await;

    let pid = fleet.node(0).child.id();
    let mut frozen_at = None;
    for attempt in 0..60u64 {
        signal(pid, "-STOP");
        // What A had sent is answered meanwhile; what it holds stays held.
        tokio::time::sleep(Duration::from_millis(50)).await;
        if a_holds_collects_lock_idle(&url).await {
            frozen_at = Some(Instant::now());
            println!("node A frozen mid-transaction at attempt {attempt}");
            break;
        }
        signal(pid, "-CONT");
        tokio::time::sleep(Duration::from_millis(20 + attempt * 7 % 90)).await;
    }
    let frozen_at = frozen_at.expect("node A frozen inside a transaction in 60 attempts");

    // B's next five creates: acknowledged within the bound, 503 with
    // Retry-After meanwhile at worst (retried as a client does), never a 500.
    let mut b_payments = Vec::new();
    let mut b_took = Vec::new();
    for _ in 0..5 {
        let (idem, body) = (new_key(), direct_payment("+2290166000001"));
        let first = Instant::now();
        let answer = loop {
            let a = post(&fleet, 1, "/api/v1/collect/payments", &key, &idem, &body).await;
            match a.status {
                200 | 201 => break a,
                503 => {
                    let wait: u64 = a
                        .retry_after
                        .as_deref()
                        .expect("503 with Retry-After")
                        .parse()
                        .unwrap();
                    tokio::time::sleep(Duration::from_secs(wait)).await;
                }
                s => panic!("node B answered {s} while A was frozen: {}", a.body),
            }
            assert!(
                first.elapsed() < HELD_UP_AT_MOST,
                "B held up {:?}",
                first.elapsed()
            );
        };
        let took = first.elapsed();
        assert!(took < HELD_UP_AT_MOST, "B's create took {took:?}");
        b_took.push(took);
        b_payments.push(answer.body);
    }
    let b_done = frozen_at.elapsed();
    // The server ends A's transactions (rolled back), A still frozen: the
    // one holding the lock, and any of A's whose statement was answered
    // meanwhile (idle from then on), a few seconds later.
    let open_of_a = "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mmc-node-0' \
         AND state LIKE 'idle in transaction%'";
    while query_i64(&url, open_of_a).await > 0 {
        assert!(
            frozen_at.elapsed() < Duration::from_secs(20),
            "a transaction of the frozen node is still open"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let a_ended = frozen_at.elapsed();

    tokio::time::sleep(FREEZE.saturating_sub(frozen_at.elapsed())).await;
    signal(pid, "-CONT");
    let thawed = Instant::now();
    // A serves again by itself: its dead session is dropped, a new one made.
    let a_back = loop {
        let body = direct_payment("+2290166000001");
        let a = post(
            &fleet,
            0,
            "/api/v1/collect/payments",
            &key,
            &new_key(),
            &body,
        )
        .await;
        if a.status == 201 {
            break thawed.elapsed();
        }
        assert!(
            thawed.elapsed() < Duration::from_secs(20),
            "A not back: {a:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    tokio::time::sleep(Duration::from_secs(1)).await;
    stop.store(true, Ordering::Relaxed);
    let mut a_load = Vec::new();
    for w in workers {
        a_load.extend(w.await.unwrap());
    }

    let mut acknowledged: Vec<&Value> = b_payments.iter().collect();
    let mut cancels = Vec::new();
    for (created, cancelled) in &a_load {
        assert!(
            matches!(created.status, 0 | 201 | 503),
            "A's create answered {}: {}",
            created.status,
            created.body
        );
        if created.status == 201 {
            acknowledged.push(&created.body);
        }
        if let Some(c) = cancelled
            && c.status == 200
        {
            cancels.push(&c.body);
        }
    }
    readable_everywhere(&fleet, &[0, 1], &key, &acknowledged).await;
    for c in &cancels {
        let id = id_of(c);
        for n in [0, 1] {
            let (_, p) = fleet
                .get(n, &format!("/api/v1/collect/payments/{id}"), &key)
                .await;
            assert_eq!(p["status"], "cancelled", "node {n}: {p}");
        }
    }
    println!(
        "frozen node: B's five creates took {b_took:?} (all done {b_done:?} after the freeze); \
         A's transactions all ended {a_ended:?} after it; A served again {a_back:?} after SIGCONT; {} payments and {} cancels acknowledged, all whole on both nodes",
        acknowledged.len(),
        cancels.len()
    );
}

/// PostgreSQL stopped for a few seconds and started again while two nodes
/// take creates: every answer is a 201 or a 503 with `Retry-After` (never a
/// 500), within the call's deadline, the nodes reconnect by
/// themselves, and every acknowledged payment is there afterwards.
#[service_test]
async fn postgres_restarted_under_load_answers_503s_and_loses_nothing() {
    let cluster = Cluster::start();
    let fleet = Arc::new(Fleet::start_on(&cluster.url(), None, 2, &[]));
    let (_, key, _) = fleet.merchant();
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..4)
        .map(|w| {
            let (fleet, key, stop) = (fleet.clone(), key.clone(), stop.clone());
            tokio::spawn(async move {
                let mut done: Vec<(usize, Instant, Answer)> = Vec::new();
                let mut i = w;
                while !stop.load(Ordering::Relaxed) {
                    let node = i % 2;
                    i += 1;
                    let sent = Instant::now();
                    let body = direct_payment("+2290166000001");
                    let a = post(
                        &fleet,
                        node,
                        "/api/v1/collect/payments",
                        &key,
                        &new_key(),
                        &body,
                    )
                    .await;
                    if a.status != 201 {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    done.push((node, sent, a));
                }
                done
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    tokio::task::block_in_place(|| cluster.stop());
    tokio::time::sleep(Duration::from_secs(3)).await;
    tokio::task::block_in_place(|| cluster.resume());
    let up = Instant::now();
    // Load goes on for a while after the restart: both nodes must have
    // acknowledged creates sent in it.
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::Relaxed);
    let mut answers = Vec::new();
    for w in workers {
        answers.extend(w.await.unwrap());
    }

    let unavailable = answers.iter().filter(|(_, _, a)| a.status == 503).count();
    for (node, _, a) in &answers {
        assert!(
            matches!(a.status, 201 | 503),
            "node {node} answered {} in {:?}: {}",
            a.status,
            a.took,
            a.body
        );
        if a.status == 503 {
            assert!(
                a.retry_after.is_some(),
                "503 without Retry-After: {}",
                a.body
            );
        }
        // Within the call's deadline (`limits.api_deadline_ms`, 5 s) and a second.
        assert!(
            a.took < Duration::from_secs(6),
            "node {node} took {:?}",
            a.took
        );
    }
    assert!(unavailable > 0, "the outage was seen");
    for node in [0, 1] {
        assert!(
            answers
                .iter()
                .any(|(n, sent, a)| *n == node && *sent > up && a.status == 201),
            "node {node} reconnected by itself"
        );
    }
    let acknowledged: Vec<&Value> = answers
        .iter()
        .filter(|(_, _, a)| a.status == 201)
        .map(|(_, _, a)| &a.body)
        .collect();
    readable_everywhere(&fleet, &[0, 1], &key, &acknowledged).await;
    let slowest = answers
        .iter()
        .map(|(_, _, a)| a.took)
        .max()
        .unwrap_or_default();
    println!(
        "postgres restart: {} answers, {} acknowledged, {unavailable} 503s with Retry-After, slowest {slowest:?}",
        answers.len(),
        acknowledged.len()
    );
}

/// `[components.NAME]` of `mmc.toml` for the adapter a fake configures.
fn adapter_table(name: &str, adapter: &mmc_config::ComponentConfig) -> String {
    let table = |m: &std::collections::BTreeMap<String, String>| {
        m.iter()
            .map(|(k, v)| format!("{k:?} = {v:?}\n"))
            .collect::<String>()
    };
    format!(
        "[components.{name}]\nallowed_hosts = {:?}\n\n[components.{name}.settings]\n{}\n\
         [components.{name}.secrets]\n{}\n",
        adapter.allowed_hosts,
        table(&adapter.settings),
        table(&adapter.secrets)
    )
}

/// `mmc.toml` for a fleet whose live `mtn-bj` goes through the real `momo`
/// adapter to `mtn`, with short windows: the adapter's deadline 2 s, the
/// operator's answer window 2 s (so a payout is "possibly in flight" for
/// 4 s), and a claim nobody finished asked about after 3 s.
fn live_payouts_config(dir: &std::path::Path, mtn: &FakeMtn) -> std::path::PathBuf {
    let mut adapter = mtn.component_config();
    adapter.settings.insert("timeout_ms".into(), "1000".into());
    let config = dir.join("mmc.toml");
    std::fs::write(
        &config,
        format!(
            "[limits]\nadapter_deadline_ms = 2000\n\n\
             [routing.live]\n\"mtn-bj\" = \"momo\"\n\n\
             [components.bulk.settings]\nclaim_grace_ms = \"3000\"\noperator_answer_window_ms = \"2000\"\n\n{}",
            adapter_table("momo", &adapter)
        ),
    )
    .unwrap();
    config
}

/// The process id of the node that holds job `name`'s lease now.
async fn lease_holder_pid(url: &str, name: &str) -> Option<u32> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("the test reaches the database");
    let conn = tokio::spawn(conn);
    let holder: Option<String> = client
        .query_opt("SELECT holder FROM leases WHERE name = $1", &[&name])
        .await
        .unwrap()
        .map(|r| r.get(0));
    drop(client);
    let _ = conn.await;
    // `host:pid:…`
    holder?.split(':').nth(1)?.parse().ok()
}

/// A node frozen between claiming a payout and sending it, for longer than
/// the payout can be in flight and than its lease on the payouts job: the
/// other node takes the job over, finds that MTN does not know the payout,
/// and sends it under the same `X-Reference-Id`; when the frozen node
/// wakes, it sends nothing (its attempt's deadline and its lease have
/// passed). One transfer at MTN, one id, and the item completed.
#[service_test]
async fn a_payout_whose_sender_froze_between_claim_and_call_moves_money_once() {
    let mtn = FakeMtn::start().await;
    mtn.settle_after(Duration::from_millis(100));
    // The payout's first token request is where its node will be frozen:
    // MTN answers it only after 3 s, by which time the node is stopped.
    mtn.inject("token", Fault::Slow(Duration::from_secs(3)), 1);
    let dir = tempfile::tempdir().unwrap();
    let config = live_payouts_config(dir.path(), &mtn);
    let db = TestDatabase::create();
    let url = db.url.clone();
    let fleet = Fleet::start_on(
        &url,
        Some(db),
        2,
        &[("MMC_CONFIG", config.to_str().unwrap())],
    );
    let merchant = fleet.cli(&["merchants", "create", "--name", "Payroll"]);
    let merchant = merchant["id"].as_str().unwrap().to_string();
    let live_key = || {
        let k = fleet.cli(&["keys", "create", "--merchant", &merchant, "--env", "live"]);
        k["key"].as_str().unwrap().to_string()
    };
    let (maker, checker) = (live_key(), live_key());
    let phone = "+2290166000777";
    let batch = json!({"name": "Frozen", "items": [{"beneficiary_name": "Awa Koné",
        "phone": phone, "amount": 2500, "currency": "XOF", "reference": "frozen-1"}]});
    let created = post(
        &fleet,
        0,
        "/api/v1/bulk-payments/",
        &maker,
        &new_key(),
        &batch,
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_string();
    let validate = format!("/api/v1/bulk-payments/{id}/validate/");
    let validated = post(&fleet, 0, &validate, &checker, &new_key(), &json!({})).await;
    assert_eq!(validated.status, 200, "{}", validated.body);

    // The payout is claimed and its node asks MTN for a token: freeze it there.
    let until = Instant::now() + Duration::from_secs(20);
    while mtn.requests("token").is_empty() {
        assert!(
            Instant::now() < until,
            "no token request: the payout never left"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let sender = lease_holder_pid(&url, "job:bulk:payouts")
        .await
        .expect("the payouts job has a holder");
    let frozen = (0..2)
        .find(|&i| fleet.node(i).child.id() == sender)
        .expect("the holder is a node of the fleet");
    signal(sender, "-STOP");
    let other = 1 - frozen;

    // The other node takes the job over and settles the payout under its id.
    let items = format!("/api/v1/bulk-payments/{id}/items/");
    let until = Instant::now() + Duration::from_secs(40);
    let item = loop {
        let (_, page) = fleet.get(other, &items, &maker).await;
        let item = page["results"][0].clone();
        if item["status"] == "completed" || Instant::now() > until {
            break item;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(item["status"], "completed", "{item}");

    // The frozen node wakes: it sends nothing more.
    signal(sender, "-CONT");
    tokio::time::sleep(Duration::from_secs(8)).await;
    let transfers = mtn.requests("transfer");
    assert_eq!(transfers.len(), 1, "one transfer request reached MTN");
    assert_eq!(mtn.ids_for("transfer", phone).len(), 1, "under one id");
    let (_, page) = fleet.get(frozen, &items, &maker).await;
    assert_eq!(page["results"][0]["status"], "completed", "{page}");
}

/// How many `operation` calls node `i`'s `momo` adapter saw refused
/// (`rejected`): the late refusal really reached the node it was meant for.
async fn refusals_heard(fleet: &Fleet, i: usize, operation: &str) -> f64 {
    let text = reqwest::get(format!("{}/metrics", fleet.node(i).base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let labels = format!(r#"adapter="momo",operation="{operation}",outcome="rejected""#);
    metric(&text, "mmc_adapter_calls_total", &labels)
}

/// libfaketime's library for threaded programs (Debian's `faketime`
/// package, which `make test` installs): preloaded, it shifts what a
/// process reads of the wall clock, not its monotonic clock.
fn libfaketime() -> std::path::PathBuf {
    let lib = ["/usr/lib", "/usr/lib64"]
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .flatten()
        .map(|e| e.path().join("faketime/libfaketimeMT.so.1"))
        .chain([std::path::PathBuf::from(
            "/usr/lib/faketime/libfaketimeMT.so.1",
        )])
        .find(|p| p.exists());
    lib.expect("libfaketimeMT.so.1 (Debian's faketime package; `make test` installs it)")
}

/// A fleet whose live `mtn-bj` goes to `momo` (the fake MTN) first and
/// to `pawapay` when MTN answers that nothing was done; a request to pay or
/// a payout possibly in flight for 10 s (adapter deadline 8 s, answer
/// window 2 s), a payout claim nobody finished asked about after 3 s.
fn two_routes_config(dir: &std::path::Path, mtn: &FakeMtn, pawapay: &FakePawapay) -> String {
    let serving = |mut c: mmc_config::ComponentConfig| {
        c.settings.insert("timeout_ms".into(), "6000".into());
        c.settings.insert("operators".into(), "mtn-bj".into());
        c
    };
    let config = dir.join("mmc.toml");
    std::fs::write(
        &config,
        format!(
            "[limits]\nadapter_deadline_ms = 8000\n\n\
             [routing.live]\n\"mtn-bj\" = [\"momo\", \"pawapay\"]\n\n\
             [components.collect.settings]\noperator_answer_window_ms = \"2000\"\n\n\
             [components.bulk.settings]\nclaim_grace_ms = \"3000\"\noperator_answer_window_ms = \"2000\"\n\n{}{}",
            adapter_table("momo", &serving(mtn.component_config())),
            adapter_table("pawapay", &serving(pawapay.component_config())),
        ),
    )
    .unwrap();
    config.to_str().unwrap().to_string()
}

/// Holds the next two `endpoint` requests about `phone` in MTN's gateway:
/// the first is then refused (a 429, nothing done), the second (the copy
/// sent again) taken. Each is let go when the test opens its gate.
fn held_then_refused(mtn: &FakeMtn, endpoint: &'static str, phone: &str) -> (Gate, Gate) {
    let (refused, taken) = (Gate::default(), Gate::default());
    let late_refusal = Some(Box::new(mtn::refusal(429)));
    mtn.inject_for(
        endpoint,
        phone,
        Fault::Held(refused.clone(), late_refusal),
        1,
    );
    mtn.inject_for(endpoint, phone, Fault::Held(taken.clone(), None), 1);
    (refused, taken)
}

/// Waits (`within` at most) until MTN received `n` requests to `endpoint`
/// about `phone`.
async fn until_requests(mtn: &FakeMtn, endpoint: &str, phone: &str, n: usize, within: Duration) {
    let until = Instant::now() + within;
    while mtn.requests_for(endpoint, phone).len() < n {
        assert!(
            Instant::now() < until,
            "{n} {endpoint} requests never reached MTN"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Node B, which holds reconciliation, then node A, whose wall clock runs a
/// minute behind B's, on a new database with `config`; and a live key of a
/// new merchant: (fleet, b, a, key).
async fn skewed_fleet(config: &str) -> (Fleet, usize, usize, String) {
    let db = TestDatabase::create();
    let url = db.url.clone();
    let mut fleet = Fleet::start_on(&url, Some(db), 0, &[("MMC_CONFIG", config)]);
    let b = fleet.add_node(&[]);
    let b_pid = fleet.node(b).child.id();
    let until = Instant::now() + Duration::from_secs(20);
    while lease_holder_pid(&url, "job:collect:reconcile").await != Some(b_pid) {
        assert!(Instant::now() < until, "node B never held reconciliation");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let faketime = libfaketime();
    let a = fleet.add_node(&[
        ("LD_PRELOAD", faketime.to_str().unwrap()),
        ("FAKETIME", "-60"),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
    ]);
    let merchant = fleet.cli(&["merchants", "create", "--name", "Skewed"]);
    let merchant = merchant["id"].as_str().unwrap().to_string();
    let key = fleet.cli(&["keys", "create", "--merchant", &merchant, "--env", "live"]);
    let key = key["key"].as_str().unwrap().to_string();
    (fleet, b, a, key)
}

/// POSTs `body` to `url` in the background, with a client that waits a
/// minute (a node's answer held up by an operator's gateway): its status
/// and body.
fn post_in_background(
    url: String,
    key: &str,
    body: Value,
) -> tokio::task::JoinHandle<(u16, Value)> {
    let key = key.to_string();
    tokio::spawn(async move {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(60))
            .build()
            .unwrap();
        let resp = client
            .post(&url)
            .bearer_auth(key)
            .header("Idempotency-Key", new_key())
            .json(&body)
            .send()
            .await
            .unwrap_or_else(|e| panic!("no answer from {url}: {e}"));
        (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
    })
}

/// Reads `path` on node `i` until its status is `want`, 30 s at most: the
/// last read.
async fn read_until(fleet: &Fleet, i: usize, path: &str, key: &str, want: &str) -> Value {
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let (_, p) = fleet.get(i, path, key).await;
        if p["status"] == want || Instant::now() > until {
            return p;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Node A's clock runs a minute behind node B's, which runs reconciliation:
/// to B, A's request to pay is long past its in-flight window while MTN's
/// gateway still holds it. B finds the payment unknown to MTN and sends it
/// again under the same id; MTN then refuses A's copy (nothing done, a 429)
/// while B's is still on its way. A must not fail the payment over to the
/// second provider on the strength of that refusal: the request in flight
/// is B's, not the one refused. The payment completes through MTN, once,
/// and pawaPay never hears of it.
#[service_test]
async fn a_refusal_of_a_request_sent_again_meanwhile_does_not_fail_the_payment_over() {
    let (mtn, pawapay) = (FakeMtn::start().await, FakePawapay::start().await);
    mtn.settle_after(Duration::from_millis(200));
    let phone = "+2290166000919";
    let (refused, taken) = held_then_refused(&mtn, "requesttopay", phone);
    let dir = tempfile::tempdir().unwrap();
    let config = two_routes_config(dir.path(), &mtn, &pawapay);
    let (fleet, b, a, key) = skewed_fleet(&config).await;
    let b_pid = fleet.node(b).child.id();

    // B waits while A's request reaches MTN, so that the copy comes second.
    signal(b_pid, "-STOP");
    let url = fleet.url(a, "/api/v1/collect/payments");
    let create = post_in_background(url, &key, direct_payment(phone));
    let within = Duration::from_secs(20);
    until_requests(&mtn, "requesttopay", phone, 1, within).await;
    signal(b_pid, "-CONT");
    // B asks MTN, which knows nothing yet, and sends the payment again.
    until_requests(&mtn, "requesttopay", phone, 2, within).await;
    refused.open();
    let (status, created) = create.await.unwrap();
    assert_eq!(status, 201, "{created}");
    assert_eq!(
        refusals_heard(&fleet, a, "initiate").await,
        1.0,
        "A heard the 429"
    );
    assert!(
        pawapay.requests("deposits").is_empty(),
        "a second provider was asked while MTN held the copy sent again"
    );
    taken.open();

    let id = created["id"].as_str().unwrap().to_string();
    let path = format!("/api/v1/collect/payments/{id}");
    let payment = read_until(&fleet, b, &path, &key, "completed").await;
    assert_eq!(payment["status"], "completed", "{payment}");
    let (_, route) = fleet.get(a, &format!("{path}/route"), &key).await;
    assert_eq!(route["adapter"], "momo", "{route}");
    assert_eq!(mtn.ids_for("requesttopay", phone).len(), 1, "under one id");
    let moved: Vec<_> = mtn
        .transactions()
        .into_iter()
        .filter(|t| normal_key(&t.party) == normal_key(phone))
        .collect();
    assert_eq!(moved.len(), 1, "one transaction at MTN: {moved:?}");
    assert!(
        pawapay.requests("deposits").is_empty(),
        "pawaPay never asked"
    );
}

/// A node's view of time, set by the test through libfaketime (preloaded,
/// it reads the offset from a file at every call, monotonic clock
/// included): a pause the node's clocks never see, as when a VM is paused
/// and its clocks are restored.
struct HiddenClock {
    file: std::path::PathBuf,
    preload: String,
}

impl HiddenClock {
    fn new(dir: &std::path::Path) -> HiddenClock {
        let file = dir.join("clock-offset");
        std::fs::write(&file, "+0").unwrap();
        let preload = libfaketime().to_str().unwrap().to_string();
        HiddenClock { file, preload }
    }

    fn env(&self) -> [(&str, &str); 3] {
        [
            ("LD_PRELOAD", &self.preload),
            ("FAKETIME_TIMESTAMP_FILE", self.file.to_str().unwrap()),
            ("FAKETIME_NO_CACHE", "1"),
        ]
    }

    /// Stops `pid` until `resume`.
    fn pause(&self, pid: u32) -> Instant {
        signal(pid, "-STOP");
        Instant::now()
    }

    /// Lets `pid` run again with its clocks where they were at `paused`.
    fn resume(&self, pid: u32, paused: Instant) {
        let hidden = paused.elapsed().as_secs_f64();
        std::fs::write(&self.file, format!("-{hidden:.3}")).unwrap();
        signal(pid, "-CONT");
    }
}

/// Node A claims a payout and sends it to MTN, whose gateway holds the
/// request; A is then paused in a way its clocks never see. Node B takes the
/// payouts job over, finds the payout unknown to MTN once nothing can be in
/// flight, and sends it again under the same id, which MTN holds too. A
/// comes back believing its lease still fresh, and MTN refuses A's copy
/// (nothing done, a 429): A must neither fail the payout over to pawaPay (B's
/// copy is on its way) nor record the refusal on B's attempt. MTN pays
/// once, pawaPay never hears of it, and the item completes.
#[service_test]
async fn a_node_back_from_a_pause_its_clock_missed_leaves_the_payout_sent_again_alone() {
    let (mtn, pawapay) = (FakeMtn::start().await, FakePawapay::start().await);
    mtn.settle_after(Duration::from_millis(200));
    let phone = "+2290166000929";
    let (refused, taken) = held_then_refused(&mtn, "transfer", phone);

    let dir = tempfile::tempdir().unwrap();
    let config = two_routes_config(dir.path(), &mtn, &pawapay);
    let clock = HiddenClock::new(dir.path());
    let db = TestDatabase::create();
    let url = db.url.clone();
    // A first, so that it holds the payouts job; then B.
    let mut fleet = Fleet::start_on(&url, Some(db), 0, &[("MMC_CONFIG", &config)]);
    let a = fleet.add_node(&clock.env());
    let a_pid = fleet.node(a).child.id();
    let until = Instant::now() + Duration::from_secs(20);
    while lease_holder_pid(&url, "job:bulk:payouts").await != Some(a_pid) {
        assert!(Instant::now() < until, "node A never held the payouts job");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let b = fleet.add_node(&[]);
    let merchant = fleet.cli(&["merchants", "create", "--name", "Payroll"]);
    let merchant = merchant["id"].as_str().unwrap().to_string();
    let live_key = || {
        let k = fleet.cli(&["keys", "create", "--merchant", &merchant, "--env", "live"]);
        k["key"].as_str().unwrap().to_string()
    };
    let (maker, checker) = (live_key(), live_key());
    let batch = json!({"name": "Paused", "items": [{"beneficiary_name": "Awa Koné",
        "phone": phone, "amount": 2500, "currency": "XOF", "reference": "paused-1"}]});
    let created = post(
        &fleet,
        b,
        "/api/v1/bulk-payments/",
        &maker,
        &new_key(),
        &batch,
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_string();
    let validate = format!("/api/v1/bulk-payments/{id}/validate/");
    let validated = post(&fleet, b, &validate, &checker, &new_key(), &json!({})).await;
    assert_eq!(validated.status, 200, "{}", validated.body);

    // A's transfer waits in MTN's gateway: pause A there.
    let within = Duration::from_secs(60);
    until_requests(&mtn, "transfer", phone, 1, within).await;
    let paused = clock.pause(a_pid);
    // B takes the job over and sends the payout again under its id.
    until_requests(&mtn, "transfer", phone, 2, within).await;
    clock.resume(a_pid, paused);
    refused.open();
    // A hears the refusal of its own copy at once; what it would do with
    // it (a failover) takes milliseconds.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        refusals_heard(&fleet, a, "payout").await,
        1.0,
        "A heard the 429"
    );
    assert!(
        pawapay.requests("payouts").is_empty(),
        "a second provider was asked while MTN held the copy sent again"
    );
    taken.open();

    let items = format!("/api/v1/bulk-payments/{id}/items/");
    let until = Instant::now() + Duration::from_secs(40);
    let item = loop {
        let (_, page) = fleet.get(b, &items, &maker).await;
        let item = page["results"][0].clone();
        if item["status"] == "completed" || Instant::now() > until {
            break item;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    };
    assert_eq!(item["status"], "completed", "{item}");
    assert_eq!(mtn.ids_for("transfer", phone).len(), 1, "under one id");
    let paid: Vec<_> = mtn
        .transactions()
        .into_iter()
        .filter(|t| normal_key(&t.party) == normal_key(phone))
        .collect();
    assert_eq!(paid.len(), 1, "one transfer at MTN: {paid:?}");
    assert!(
        pawapay.requests("payouts").is_empty(),
        "pawaPay never asked"
    );
}

/// The refund of a completed payment, asked on node A, whose wall clock
/// runs a minute behind node B's, which runs reconciliation: MTN's gateway
/// holds A's refund request, B finds the refund unknown to MTN and sends it
/// again under its id, then MTN refuses A's copy (429). A must not record
/// that refusal (which would fail the refund and free its amount for a
/// second refund under another id): B's copy is the attempt. The refund
/// completes, once, and is never reported failed.
#[service_test]
async fn a_late_refusal_of_a_refund_sent_again_meanwhile_neither_fails_nor_frees_it() {
    let (mtn, pawapay) = (FakeMtn::start().await, FakePawapay::start().await);
    mtn.settle_after(Duration::from_millis(200));
    let phone = "+2290166000939";
    let (refused, taken) = held_then_refused(&mtn, "refund", phone);
    let dir = tempfile::tempdir().unwrap();
    let config = two_routes_config(dir.path(), &mtn, &pawapay);
    let (fleet, b, a, key) = skewed_fleet(&config).await;
    let b_pid = fleet.node(b).child.id();
    let created = post(
        &fleet,
        b,
        "/api/v1/collect/payments",
        &key,
        &new_key(),
        &direct_payment(phone),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_string();
    let path = format!("/api/v1/collect/payments/{id}");
    let paid = read_until(&fleet, b, &path, &key, "completed").await;
    assert_eq!(paid["status"], "completed", "{paid}");

    // B waits while A's refund reaches MTN, so that the copy comes second.
    signal(b_pid, "-STOP");
    let url = fleet.url(a, &format!("{path}/refunds"));
    let refund = post_in_background(url, &key, json!({}));
    let within = Duration::from_secs(30);
    until_requests(&mtn, "refund", phone, 1, within).await;
    signal(b_pid, "-CONT");
    until_requests(&mtn, "refund", phone, 2, within).await;
    refused.open();
    let (status, answered) = refund.await.unwrap();
    assert_eq!(status, 201, "{answered}");
    assert_eq!(
        refusals_heard(&fleet, a, "refund").await,
        1.0,
        "A heard the 429"
    );
    assert_ne!(answered["status"], "failed", "{answered}");
    taken.open();

    let refunded = read_until(&fleet, b, &path, &key, "refunded").await;
    assert_eq!(refunded["status"], "refunded", "{refunded}");
    let (_, events) = fleet.get(b, "/api/v1/events?limit=100", &key).await;
    let types: Vec<&str> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["type"].as_str())
        .collect();
    assert!(
        !types.contains(&"collect.refund.failed"),
        "the refund was reported failed: {types:?}"
    );
    assert_eq!(mtn.ids_for("refund", phone).len(), 1, "under one id");
    let refunds: Vec<_> = mtn
        .transactions()
        .into_iter()
        .filter(|t| t.refund_of.is_some() && t.succeeded())
        .collect();
    assert_eq!(refunds.len(), 1, "one refund at MTN: {refunds:?}");
}
