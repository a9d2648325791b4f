//! A fleet: two or three `mmc serve` processes on one PostgreSQL database
//! (a throwaway one per test), each with a data directory of its own, as
//! nodes behind a load balancer would be. Always on PostgreSQL, whatever
//! `MMC_TEST_STORAGE` says.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use mmc_storage_postgres::test_util::TestDatabase;
use serde_json::{Value, json};

use crate::adapters_admin::new_version;
use crate::console::{Browser, PASSWORD};
use crate::process::ServerProcess;
use crate::receiver::Receiver;
use crate::support::*;
use mmc_test_kit::service_test;

const ADMIN_TOKEN: &str = "fleet-admin-token-0123456789abcdef0123";

/// Fields drop in order: the nodes stop before their database goes.
pub(crate) struct Fleet {
    pub(crate) nodes: Vec<Option<ServerProcess>>,
    dirs: Vec<tempfile::TempDir>,
    env: Vec<(String, String)>,
    /// Settings of one node only, by node (see [`Fleet::add_node`]).
    node_env: HashMap<usize, Vec<(String, String)>>,
    pub(crate) client: reqwest::Client,
    _db: Option<TestDatabase>,
}

impl Fleet {
    /// `n` nodes on a new database, with `extra` settings on each.
    pub(crate) fn start(n: usize, extra: &[(&str, &str)]) -> Fleet {
        let db = TestDatabase::create();
        let url = db.url.clone();
        Self::start_on(&url, Some(db), n, extra)
    }

    /// `n` nodes on the database at `url` (kept by the caller, or `db`);
    /// none, for a test that adds each with [`Fleet::add_node`].
    pub(crate) fn start_on(
        url: &str,
        db: Option<TestDatabase>,
        n: usize,
        extra: &[(&str, &str)],
    ) -> Fleet {
        let mut env: Vec<(String, String)> = vec![
            ("MMC_STORAGE__URL".into(), url.to_string()),
            ("MMC_STORAGE__POOL_SIZE".into(), "6".into()),
            ("MMC_WEBHOOKS__SECRETS_KEY".into(), TEST_SECRETS_KEY.into()),
            ("MMC_ADMIN__TOKEN".into(), ADMIN_TOKEN.into()),
            ("MMC_RATE_LIMIT__PER_SECOND".into(), "0".into()),
            ("MMC_WEBHOOKS__RETRY_SCHEDULE_MS".into(), "[100]".into()),
            ("MMC_WEBHOOKS__POLL_INTERVAL_MS".into(), "20".into()),
            ("MMC_WEBHOOKS__TIMEOUT_MS".into(), "1000".into()),
            // The test's webhook receiver listens on loopback.
            (
                "MMC_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS".into(),
                "true".into(),
            ),
        ];
        env.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let dirs: Vec<_> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
        let mut fleet = Fleet {
            _db: db,
            dirs,
            nodes: Vec::new(),
            env,
            node_env: HashMap::new(),
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
        };
        // The first node migrates the schema; the others start after it.
        for i in 0..n {
            fleet.nodes.push(Some(fleet.spawn(i)));
        }
        fleet
    }

    /// One more node, with `extra` settings of its own on top of the
    /// fleet's (a node whose clock is off, say). Returns its index.
    pub(crate) fn add_node(&mut self, extra: &[(&str, &str)]) -> usize {
        let i = self.nodes.len();
        self.dirs.push(tempfile::tempdir().unwrap());
        let extra = extra.iter().map(|(k, v)| (k.to_string(), v.to_string()));
        self.node_env.insert(i, extra.collect());
        self.nodes.push(Some(self.spawn(i)));
        i
    }

    /// Node `i`, its sessions named `mmc-node-<i>` on the server (a test
    /// can see what each node's sessions hold).
    pub(crate) fn spawn(&self, i: usize) -> ServerProcess {
        let env: Vec<(String, String)> = self
            .env
            .iter()
            .chain(self.node_env.get(&i).into_iter().flatten())
            .map(|(k, v)| match k.as_str() {
                "MMC_STORAGE__URL" => {
                    let sep = if v.contains('?') { '&' } else { '?' };
                    (k.clone(), format!("{v}{sep}application_name=mmc-node-{i}"))
                }
                _ => (k.clone(), v.clone()),
            })
            .collect();
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        ServerProcess::start(self.dirs[i].path(), &env)
    }

