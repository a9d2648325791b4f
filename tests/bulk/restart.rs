//! Kill the real binary in the middle of a batch, start it again, and prove
//! that nobody was paid twice. Payouts are observed from outside: the test
//! environment is routed to the `payout-recorder` adapter, which reports
//! every payout to an HTTP server run here.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::helpers::{ROOT, Recorder, bj, is_final, item, recorder_components, with_fresh_key};
use crate::support::{TEST_SECRETS_KEY, cache_dir, storage_env};

/// Runs `mmc` to completion; its one JSON line.
fn cli(args: &[&str]) -> Value {
    let data = args
        .iter()
        .position(|a| *a == "--data-dir")
        .map(|i| PathBuf::from(args[i + 1]));
    cli_with(args, &data.map(|d| storage_env(&d)).unwrap_or_default())
}

fn cli_with(args: &[&str], env: &[(&str, String)]) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mmc"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
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

/// `mmc serve` as a child process.
struct Server {
    child: tokio::process::Child,
    base: String,
}

impl Server {
    async fn start(data: &Path, components: &Path, config: &Path, log: &Path) -> Server {
        Self::start_with(data, components, config, log, &storage_env(data)).await
    }

    async fn start_with(
        data: &Path,
        components: &Path,
        config: &Path,
        log: &Path,
        env: &[(&str, String)],
    ) -> Server {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .unwrap();
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mmc"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data)
            .arg("--components-dir")
            .arg(components)
            .arg("--config")
            .arg(config)
            .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
            .env_remove("MMC_CONFIG")
            .env("MMC_ADMIN__LISTEN", "127.0.0.1:0")
            .env("MMC_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true")
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log))
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let base = tokio::time::timeout(Duration::from_secs(120), async {
            while let Some(line) = lines.next_line().await.unwrap() {
                if let Some(addr) = line.strip_prefix("mmc listening on ") {
                    return addr.trim().to_string();
                }
            }
            panic!("mmc serve exited before listening");
        })
        .await
        .expect("mmc serve listens within 2 minutes");
        // Keep reading, as a supervisor would: the pipe stays open.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Server { child, base }
    }

    /// SIGKILL: no shutdown path runs.
    async fn kill(mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }
}

fn write_config(dir: &Path, recorder: SocketAddr) -> PathBuf {
    let path = dir.join("mmc.toml");
    let text = format!(
        r#"cache_dir = {cache:?}

[routing.test]
"*" = "payout-recorder"

[components.payout-recorder]
allowed_hosts = ["{recorder}"]

[components.payout-recorder.settings]
url = "http://{recorder}"

[components.bulk.settings]
# Ask about an unfinished claim 1 s after it, not 60 s.
claim_grace_ms = "1000"
"#,
        cache = cache_dir().display().to_string(),
    );
    std::fs::write(&path, text).unwrap();
    path
}

async fn call(
    client: &reqwest::Client,
    key: &str,
    method: reqwest::Method,
    url: String,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = client.request(method, url).bearer_auth(key);
    if let Some(b) = body {
        req = with_fresh_key(req).json(&b);
    }
    let resp = req.send().await.unwrap();
    (
        resp.status().as_u16(),
        resp.json().await.unwrap_or(Value::Null),
    )
}

