//! Logs as a deployment reads them: no colour codes when written to a file,
//! and one JSON object a line with `log.format = "json"` for a log pipeline,
//! each request's line carrying its id, merchant, component and duration.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::support::*;
use mmc_test_kit::service_test;

/// `mmc serve --demo` with stderr to a file.
struct Served {
    child: Child,
    base: String,
    /// The demo merchant's id and test key, as printed.
    merchant_id: String,
    key: String,
    log_path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn serve(env: &[(&str, &str)]) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("mmc.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let data = dir.path().join("data");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mmc"));
    cmd.args(["serve", "--demo", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .arg("--components-dir")
        .arg(components_dir())
        .env("MMC_CACHE_DIR", cache_dir())
        .env("MMC_LOG", "info")
        .env("MMC_ADMIN__LISTEN", "127.0.0.1:0")
        .envs(storage_env(&data))
        .env_remove("MMC_CONFIG")
        .stdout(Stdio::piped())
        .stderr(log);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut merchant_id, mut key) = (None, None);
    let base = loop {
        let line = lines.next().expect("mmc prints its address").unwrap();
        if let Some(rest) = line.strip_prefix("Demo merchant: ") {
            // `Demo Merchant (<id>)`
            merchant_id = rest
                .rsplit_once('(')
                .map(|(_, id)| id.trim_end_matches(')').to_string());
        } else if let Some(rest) = line.strip_prefix("Test API key:") {
            key = rest.split_whitespace().next().map(str::to_string);
        } else if let Some(addr) = line.strip_prefix("mmc listening on ") {
            break addr.trim().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    Served {
        child,
        base,
        merchant_id: merchant_id.expect("the demo merchant is printed"),
        key: key.expect("the demo key is printed"),
        log_path,
        _dir: dir,
    }
}

impl Served {
    /// Stops the server; what it logged.
    fn logs(mut self) -> String {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
        std::fs::read_to_string(&self.log_path).unwrap()
    }
}

/// Starts `mmc serve` with stderr to a file, makes one request, stops it;
/// returns what it logged.
fn logs_of_a_run(env: &[(&str, &str)]) -> String {
    let served = serve(env);
    let addr = served.base.trim_start_matches("http://");
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    served.logs()
}

#[test]
fn logs_to_a_file_carry_no_colour_codes_and_json_is_one_object_a_line() {
    let text = logs_of_a_run(&[]);
    assert!(text.contains("INFO"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "no ANSI escape in a file:\n{text}"
    );

    let json = logs_of_a_run(&[("MMC_LOG__FORMAT", "json")]);
    let lines: Vec<&str> = json.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for line in lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["level"].is_string() && v["timestamp"].is_string(), "{v}");
        assert!(v["message"].is_string(), "{v}");
        // Health checks are logged at debug: they would flood the log at info.
        assert_ne!(v["span"]["path"], "/healthz", "{v}");
    }
}

#[service_test]
async fn each_request_logs_one_json_line_with_its_id_merchant_component_and_duration() {
    let served = tokio::task::spawn_blocking(|| serve(&[("MMC_LOG__FORMAT", "json")]))
        .await
        .unwrap();
    let client = reqwest::Client::new();
    let create = |reference: &str, phone: &str| {
        client
            .post(format!("{}/api/v1/collect/payments", served.base))
            .bearer_auth(&served.key)
            .header("Idempotency-Key", uuid::Uuid::new_v4().to_string())
            .json(&json!({
                "reference": reference, "amount": 1500, "currency": "XOF", "country": "BJ",
                "operator": "mtn-bj", "customer": {"phone": phone},
            }))
            .send()
    };
    let request_id =
        |resp: &reqwest::Response| resp.headers()["x-request-id"].to_str().unwrap().to_string();
    let created = create("order-1", "+2290166000001").await.unwrap();
    assert_eq!(created.status(), 201);
    let created_id = request_id(&created);
    let read = client
        .get(format!(
            "{}/api/v1/collect/payments/order-1?sync=true",
            served.base
        ))
        .bearer_auth(&served.key)
        .send()
        .await
        .unwrap();
    assert_eq!(read.status(), 200);
    let read_id = request_id(&read);
    // The simulator refuses numbers ending 0005: the host logs it, in the request.
    let refused = create("order-2", "+2290166000005").await.unwrap();
    assert_eq!(refused.status(), 201);
    let refused_id = request_id(&refused);
    let unauthenticated = client
        .get(format!("{}/api/v1/collect/payments/order-1", served.base))
        .bearer_auth("mk_test_00000000000000000000000000000000")
        .send()
        .await
        .unwrap();
    assert_eq!(unauthenticated.status(), 401);
    let unauthenticated_id = request_id(&unauthenticated);
    let health = client
        .get(format!("{}/healthz", served.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);

    let (merchant_id, key) = (served.merchant_id.clone(), served.key.clone());
    let logs = tokio::task::spawn_blocking(move || served.logs())
        .await
        .unwrap();
    let lines: Vec<Value> = logs
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    assert!(!logs.contains(&key), "the API key is never logged:\n{logs}");
    let of = |id: &str| -> Vec<&Value> {
        lines
            .iter()
            .filter(|v| v["span"]["request_id"] == id)
            .collect()
    };
    let request_line = |id: &str| -> &Value {
        let ends: Vec<&Value> = of(id)
            .into_iter()
            .filter(|v| v["message"] == "request")
            .collect();
        assert_eq!(ends.len(), 1, "one line at the end of {id}:\n{logs}");
        ends[0]
    };

    for (id, method, path, status) in [
        (&created_id, "POST", "/api/v1/collect/payments", 201),
        // No query string.
        (&read_id, "GET", "/api/v1/collect/payments/order-1", 200),
    ] {
        let line = request_line(id);
        assert_eq!(line["level"], "INFO", "{line}");
        assert_eq!(line["status"], status, "{line}");
        assert!(
            line["duration_ms"].as_f64().is_some_and(|d| d >= 0.0),
            "{line}"
        );
        assert!(line["timestamp"].is_string(), "{line}");
        let span = &line["span"];
        assert_eq!(span["request_id"], id.as_str(), "{line}");
        assert_eq!(span["merchant_id"], merchant_id.as_str(), "{line}");
        assert_eq!(span["environment"], "test", "{line}");
        assert_eq!(span["component"], "collect", "{line}");
        assert_eq!(span["method"], method, "{line}");
        assert_eq!(span["path"], path, "{line}");
    }
    // A line logged while the request was served carries its id and merchant.
    let refusal = of(&refused_id)
        .into_iter()
        .find(|v| v["message"] == "operator call refused")
        .unwrap_or_else(|| panic!("the refusal is logged in its request:\n{logs}"));
    assert_eq!(
        refusal["span"]["merchant_id"],
        merchant_id.as_str(),
        "{refusal}"
    );
    assert_eq!(request_line(&refused_id)["status"], 201);
    // A key that authenticates nothing: the line, without a merchant.
    let line = request_line(&unauthenticated_id);
    assert_eq!(line["status"], 401, "{line}");
    assert!(line["span"]["merchant_id"].is_null(), "{line}");
    // Health checks: not at info.
    assert!(
        !lines.iter().any(|v| v["span"]["path"] == "/healthz"),
        "{logs}"
    );
}