    pub(crate) fn node(&self, i: usize) -> &ServerProcess {
        self.nodes[i].as_ref().expect("node running")
    }

    pub(crate) fn url(&self, i: usize, path: &str) -> String {
        format!("{}{path}", self.node(i).base)
    }

    /// `mmc ARGS` on the fleet's database, as an operator's shell would run it.
    pub(crate) fn cli(&self, args: &[&str]) -> Value {
        let out = Command::new(env!("CARGO_BIN_EXE_mmc"))
            .args(args)
            .arg("--data-dir")
            .arg(scratch_dir())
            .envs(self.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .env_remove("MMC_CONFIG")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mmc {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// A merchant and a test key, made through the CLI: (merchant, key, key id).
    pub(crate) fn merchant(&self) -> (String, String, String) {
        let m = self.cli(&["merchants", "create", "--name", "Fleet"]);
        let id = id_of(&m);
        let k = self.cli(&["keys", "create", "--merchant", &id, "--env", "test"]);
        (id, k["key"].as_str().unwrap().to_string(), id_of(&k))
    }

    async fn send(
        &self,
        i: usize,
        method: reqwest::Method,
        path: &str,
        key: &str,
        idem: Option<&str>,
        body: Option<&Value>,
    ) -> (u16, Value) {
        let mut req = self
            .client
            .request(method, self.url(i, path))
            .bearer_auth(key);
        if let Some(k) = idem {
            req = req.header("Idempotency-Key", k);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        match req.send().await {
            Ok(resp) => {
                let status = resp.status().as_u16();
                (status, resp.json().await.unwrap_or(Value::Null))
            }
            Err(_) => (0, Value::Null),
        }
    }

    pub(crate) async fn get(&self, i: usize, path: &str, key: &str) -> (u16, Value) {
        self.send(i, reqwest::Method::GET, path, key, None, None)
            .await
    }

    async fn post(&self, i: usize, path: &str, key: &str, body: &Value) -> (u16, Value) {
        let idem = new_key();
        self.send(i, reqwest::Method::POST, path, key, Some(&idem), Some(body))
            .await
    }

    async fn admin(
        &self,
        i: usize,
        method: reqwest::Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Value {
        let mut req = self
            .client
            .request(method, format!("{}{path}", self.node(i).admin))
            .bearer_auth(ADMIN_TOKEN);
        if let Some(b) = body {
            req = req.header("content-type", "application/wasm").body(b);
        }
        let resp = req.send().await.unwrap();
        assert!(resp.status().is_success(), "{path}: {}", resp.status());
        resp.json().await.unwrap()
    }
}

/// The jobs a node runs under a lease (crates/server/src/workers.rs): collect's
/// expire, reconcile and index, bulk's payouts.
const JOBS: usize = 4;

/// A data directory for CLI runs (nothing of the fleet's lives in it).
fn scratch_dir() -> &'static Path {
    use std::sync::OnceLock;
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().unwrap()).path()
}

/// Polls `read` until the payment's status is `want` (15 s at most).
async fn wait_status<F, Fut>(read: F, want: &str) -> Value
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = (u16, Value)>,
{
    let mut last = Value::Null;
    for _ in 0..150 {
        let (_, p) = read().await;
        if p["status"] == want {
            return p;
        }
        last = p;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("never {want}: {last}");
}

#[service_test]
async fn a_payment_created_on_one_node_is_read_cancelled_and_refunded_on_another() {
    let fleet = Fleet::start(2, &[]);
    let (_, key, _) = fleet.merchant();

    // Stays in progress at the operator: cancelled through the other node.
    let (status, p) = fleet
        .post(
            0,
            "/api/v1/collect/payments",
            &key,
            &direct_payment("+2290166000004"),
        )
        .await;
    assert_eq!(status, 201, "{p}");
    let id = id_of(&p);
    let (status, read) = fleet
        .get(1, &format!("/api/v1/collect/payments/{id}"), &key)
        .await;
    assert_eq!(status, 200, "{read}");
    assert_eq!(read["id"], p["id"]);
    assert_eq!(read["reference"], p["reference"]);
    let (status, cancelled) = fleet
        .post(
            1,
            &format!("/api/v1/collect/payments/{id}/cancel"),
            &key,
            &json!({}),
        )
        .await;
    assert_eq!(status, 200, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled");
    let (_, again) = fleet
        .get(0, &format!("/api/v1/collect/payments/{id}"), &key)
        .await;
    assert_eq!(again["status"], "cancelled", "node A sees B's cancel");

    // Completes: refunded through the other node, read back through the first.
    let (status, p) = fleet
        .post(
            0,
            "/api/v1/collect/payments",
            &key,
            &direct_payment("+2290166000001"),
        )
        .await;
    assert_eq!(status, 201, "{p}");
    let id = id_of(&p);
    let path = format!("/api/v1/collect/payments/{id}");
    wait_status(|| fleet.get(1, &path, &key), "completed").await;
    let (status, refund) = fleet
        .post(
            1,
            &format!("{path}/refunds"),
            &key,
            &json!({"amount": p["amount"]}),
        )
        .await;
    assert!(status == 201 || status == 200, "{status}: {refund}");
    let refund_id = id_of(&refund);
    let (status, r) = fleet
        .get(0, &format!("/api/v1/collect/refunds/{refund_id}"), &key)
        .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["payment_id"], p["id"], "{r}");
}

#[service_test]
async fn fifty_concurrent_creates_under_one_key_over_three_nodes_make_one_payment_and_one_request_to_pay()
 {
    let fleet = Fleet::start(3, &[]);
    let (_, key, _) = fleet.merchant();
    let body = direct_payment("+2290166000001");
    let idem = new_key();
    let calls = (0..50).map(|i| {
        fleet.send(
            i % 3,
            reqwest::Method::POST,
            "/api/v1/collect/payments",
            &key,
            Some(&idem),
            Some(&body),
        )
    });
    let results = futures::future::join_all(calls).await;
    let id = id_of(the_one_created(&results));
    // The audit of adapter calls (shared by the fleet) shows one request to
    // pay: read once its writer has listed one (it batches), and again a
    // moment later for a second.
    let initiations = |calls: &Value| {
        calls["data"].as_array().map_or(0, |c| {
            c.iter().filter(|c| c["operation"] == "initiate").count()
        })
    };
    let path = format!("/admin/v1/payments/{id}/calls");
    let deadline = Instant::now() + Duration::from_secs(10);
    while initiations(&fleet.admin(0, reqwest::Method::GET, &path, None).await) == 0
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let calls = fleet.admin(0, reqwest::Method::GET, &path, None).await;
    assert_eq!(initiations(&calls), 1, "{calls}");
}

#[service_test]
async fn a_revoked_key_within_500_ms_and_a_deployed_adapter_reach_every_node() {
    let fleet = Fleet::start(3, &[]);
    let (_, key, key_id) = fleet.merchant();
    let path = "/api/v1/collect/payments/operators/";
    for i in 0..3 {
        assert_eq!(fleet.get(i, path, &key).await.0, 200, "node {i}");
    }
    // Revoked by the CLI, on the database: no node accepts a request sent
    // 500 ms after it (the CLI returns once the revocation is committed).
    fleet.cli(&["keys", "revoke", &key_id]);
    let revoked = Instant::now();
    let mut refused_after = [None; 3];
    while refused_after.iter().any(Option::is_none) && revoked.elapsed() < Duration::from_secs(5) {
        for (i, seen) in refused_after.iter_mut().enumerate() {
            if seen.is_some() {
                continue;
            }
            let sent = revoked.elapsed();
            if fleet.get(i, path, &key).await.0 == 401 {
                *seen = Some(sent);
            } else {
                assert!(
                    sent < Duration::from_millis(500),
                    "node {i} accepted it when sent {sent:?} after revocation"
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("revocation seen by the three nodes after {refused_after:?}");
    for (i, seen) in refused_after.iter().enumerate() {
        let seen = seen.unwrap_or_else(|| panic!("node {i} still accepts a revoked key"));
        assert!(seen < Duration::from_millis(520), "node {i}: {seen:?}");
    }

    // Deployed through node 0's admin API: served by every node.
    let original = std::fs::read(components_dir().join("simulator.wasm")).unwrap();
    let version = new_version(&original, "fleet");
    let deployed = fleet
        .admin(
            0,
            reqwest::Method::PUT,
            "/admin/v1/adapters/simulator",
            Some(version),
        )
        .await;
    let hash = deployed["hash"].as_str().unwrap().to_string();
    let started = Instant::now();
    let mut serving_after = [None; 3];
    while serving_after.iter().any(Option::is_none) && started.elapsed() < Duration::from_secs(30) {
        for (i, seen) in serving_after.iter_mut().enumerate() {
            if seen.is_some() {
                continue;
            }
            let list = fleet
                .admin(i, reqwest::Method::GET, "/admin/v1/adapters", None)
                .await;
            let serving = list["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["name"] == "simulator" && a["hash"] == hash.as_str());
            if serving {
                *seen = Some(started.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    println!("deploy served by the three nodes after {serving_after:?}");
    for (i, seen) in serving_after.iter().enumerate() {
        let seen = seen.unwrap_or_else(|| panic!("node {i} never served the deployed version"));
        assert!(seen <= Duration::from_secs(1), "node {i}: {seen:?}");
    }
    // And rolled back through node 2: nodes 0 and 1 go back too, to the version node 2 serves.
    let rolled = fleet
        .admin(
            2,
            reqwest::Method::POST,
            "/admin/v1/adapters/simulator/rollback",
            None,
        )
        .await;
    let previous = rolled["hash"].as_str().unwrap().to_string();
    assert_ne!(previous, hash);
    let back = Instant::now();
    for i in [0, 1] {
        loop {
            let list = fleet
                .admin(i, reqwest::Method::GET, "/admin/v1/adapters", None)
                .await;
            let serving = list["data"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["name"] == "simulator" && a["hash"] == previous.as_str());
            if serving {
                break;
            }
            assert!(
                back.elapsed() <= Duration::from_secs(1),
                "rollback not seen on node {i}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    println!(
        "rollback served by nodes 0 and 1 after {:?}",
        back.elapsed()
    );
}

#[service_test]
async fn a_keys_rate_limit_holds_across_the_fleet() {
    let fleet = Fleet::start(
        2,
        &[
            ("MMC_RATE_LIMIT__PER_SECOND", "20"),
            ("MMC_RATE_LIMIT__BURST", "20"),
        ],
    );
    let (_, key, _) = fleet.merchant();
    // The nodes learn of each other through their heartbeats.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let path = "/api/v1/collect/payments/operators/";
    // 200 requests as fast as they go, spread evenly as a balancer would:
    // over ~2 s the fleet allows the burst plus 20/s, not twice that.
    let started = Instant::now();
    let mut ok = 0;
    for round in 0..200 {
        if fleet.get(round % 2, path, &key).await.0 == 200 {
            ok += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let allowed = 20.0 + 20.0 * secs;
    println!(
        "rate limit over 2 nodes: {ok} of 200 accepted in {secs:.2} s (the limit allows {allowed:.0})"
    );
    assert!(
        f64::from(ok) <= allowed * 1.1 + 2.0,
        "{ok} accepted, the key's limit allows {allowed:.0}"
    );
    assert!(
        f64::from(ok) >= allowed * 0.5,
        "{ok} accepted of {allowed:.0}"
    );
}

#[service_test]
async fn ten_sigkills_of_one_node_lose_nothing_while_the_others_serve() {
    let receiver = Receiver::start().await;
    // A request cut by a kill is "possibly in flight" for the adapter's
    // deadline plus the operator's answer window (90 s, left at its default),
    // but no longer running once its node counts as dead (its liveness
    // lease, 5 s, then a heartbeat): a retry on a live node is told to wait only until then.
    let mut fleet = Fleet::start(3, &[]);
    let (merchant, key, _) = fleet.merchant();
    fleet.cli(&[
        "webhooks",
        "add",
        "--merchant",
        &merchant,
        "--env",
        "test",
        "--url",
        &receiver.url(),
    ]);
    struct Attempt {
        key: String,
        status: u16,
        payment: Value,
    }
    let mut attempts: Vec<Attempt> = Vec::new();
    let mut rng = Xorshift(0x2545_f491_4f6c_dd1d);
    let kills = 10;
    for round in 0..kills {
        let victim = rng.below(3) as usize;
        // Creates spread over the three nodes; the victim dies during them.
        let batch: Vec<(usize, String, Value)> = (0..30)
            .map(|i| {
                let mut body = direct_payment(if i % 3 == 0 {
                    "+2290166000001"
                } else {
                    "+2290166000004"
                });
                body["reference"] = json!(format!("fleet-{round}-{i}"));
                (i % 3, new_key(), body)
            })
            .collect();
        let sends = batch.iter().map(|(node, idem, body)| {
            fleet.send(
                *node,
                reqwest::Method::POST,
                "/api/v1/collect/payments",
                &key,
                Some(idem),
                Some(body),
            )
        });
        // SIGKILLed while the batch is in flight: mid-request for some of it.
        let pid = fleet.node(victim).child.id().to_string();
        let after = Duration::from_millis(5 + rng.below(60));
        let killer = async move {
            tokio::time::sleep(after).await;
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
        };
        let (results, ()) = tokio::join!(futures::future::join_all(sends), killer);
        drop(fleet.nodes[victim].take()); // reaped
        let mut unanswered = Vec::new();
        for ((node, idem, body), (status, payment)) in batch.into_iter().zip(results) {
            if status == 0 {
                unanswered.push((node, idem, body));
            } else {
                attempts.push(Attempt {
                    key: idem,
                    status,
                    payment,
                });
            }
        }
        // What was cut is retried with the same key on a live node, as a
        // client does: again after a 409 "in progress", until it is answered
        // (15 s at most, far less than the in-flight window).
        let live = (victim + 1) % 3;
        for (_, idem, body) in unanswered {
            let mut answer = (0, Value::Null);
            for _ in 0..150 {
                answer = fleet
                    .send(
                        live,
                        reqwest::Method::POST,
                        "/api/v1/collect/payments",
                        &key,
                        Some(&idem),
                        Some(&body),
                    )
                    .await;
                if answer.0 != 409 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            attempts.push(Attempt {
                key: idem,
                status: answer.0,
                payment: answer.1,
            });
        }
        fleet.nodes[victim] = Some(fleet.spawn(victim));
    }
    let acknowledged: Vec<&Attempt> = attempts
        .iter()
        .filter(|a| matches!(a.status, 200 | 201))
        .collect();
    assert!(
        attempts.iter().all(|a| matches!(a.status, 200 | 201)),
        "every create ends acknowledged: {:?}",
        attempts.iter().map(|a| a.status).collect::<Vec<_>>()
    );
    // Every 201 is readable, from any node.
    for (n, a) in acknowledged.iter().enumerate() {
        let id = id_of(&a.payment);
        let (status, stored) = fleet
            .get(n % 3, &format!("/api/v1/collect/payments/{id}"), &key)
            .await;
        assert_eq!(status, 200, "{stored}");
        assert_eq!(stored["reference"], a.payment["reference"]);
    }
    let mut ids_by_key: HashMap<&str, HashSet<&str>> = HashMap::new();
    for a in &acknowledged {
        ids_by_key
            .entry(a.key.as_str())
            .or_default()
            .insert(a.payment["id"].as_str().unwrap());
    }
    assert!(
        ids_by_key.values().all(|ids| ids.len() == 1),
        "an idempotency key made two payments"
    );
    // Every event the fleet wrote (each in the transaction of its change:
    // the created ones of every acknowledged payment among them, and the
    // processing and completed ones reconciliation wrote) arrives at least once.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut written: HashSet<String> = HashSet::new();
    let mut created: HashSet<String> = HashSet::new();
    let mut after: Option<String> = None;
    loop {
        let path = match &after {
            Some(a) => format!("/api/v1/events?limit=100&starting_after={a}"),
            None => "/api/v1/events?limit=100".to_string(),
        };
        let (status, page) = fleet.get(0, &path, &key).await;
        assert_eq!(status, 200, "{page}");
        for e in page["data"].as_array().unwrap() {
            written.insert(id_of(e));
            if e["type"] == "collect.payment.created" {
                created.insert(id_of(&e["data"]["object"]));
            }
            after = e["id"].as_str().map(str::to_string);
        }
        if page["has_more"] != true {
            break;
        }
    }
    let payments: HashSet<String> = acknowledged.iter().map(|a| id_of(&a.payment)).collect();
    assert!(
        payments.is_subset(&created),
        "every acknowledged payment's created event was written"
    );
    let got = receiver
        .wait_for(60, |r| {
            let seen: HashSet<String> = r
                .iter()
                .map(|x| x.json()["id"].as_str().unwrap_or_default().to_string())
                .collect();
            written.iter().all(|id| seen.contains(id))
        })
        .await;
    let expected = payments;
    let mut deliveries: HashMap<String, usize> = HashMap::new();
    for r in &got {
        *deliveries.entry(id_of(&r.json())).or_default() += 1;
    }
    let duplicates: usize = deliveries.values().map(|n| n - 1).sum();
    println!(
        "fleet crash test: {kills} SIGKILLs of one node of three; {} creates acknowledged ({} payments); \
         {} events written, all delivered: {} deliveries of {} distinct events, {duplicates} duplicates (at-least-once)",
        acknowledged.len(),
        expected.len(),
        written.len(),
        got.len(),
        deliveries.len()
    );
}

#[service_test]
async fn sigterm_finishes_what_a_node_serves_and_hands_its_jobs_over_at_once() {
    let mut fleet = Fleet::start(2, &[]);
    let (_, key, _) = fleet.merchant();
    let db = mmc_db::SqlDb::new(std::sync::Arc::new(
        mmc_db::Postgres::connect(&fleet._db.as_ref().unwrap().url).unwrap(),
    ));
    let holders = |pattern: &str| -> Vec<String> {
        db.read(|c| {
            c.query(
                "SELECT holder FROM leases WHERE name LIKE ?1 AND expires_ms >= ?2",
                &[pattern.into(), (now_ms() as i64).into()],
            )?
            .iter()
            .map(|r| r.text(0))
            .collect()
        })
        .unwrap()
    };
    // Both nodes alive (a heartbeat each), every job held by one of them.
    let deadline = Instant::now() + Duration::from_secs(10);
    while holders("node:%").len() < 2 || holders("job:%").len() < JOBS {
        assert!(Instant::now() < deadline, "nodes never registered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Requests on fresh connections to node 0, SIGTERM while they run.
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let url = fleet.url(0, "/api/v1/collect/payments");
    let sends = (0..20).map(|i| {
        let (client, url, key) = (client.clone(), url.clone(), key.clone());
        async move {
            tokio::time::sleep(Duration::from_millis(i * 10)).await;
            client
                .post(url)
                .bearer_auth(key)
                .header("Idempotency-Key", new_key())
                .json(&direct_payment("+2290166000001"))
                .send()
                .await
                .map(|r| r.status().as_u16())
        }
    });
    let node = fleet.nodes[0].take().unwrap();
    let stop = async move {
        tokio::time::sleep(Duration::from_millis(60)).await;
        tokio::task::spawn_blocking(move || node.terminate())
            .await
            .unwrap()
    };
    let (results, status) = tokio::join!(futures::future::join_all(sends), stop);
    assert!(status.success(), "a drained node exits 0: {status}");
    let (mut answered, mut refused) = (0, 0);
    for r in &results {
        match r {
            Ok(201) => answered += 1,
            // Came after the listener closed: never accepted, safe to retry.
            Err(e) if e.is_connect() => refused += 1,
            other => panic!("a request was cut or failed: {other:?}"),
        }
    }
    println!("SIGTERM: {answered} requests answered, {refused} refused at connect");
    assert!(answered > 0, "the node was serving when it was stopped");
    // Its leases went with it: one node left, holding every job, at once.
    let left = holders("node:%");
    assert_eq!(left.len(), 1, "{left:?}");
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let jobs = holders("job:%");
        if jobs.len() == JOBS && jobs.iter().all(|h| *h == left[0]) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the jobs were not taken over within 2 s: {jobs:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The fleet chapter's walkthrough (docs/fleet.md), as written: its `sh`
/// block run by bash with this test's database, ports, directories and binary.
#[service_test]
async fn the_fleet_chapters_walkthrough_works() {
    let chapter = std::fs::read_to_string(root().join("docs/fleet.md")).unwrap();
    let section = chapter
        .split("\n## ")
        .find(|s| s.starts_with("Walkthrough"))
        .expect("the fleet chapter has a Walkthrough section");
    let block = section
        .split("```")
        .skip(1)
        .step_by(2)
        .filter_map(|b| b.strip_prefix("sh\n"))
        .find(|b| b.contains("createdb"))
        .expect("the walkthrough's sh block")
        .to_string();
    let db = TestDatabase::create();
    let dir = tempfile::tempdir().unwrap();
    // Four free ports, held together until all are read: a port released at
    // once can be handed out again, and two nodes given the same admin port
    // left the walkthrough waiting forever for the one that could not start.
    let held: Vec<_> = (0..4)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    let free: Vec<String> = held
        .iter()
        .map(|l| l.local_addr().unwrap().port().to_string())
        .collect();
    drop(held);
    let mut script = block
        .replace(
            "createdb -h 127.0.0.1 -U postgres mmc_fleet",
            ": the test made its database",
        )
        .replace("postgres://postgres@127.0.0.1:5432/mmc_fleet", &db.url)
        .replace("target/release/mmc", env!("CARGO_BIN_EXE_mmc"))
        .replace("target/components", components_dir().to_str().unwrap());
    for (port, free) in ["8081", "8082", "9091", "9092"].into_iter().zip(&free) {
        script = script.replace(&format!("127.0.0.1:{port}"), &format!("127.0.0.1:{free}"));
    }
    for d in ["mmc-a", "mmc-b", "mmc-cli"] {
        script = script.replace(&format!("/tmp/{d}"), dir.path().join(d).to_str().unwrap());
    }
    assert!(
        !script.contains("mmc_fleet") && !script.contains(":8081"),
        "{script}"
    );
    let cache = cache_dir();
    let out = tokio::task::spawn_blocking(move || {
        // Bounded: the walkthrough waits for both nodes to answer, and a
        // node that cannot start must fail this test, not hang the suite.
        Command::new("timeout")
            .args(["-k", "5", "120", "bash", "-c"])
            .arg(format!(
                "set -euo pipefail\ntrap 'kill $(jobs -p) 2>/dev/null || true' EXIT\n{script}"
            ))
            .env("MMC_CACHE_DIR", cache)
            .env("MMC_LOG", "warn")
            .env_remove("MMC_CONFIG")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "the walkthrough failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The create on node a, then the reads on node b, before and after a left.
    let payments: Vec<Value> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l.trim()).ok())
        .filter(|v| v["object"] == "collect.payment")
        .collect();
    assert_eq!(payments.len(), 3, "{stdout}");
    for p in &payments {
        assert_eq!(p["reference"], "fleet-1", "{p}");
        assert_eq!(p["id"], payments[0]["id"], "{p}");
    }
}

/// Routes changed through one node's admin API are in force on every node
/// within a second; rolled back through another, likewise.
#[service_test]
async fn routes_changed_or_rolled_back_through_one_node_reach_every_node_within_a_second() {
    let fleet = Fleet::start(3, &[]);
    let body = json!({"routes": ["ghost", "simulator"], "note": "fleet"});
    let changed = fleet
        .admin(
            0,
            reqwest::Method::PUT,
            "/admin/v1/routes/test/mtn-bj",
            Some(body.to_string().into_bytes()),
        )
        .await;
    assert_eq!(
        changed["routes"]["test"]["mtn-bj"],
        json!(["ghost", "simulator"])
    );
    let version = fleet
        .admin(0, reqwest::Method::GET, "/admin/v1/routes", None)
        .await["version"]
        .clone();
    assert!(version.is_i64(), "{version}");
    let reach = |want: Value| {
        let fleet = &fleet;
        async move {
            let started = Instant::now();
            for i in 0..3 {
                loop {
                    let r = fleet
                        .admin(i, reqwest::Method::GET, "/admin/v1/routes", None)
                        .await;
                    if r["version"] == want {
                        break;
                    }
                    assert!(
                        started.elapsed() <= Duration::from_secs(1),
                        "node {i} still has routes version {}",
                        r["version"]
                    );
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
            started.elapsed()
        }
    };
    println!(
        "routes change in force on three nodes after {:?}",
        reach(version).await
    );
    fleet
        .admin(2, reqwest::Method::POST, "/admin/v1/routes/rollback", None)
        .await;
    println!(
        "rollback in force on three nodes after {:?}",
        reach(Value::Null).await
    );
}

#[service_test]
async fn console_sign_in_limits_and_sign_out_hold_across_the_fleet() {
    let fleet = Fleet::start(2, &[]);
    let (merchant, _, _) = fleet.merchant();
    let invited = fleet.cli(&[
        "users",
        "create",
        "--merchant",
        &merchant,
        "--email",
        "owner@fleet.bj",
        "--role",
        "owner",
    ]);
    let link = invited["sign_in_link"].as_str().unwrap();
    let path = &link[link.find("/console/").expect("a console link")..];
    let first = Browser::at(&fleet.node(0).base);
    first.accept(path, PASSWORD).await;

    // The session opened on one node is good on the other, and signing out
    // on one ends it on both.
    let second = Browser::at(&fleet.node(1).base);
    *second.cookies.lock().unwrap() = first.cookies.lock().unwrap().clone();
    assert_eq!(second.get("/console/payments").await.status, 200);
    let out = first
        .submit("/console/payments", "/console/sign-out", &[])
        .await;
    assert_eq!(out.location(), "/console/sign-in");
    assert_eq!(
        second.get("/console/payments").await.location(),
        "/console/sign-in",
        "signed out on every node"
    );

    // Guesses spread over the nodes count once: after five wrong
    // passwords, three on one node and two on the other, the account is
    // refused on both, the right password too.
    let guessers = [
        Browser::at(&fleet.node(0).base),
        Browser::at(&fleet.node(1).base),
    ];
    for i in 0..5 {
        let wrong = guessers[usize::from(i >= 3)]
            .sign_in("owner@fleet.bj", "not the password!", "")
            .await;
        assert_eq!(wrong.status, 401, "guess {i}: {}", wrong.body);
    }
    for guesser in &guessers {
        let limited = guesser.sign_in("owner@fleet.bj", PASSWORD, "").await;
        assert_eq!(limited.status, 429, "{}", limited.body);
    }

    // Forty guesses at once for another account, half on each node: at most
    // five reach a password check, whichever node they arrive on.
    let checks = || async {
        let mut sum = 0.0;
        for node in [fleet.node(0), fleet.node(1)] {
            let text = reqwest::get(format!("{}/metrics", node.base))
                .await
                .unwrap()
                .text()
                .await
                .unwrap();
            sum += counter(&text, "mmc_console_password_checks_total", "");
        }
        sum
    };
    let before = checks().await;
    let answers = futures::future::join_all(
        (0..40).map(|i| guessers[i % 2].sign_in("finance@fleet.bj", "not the password!", "")),
    )
    .await;
    let wrong = answers.iter().filter(|p| p.status == 401).count();
    assert_eq!(
        wrong + answers.iter().filter(|p| p.status == 429).count(),
        40
    );
    assert!((1..=5).contains(&wrong), "{wrong} guesses checked");
    assert_eq!(checks().await - before, wrong as f64);
}

/// Delivery claims on PostgreSQL lock the rows they claim and skip the rows
/// another claim holds: two nodes claiming at once get disjoint deliveries,
/// and neither waits for the other's transaction (no fleet-wide claim lock).
#[test]
fn delivery_claims_skip_what_another_nodes_claim_holds() {
    use mmc_db::{Postgres, SqlDb};
    use std::sync::{Arc, mpsc};
    let database = TestDatabase::create();
    let node = || SqlDb::new(Arc::new(Postgres::connect(&database.url).unwrap()));
    let (a, b) = (node(), node());
    a.write(|tx| {
        for i in 0..10 {
            tx.execute(
                "INSERT INTO deliveries (event_id, url, environment, merchant_id, status, next_attempt_ms, created_ms)
                 VALUES (?1, 'https://shop.example/hooks', 'test', 'm', 'pending', 0, 0)",
                &[format!("evt_{i}").into()],
            )?;
        }
        Ok(())
    })
    .unwrap();
    let claim = |tx: &mut dyn mmc_db::SqlConn, limit: i64| -> Vec<i64> {
        tx.query(
            mmc_webhooks::CLAIM_DUE_POSTGRES,
            &[limit.into(), 1_000i64.into(), 30_000i64.into()],
        )
        .unwrap()
        .iter()
        .map(|r| r.int(0).unwrap())
        .collect()
    };
    // Node A claims four and holds its transaction open until told.
    let (claimed_tx, claimed) = mpsc::channel();
    let (release_tx, release) = mpsc::channel::<()>();
    let holder = std::thread::spawn(move || {
        a.write(|tx| {
            claimed_tx.send(claim(tx, 4)).unwrap();
            release.recv().unwrap();
            Ok(())
        })
        .unwrap();
    });
    let held = claimed.recv().unwrap();
    assert_eq!(held.len(), 4, "{held:?}");
    // Node B claims meanwhile: the rest, at once.
    let (got_tx, got) = mpsc::channel();
    let claimer = std::thread::spawn(move || {
        got_tx
            .send(b.write(|tx| Ok(claim(tx, 10))).unwrap())
            .unwrap();
    });
    let other = got.recv_timeout(Duration::from_secs(5));
    release_tx.send(()).unwrap();
    holder.join().unwrap();
    claimer.join().unwrap();
    let other = other.expect("a claim waited for another node's open claim");
    assert_eq!(other.len(), 6, "{other:?}");
    assert!(
        other.iter().all(|id| !held.contains(id)),
        "{held:?} {other:?}"
    );
    // Committed, both leases hold: nothing is due until they end.
    let again = node().write(|tx| Ok(claim(tx, 10))).unwrap();
    assert!(again.is_empty(), "{again:?}");
}