/// Polls the batch at `url` until it is final (`secs` at most; the server log on failure).
async fn wait_final(
    client: &reqwest::Client,
    key: &str,
    url: &str,
    log: &Path,
    secs: u64,
) -> Value {
    let started = Instant::now();
    loop {
        let (status, b) = call(client, key, reqwest::Method::GET, url.to_string(), None).await;
        assert_eq!(status, 200, "{b}");
        if is_final(b["status"].as_str().unwrap()) {
            return b;
        }
        assert!(
            started.elapsed() < Duration::from_secs(secs),
            "not finished: {b}\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The payout ids the operator received more than once, with their counts.
fn paid_twice(posts: &[String]) -> Vec<(&str, usize)> {
    let mut per_id: HashMap<&str, usize> = HashMap::new();
    for p in posts {
        *per_id.entry(p).or_default() += 1;
    }
    per_id.into_iter().filter(|(_, n)| *n > 1).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kill_and_restart_in_the_middle_of_a_batch_pays_nobody_twice() {
    const ITEMS: usize = 150;
    const KILL_AT: usize = 40;
    let (recorder, recorder_addr) = Recorder::start(KILL_AT).await;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let components = recorder_components(dir.path());
    let config = write_config(dir.path(), recorder_addr);
    let log = dir.path().join("mmc.log");
    let data_arg = data.to_str().unwrap();
    let merchant = cli(&[
        "merchants",
        "create",
        "--name",
        "Restart SA",
        "--data-dir",
        data_arg,
    ]);
    let key = cli(&[
        "keys",
        "create",
        "--merchant",
        merchant["id"].as_str().unwrap(),
        "--env",
        "test",
        "--data-dir",
        data_arg,
    ])["key"]
        .as_str()
        .unwrap()
        .to_string();
    let client = reqwest::Client::new();

    let server = Server::start(&data, &components, &config, &log).await;
    let items: Vec<Value> = (0..ITEMS as u32)
        .map(|i| item(&bj(101_000 + i), 1000, &format!("r{i}")))
        .collect();
    let (status, b) = call(
        &client,
        &key,
        reqwest::Method::POST,
        format!("{}{ROOT}", server.base),
        Some(json!({"name": "restart", "items": items})),
    )
    .await;
    assert_eq!(status, 201, "{b}");
    let id = b["id"].as_str().unwrap().to_string();
    let batch_url = |base: &str| format!("{base}{ROOT}{id}/");
    let (status, v) = call(
        &client,
        &key,
        reqwest::Method::POST,
        format!("{}validate/", batch_url(&server.base)),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200, "{v}");

    // Kill while payout #40 is at the operator, unanswered.
    tokio::time::timeout(Duration::from_secs(60), recorder.held.notified())
        .await
        .unwrap_or_else(|_| {
            panic!(
                "payout #{KILL_AT} never arrived; server log:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            )
        });
    server.kill().await;
    let at_kill = recorder.posts();
    assert_eq!(at_kill.len(), KILL_AT, "the batch was cut in the middle");
    let held = at_kill.last().unwrap().clone();

    let server = Server::start(&data, &components, &config, &log).await;
    let done = wait_final(&client, &key, &batch_url(&server.base), &log, 90).await;

    // Nobody paid twice: each payout id reached the operator once.
    let posts = recorder.posts();
    let twice = paid_twice(&posts);
    assert!(twice.is_empty(), "paid more than once: {twice:?}");
    // Everyone paid: the payout whose answer was lost was asked about, not resent.
    assert_eq!(posts.len(), ITEMS);
    assert!(
        recorder
            .status_queries
            .lock()
            .get(&held)
            .copied()
            .unwrap_or(0)
            >= 1,
        "the unanswered payout was resolved by asking the operator"
    );
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["items_by_status"]["completed"], ITEMS as u64);

    let mut ids = Vec::new();
    let mut next = Some(format!("{}items/?page_size=100", batch_url(&server.base)));
    while let Some(url) = next {
        let (_, page) = call(&client, &key, reqwest::Method::GET, url, None).await;
        for i in page["results"].as_array().unwrap() {
            assert_eq!(i["status"], "completed", "{i}");
            assert_eq!(i["attempts"], 1, "{i}");
            ids.push(i["id"].as_str().unwrap().to_string());
        }
        next = page["next"].as_str().map(str::to_string);
    }
    ids.sort();
    let mut paid = posts.clone();
    paid.sort();
    assert_eq!(ids, paid, "the payout ids are the item ids");
    server.kill().await;
}

/// The node paying a batch out is SIGKILLed mid-batch while another node
/// serves on, on one PostgreSQL database: the other takes the payouts job
/// over when the lease expires, asks about the payout left unanswered, and
/// pays the rest; every payout reaches the operator exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_200_survives_the_death_of_the_node_paying_it() {
    const ITEMS: usize = 200;
    const KILL_AT: usize = 60;
    let (recorder, recorder_addr) = Recorder::start(KILL_AT).await;
    let db = mmc_storage_postgres::test_util::TestDatabase::create();
    let dir = tempfile::tempdir().unwrap();
    let components = recorder_components(dir.path());
    let config = write_config(dir.path(), recorder_addr);
    let log = dir.path().join("mmc.log");
    let env = vec![
        ("MMC_STORAGE__URL", db.url.clone()),
        ("MMC_STORAGE__POOL_SIZE", "6".to_string()),
        ("MMC_WEBHOOKS__SECRETS_KEY", TEST_SECRETS_KEY.to_string()),
    ];
    let (a, b) = (dir.path().join("a"), dir.path().join("b"));
    let merchant = cli_with(&["merchants", "create", "--name", "Fleet SA"], &env);
    let key = cli_with(
        &[
            "keys",
            "create",
            "--merchant",
            merchant["id"].as_str().unwrap(),
            "--env",
            "test",
        ],
        &env,
    )["key"]
        .as_str()
        .unwrap()
        .to_string();
    let mut nodes = vec![
        Server::start_with(&a, &components, &config, &log, &env).await,
        Server::start_with(&b, &components, &config, &log, &env).await,
    ];
    let client = reqwest::Client::new();
    let items: Vec<Value> = (0..ITEMS as u32)
        .map(|i| item(&bj(102_000 + i), 1000, &format!("f{i}")))
        .collect();
    let (status, batch) = call(
        &client,
        &key,
        reqwest::Method::POST,
        format!("{}{ROOT}", nodes[0].base),
        Some(json!({"name": "fleet", "items": items})),
    )
    .await;
    assert_eq!(status, 201, "{batch}");
    let id = batch["id"].as_str().unwrap().to_string();
    let batch_url = |base: &str| format!("{base}{ROOT}{id}/");
    let (status, v) = call(
        &client,
        &key,
        reqwest::Method::POST,
        format!("{}validate/", batch_url(&nodes[1].base)),
        Some(json!({})),
    )
    .await;
    assert_eq!(status, 200, "{v}");

    // Payout #60 is at the operator, unanswered: kill the node that sent it
    // (the holder of the payouts job's lease, `host:pid:…`).
    tokio::time::timeout(Duration::from_secs(60), recorder.held.notified())
        .await
        .expect("the held payout arrives");
    let sql = mmc_db::SqlDb::new(std::sync::Arc::new(
        mmc_db::Postgres::connect(&db.url).unwrap(),
    ));
    let holder = sql
        .read(|c| {
            c.query_one(
                "SELECT holder FROM leases WHERE name = 'job:bulk:payouts'",
                &[],
            )?
            .text(0)
        })
        .unwrap();
    let pid: u32 = holder.split(':').nth(1).unwrap().parse().unwrap();
    let victim = nodes
        .iter()
        .position(|n| n.child.id() == Some(pid))
        .unwrap_or_else(|| panic!("lease holder {holder} is none of the nodes"));
    nodes.remove(victim).kill().await;
    let survivor = &nodes[0];

    let started = Instant::now();
    let done = wait_final(&client, &key, &batch_url(&survivor.base), &log, 120).await;
    let posts = recorder.posts();
    let twice = paid_twice(&posts);
    println!(
        "fleet batch: {ITEMS} payouts, the paying node killed at #{KILL_AT}; {} sent, {} twice; finished {:?} after the kill",
        posts.len(),
        twice.len(),
        started.elapsed()
    );
    assert!(twice.is_empty(), "paid more than once: {twice:?}");
    assert_eq!(posts.len(), ITEMS, "everyone paid once");
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["items_by_status"]["completed"], ITEMS as u64);
}
