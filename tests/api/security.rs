//! The attacks of the security review (`SECURITY.md`), each run
//! against the `mmc` binary started as a deployment starts it — default
//! settings: private destinations refused, the admin API on its own loopback
//! listener with a generated token — and each asserted to fail. (Attacks that
//! need a fake operator, such as forged callbacks, run in the adapters suite.)

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::process::{cli, serve_args};
use crate::support::*;
use mmc_test_kit::service_test;

/// `mmc serve` as deployed: only `env` differs from the defaults.
struct Deployed {
    child: Child,
    base: String,
    admin: String,
    /// Everything it printed before listening.
    printed: Vec<String>,
    client: reqwest::Client,
}

impl Drop for Deployed {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn command(data_dir: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mmc"));
    serve_args(&mut cmd, data_dir)
        .env_remove("MMC_ADMIN_TOKEN")
        .env_remove("MMC_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

fn deploy(data_dir: &Path, env: &[(&str, &str)]) -> Deployed {
    let mut child = command(data_dir, env)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("mmc starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut base, mut printed) = (None, Vec::new());
    let admin = loop {
        let line = lines.next().expect("mmc prints its addresses").unwrap();
        if let Some(a) = line.strip_prefix("mmc listening on ") {
            base = Some(a.trim().to_string());
        } else if let Some(a) = line.strip_prefix("mmc admin on ") {
            break a.trim().to_string();
        }
        printed.push(line);
    };
    std::thread::spawn(move || for _ in lines {});
    Deployed {
        child,
        base: base.expect("the public address comes first"),
        admin,
        printed,
        client: reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap(),
    }
}

impl Deployed {
    async fn send(
        &self,
        method: reqwest::Method,
        url: String,
        key: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self
            .client
            .request(method, url)
            .bearer_auth(key)
            .header("Idempotency-Key", new_key());
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, key: &str, path: &str, body: Value) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        self.send(reqwest::Method::POST, url, key, Some(body)).await
    }

    async fn get(&self, key: &str, path: &str) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        self.send(reqwest::Method::GET, url, key, None).await
    }
}

/// A merchant and a test key made with the CLI, as an operator of the service would.
fn merchant_and_key(data_dir: &Path, scopes: Option<&str>) -> (String, String) {
    let m = cli(data_dir, &["merchants", "create", "--name", "Target"]);
    let id = id_of(&m);
    let mut args = vec!["keys", "create", "--merchant", &id, "--env", "test"];
    if let Some(s) = scopes {
        args.extend(["--scopes", s]);
    }
    let k = cli(data_dir, &args);
    (id, k["key"].as_str().unwrap().to_string())
}

#[service_test]
async fn the_admin_plane_is_closed_to_the_public_to_anonymous_uploads_and_to_short_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let server = deploy(dir.path(), &[]);
    // Not served on the public listener at all.
    let resp = server
        .client
        .get(format!("{}/admin/v1/adapters", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    // The generated token: in a 0600 file, never printed.
    let token_file = dir.path().join("admin_token");
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_string();
    assert!(token.len() >= 32);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    assert!(server.printed.iter().all(|l| !l.contains(&token)));
    let admin = |t: Option<&str>| {
        let mut req = server
            .client
            .get(format!("{}/admin/v1/adapters", server.admin));
        if let Some(t) = t {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    assert_eq!(admin(None).await.unwrap().status(), 401);
    assert_eq!(admin(Some("wrong")).await.unwrap().status(), 401);
    assert_eq!(admin(Some(&token)).await.unwrap().status(), 200);

    // An anonymous 60 MiB upload is refused on its headers: no byte of the body is read.
    let addr = server.admin.trim_start_matches("http://").to_string();
    let answer = tokio::task::spawn_blocking(move || {
        let mut s = TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(
            s,
            "POST /admin/v1/adapters/simulator HTTP/1.1\r\nHost: x\r\nContent-Length: 62914560\r\n\r\n"
        )
        .unwrap();
        let mut head = [0u8; 64];
        let n = s.read(&mut head).unwrap_or(0);
        String::from_utf8_lossy(&head[..n]).to_string()
    })
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer:?}");

    // A short or empty token: the service refuses to start.
    for short in ["", "secret"] {
        let out = command(dir.path(), &[("MMC_ADMIN_TOKEN", short)])
            .output()
            .unwrap();
        assert!(!out.status.success(), "started with admin token {short:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("32 characters"));
    }
}

#[service_test]
async fn slow_clients_are_cut_and_no_key_can_make_the_service_call_its_own_network() {
    let dir = tempfile::tempdir().unwrap();
    let server = deploy(
        dir.path(),
        &[("MMC_CONNECTIONS__HEADER_READ_TIMEOUT_MS", "300")],
    );
    // Slowloris: 50 connections that never finish their headers are closed.
    let addr = server.base.trim_start_matches("http://").to_string();
    let closed = tokio::task::spawn_blocking(move || {
        let mut slow: Vec<TcpStream> = (0..50)
            .map(|_| {
                let mut s = TcpStream::connect(&addr).unwrap();
                s.write_all(b"GET /healthz HTTP/1.1\r\n").unwrap();
                s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
                s
            })
            .collect();
        let started = Instant::now();
        let closed = slow
            .iter_mut()
            .map(|s| s.read(&mut [0u8; 256]))
            .filter(|r| matches!(r, Ok(0) | Err(_)))
            .count();
        (closed, started.elapsed())
    })
    .await
    .unwrap();
    assert_eq!(closed.0, 50, "every slow connection closed");
    assert!(closed.1 < Duration::from_secs(4), "{:?}", closed.1);
    let healthz = server.client.get(format!("{}/healthz", server.base));
    assert_eq!(healthz.send().await.unwrap().status(), 200);

    // SSRF: a test key cannot point webhooks or callback_url at private,
    // loopback, metadata or IPv6-transition addresses.
    let (_, key) = merchant_and_key(dir.path(), None);
    for url in [
        "http://127.0.0.1:9090/admin/v1/adapters",
        "http://10.0.0.5/hook",
        "http://169.254.169.254/latest/meta-data/",
        "http://[64:ff9b::7f00:1]/hook",
        "http://[2002:7f00:1::]/hook",
        "http://[::ffff:127.0.0.1]/hook",
    ] {
        let (status, e) = server
            .post(
                &key,
                "/api/v1/webhook-endpoints",
                json!({"url": url, "enabled_events": ["*"]}),
            )
            .await;
        assert_eq!(
            (status, e["error"]["param"].as_str()),
            (400, Some("url")),
            "{url}: {e}"
        );
    }
    // A payment's callback_url is taken with the payment, but its delivery to
    // loopback is refused before any connection, and says nothing more.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let mut body = direct_payment("+2290166000001");
    body["callback_url"] = json!(format!("http://{}/hook", listener.local_addr().unwrap()));
    let (status, p) = server.post(&key, "/api/v1/collect/payments", body).await;
    assert_eq!(status, 201, "{p}");
    let id = id_of(&p);
    let until = Instant::now() + Duration::from_secs(10);
    let attempt = loop {
        let (_, events) = server
            .get(&key, &format!("/api/v1/events?payment={id}"))
            .await;
        if let Some(first) = events["data"][0]["id"].as_str() {
            let (_, event) = server.get(&key, &format!("/api/v1/events/{first}")).await;
            let attempt = event["deliveries"][0]["attempts"][0].clone();
            if !attempt.is_null() {
                break attempt;
            }
        }
        assert!(Instant::now() < until, "no delivery attempt recorded");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(attempt["error"], "destination_refused", "{attempt}");
    assert!(attempt["status_code"].is_null());
    assert!(listener.accept().is_err(), "nothing connected to loopback");
}

#[service_test]
async fn anonymous_floods_leaked_keys_and_database_copies_get_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let server = deploy(
        dir.path(),
        &[
            ("MMC_RATE_LIMIT__PER_CLIENT_PER_SECOND", "1"),
            ("MMC_RATE_LIMIT__PER_CLIENT_BURST", "20"),
        ],
    );
    let (merchant, key) = merchant_and_key(dir.path(), None);

    // The checkout page: a direct payment's id opens nothing; a hosted one
    // shows the customer's phone masked.
    let (_, direct) = server
        .post(
            &key,
            "/api/v1/collect/payments",
            direct_payment("+2290166001234"),
        )
        .await;
    let page = |id: &str| {
        server
            .client
            .get(format!("{}/checkout/{id}", server.base))
            .send()
    };
    assert_eq!(page(&id_of(&direct)).await.unwrap().status(), 404);
    let hosted = json!({"reference": "h-1", "amount": 1000, "currency": "XOF", "country": "BJ",
        "mode": "hosted", "customer": {"phone": "+2290166001234"}});
    let (status, hosted) = server.post(&key, "/api/v1/collect/payments", hosted).await;
    assert_eq!(status, 201, "{hosted}");
    let html = page(&id_of(&hosted)).await.unwrap().text().await.unwrap();
    assert!(!html.contains("66001234") && html.contains("34"), "{html}");

    // A flood of anonymous views from one address is cut off.
    let mut limited = 0;
    for _ in 0..40 {
        if page("00000000-0000-4000-8000-000000000000")
            .await
            .unwrap()
            .status()
            == 429
        {
            limited += 1;
        }
    }
    assert!(limited >= 15, "{limited} of 40 refused");

    // A leaked read-only key moves no money.
    let (_, reader) = merchant_and_key(dir.path(), Some("payments:read"));
    let (status, e) = server
        .post(
            &reader,
            "/api/v1/collect/payments",
            direct_payment("+2290166000001"),
        )
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("insufficient_scope"))
    );
    assert_eq!(
        server.get(&reader, "/api/v1/webhook-endpoints").await.0,
        403
    );

    // Maker-checker: with the rule on, the key that made a batch cannot pay it out.
    let rule = cli(
        dir.path(),
        &[
            "merchants",
            "update",
            &merchant,
            "--env",
            "test",
            "--require-second-approver",
            "true",
        ],
    );
    assert_eq!(rule["require_second_approver"], true);
    tokio::time::sleep(Duration::from_millis(600)).await; // the key cache holds 500 ms
    let item = json!({"beneficiary_name": "Awa", "phone": "+2290166000001", "amount": 1000,
        "currency": "XOF", "reference": "salary-1"});
    let (status, batch) = server
        .post(
            &key,
            "/api/v1/bulk-payments/",
            json!({"name": "June", "items": [item]}),
        )
        .await;
    assert_eq!(status, 201, "{batch}");
    let (status, e) = server
        .post(
            &key,
            &format!("/api/v1/bulk-payments/{}/validate/", id_of(&batch)),
            json!({}),
        )
        .await;
    assert_eq!(
        (status, e["error"]["code"].as_str()),
        (403, Some("second_approver_required"))
    );

    // A copy of the database holds no webhook signing secret.
    let (status, endpoint) = server
        .post(
            &key,
            "/api/v1/webhook-endpoints",
            json!({"url": "https://93.184.216.34/hook", "enabled_events": ["*"]}),
        )
        .await;
    assert_eq!(status, 201, "{endpoint}");
    let secret = endpoint["secret"].as_str().unwrap();
    let stored = test_storage(&base_config(dir.path()))
        .sql
        .read(|c| {
            c.query_one("SELECT secret FROM webhook_endpoints", &[])?
                .text(0)
        })
        .unwrap();
    assert!(stored.starts_with("sealed:v1:") && !stored.contains(secret));
}
