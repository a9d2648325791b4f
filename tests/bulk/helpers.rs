//! Driving the bulk API over HTTP: requests, waiting for a batch to end,
//! reading every item page by page, building batches and CSV files, and
//! an operator that records every payout it receives.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use mmc_config::Config;
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::sync::Notify;

use crate::support::{TestApp, components_dir, new_key, spawn_app_with, test_component};

pub const ROOT: &str = "/api/v1/bulk-payments/";

/// Sets settings of the `bulk` component.
pub fn bulk_settings(config: &mut Config, settings: &[(&str, &str)]) {
    let c = config.components.entry("bulk".into()).or_default();
    for (k, v) in settings {
        c.settings.insert(k.to_string(), v.to_string());
    }
}

/// `req` with a fresh `Idempotency-Key`: creating a batch (JSON or CSV)
/// requires one; other endpoints ignore it.
pub fn with_fresh_key(req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
    req.header("Idempotency-Key", new_key())
}

/// A request; every POST carries a fresh `Idempotency-Key`.
pub async fn send(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (u16, Value) {
    let idempotency_key = (method == reqwest::Method::POST).then(new_key);
    send_keyed(
        app,
        key,
        method,
        path,
        content_type,
        body,
        idempotency_key.as_deref(),
    )
    .await
}

/// A request with exactly this `Idempotency-Key` header (None: without one).
pub async fn send_keyed(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
    idempotency_key: Option<&str>,
) -> (u16, Value) {
    let url = if path.starts_with("http") {
        path.to_string()
    } else {
        app.url(path)
    };
    let mut req = app.client.request(method, url).bearer_auth(key).body(body);
    if let Some(ct) = content_type {
        req = req.header("content-type", ct);
    }
    if let Some(k) = idempotency_key {
        req = req.header("Idempotency-Key", k);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// A JSON POST with a fresh `Idempotency-Key`.
pub async fn post(app: &TestApp, key: &str, path: &str, body: &Value) -> (u16, Value) {
    post_keyed(app, key, path, Some(&new_key()), body).await
}

/// A JSON POST with exactly this `Idempotency-Key` (None: without one).
pub async fn post_keyed(
    app: &TestApp,
    key: &str,
    path: &str,
    idempotency_key: Option<&str>,
    body: &Value,
) -> (u16, Value) {
    send_keyed(
        app,
        key,
        reqwest::Method::POST,
        path,
        Some("application/json"),
        serde_json::to_vec(body).unwrap(),
        idempotency_key,
    )
    .await
}

pub async fn get(app: &TestApp, key: &str, path: &str) -> (u16, Value) {
    send(app, key, reqwest::Method::GET, path, None, Vec::new()).await
}

/// Creates a batch from JSON; panics unless 201.
pub async fn create(app: &TestApp, key: &str, items: Vec<Value>) -> Value {
    let (status, b) = post(
        app,
        key,
        ROOT,
        &json!({"name": "Salaries", "description": "June", "items": items}),
    )
    .await;
    assert_eq!(status, 201, "{b}");
    b
}

pub async fn validate(app: &TestApp, key: &str, id: &str) -> (u16, Value) {
    post(app, key, &format!("{ROOT}{id}/validate/"), &json!({})).await
}

pub fn is_final(status: &str) -> bool {
    matches!(status, "completed" | "partially_completed" | "failed")
}

/// Polls the batch until it ends; panics after `timeout`.
pub async fn wait_until_final(app: &TestApp, key: &str, id: &str, timeout: Duration) -> Value {
    let started = Instant::now();
    loop {
        let (status, b) = get(app, key, &format!("{ROOT}{id}/")).await;
        assert_eq!(status, 200, "{b}");
        if is_final(b["status"].as_str().unwrap()) {
            return b;
        }
        assert!(
            started.elapsed() < timeout,
            "batch still {} after {timeout:?}: {b}",
            b["status"]
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Every item of a batch, following the `next` links.
pub async fn all_items(app: &TestApp, key: &str, id: &str, query: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let mut next = Some(format!("{ROOT}{id}/items/?page_size=100{query}"));
    while let Some(url) = next {
        let (status, page) = get(app, key, &url).await;
        assert_eq!(status, 200, "{page}");
        items.extend(page["results"].as_array().unwrap().iter().cloned());
        next = page["next"].as_str().map(str::to_string);
    }
    items
}

/// A payout line to a simulator number. `phone` decides the outcome by its
/// last four digits (0002, 0003, 0005 fail; 0004 stays pending).
pub fn item(phone: &str, amount: u64, reference: &str) -> Value {
    json!({
        "beneficiary_name": "Awa Koné",
        "phone": phone,
        "amount": amount,
        "currency": "XOF",
        "reference": reference,
    })
}

/// A Benin MTN number (prefix 0166) ending in `tail`.
pub fn bj(tail: u32) -> String {
    format!("+2290166{tail:06}")
}

/// A multipart/form-data body as a browser sends it: (content type, body).
pub fn multipart(fields: &[(&str, &str)], file: Option<(&str, &[u8])>) -> (String, Vec<u8>) {
    let boundary = "----mmcTestBoundary7MA4YWxkTrZu0gW";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n"
            )
            .as_bytes(),
        );
    }
    if let Some((filename, bytes)) = file {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{filename}\"\r\nContent-Type: text/csv\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

/// The `(line, code)` pairs of a 400's `errors`.
pub fn error_lines(body: &Value) -> Vec<(u64, String)> {
    body["error"]["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors list: {body}"))
        .iter()
        .map(|e| {
            (
                e["line"].as_u64().unwrap(),
                e["code"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Number of batches the merchant has (from the list's `count`).
pub async fn batch_count(app: &TestApp, key: &str) -> u64 {
    let (status, page) = get(app, key, ROOT).await;
    assert_eq!(status, 200, "{page}");
    page["count"].as_u64().unwrap()
}

/// The `bulk.batch.*` events of the merchant about batch `id` (from the
/// host's event log; listed without `type=`, which knows only payment types).
pub async fn batch_events(app: &TestApp, key: &str, id: &str) -> Vec<Value> {
    let (status, list) = get(app, key, "/api/v1/events?limit=100").await;
    assert_eq!(status, 200, "{list}");
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| {
            e["type"].as_str().unwrap().starts_with("bulk.batch.")
                && e["data"]["object"]["id"] == id
        })
        .cloned()
        .collect()
}

/// The operator's side, for the `payout-recorder` adapter: which payouts
/// arrived, how many times.
#[derive(Default)]
pub struct Recorder {
    posts: Mutex<Vec<String>>,
    pub status_queries: Mutex<HashMap<String, u32>>,
    /// The payout at this position (1-based) is held unanswered, and `held`
    /// notified; 0 holds none.
    hold_at: usize,
    pub held: Notify,
    /// The next this many payouts are recorded (paid), then answered 503:
    /// their outcome is unknown to the service, which must ask.
    pub accept_then_fail: AtomicUsize,
    /// How long a status query waits before its answer.
    pub status_delay: Mutex<Duration>,
    status_in_flight: AtomicUsize,
    /// The most status queries this operator was answering at once.
    pub status_most_at_once: AtomicUsize,
}

impl Recorder {
    pub async fn start(hold_at: usize) -> (Arc<Recorder>, SocketAddr) {
        let recorder = Arc::new(Recorder {
            hold_at,
            ..Recorder::default()
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let r = recorder.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let r = r.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req| r.clone().handle(req));
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        (recorder, addr)
    }

    async fn handle(
        self: Arc<Self>,
        req: hyper::Request<Incoming>,
    ) -> Result<hyper::Response<Full<Bytes>>, Infallible> {
        let (method, path) = (req.method().clone(), req.uri().path().to_string());
        let status = match (method.as_str(), path.strip_prefix("/payouts")) {
            ("POST", Some("")) => {
                let body = req.into_body().collect().await.unwrap().to_bytes();
                let v: Value = serde_json::from_slice(&body).unwrap();
                let n = {
                    let mut posts = self.posts.lock();
                    posts.push(v["payout_id"].as_str().unwrap().to_string());
                    posts.len()
                };
                if n == self.hold_at {
                    // Received, never answered: the service dies waiting.
                    self.held.notify_one();
                    tokio::time::sleep(Duration::from_secs(30)).await;
                }
                let fail = self
                    .accept_then_fail
                    .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                    .is_ok();
                if fail { 503 } else { 200 }
            }
            ("GET", Some(id)) => {
                let id = id.trim_start_matches('/').to_string();
                *self.status_queries.lock().entry(id.clone()).or_default() += 1;
                let now = self.status_in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                self.status_most_at_once.fetch_max(now, Ordering::SeqCst);
                let delay = *self.status_delay.lock();
                tokio::time::sleep(delay).await;
                self.status_in_flight.fetch_sub(1, Ordering::SeqCst);
                if self.posts.lock().contains(&id) {
                    200
                } else {
                    404
                }
            }
            _ => 404,
        };
        Ok(hyper::Response::builder()
            .status(status)
            .body(Full::new(Bytes::from_static(b"{}")))
            .unwrap())
    }

    /// The payout ids received, in order (a repeat is a payout sent twice).
    pub fn posts(&self) -> Vec<String> {
        self.posts.lock().clone()
    }
}

/// A components directory with only `bulk` and the recorder (named as the
/// routing names it; Cargo builds it as `payout_recorder.wasm`).
pub fn recorder_components(dir: &Path) -> PathBuf {
    let out = dir.join("components");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::copy(components_dir().join("bulk.wasm"), out.join("bulk.wasm")).unwrap();
    std::fs::copy(
        test_component("payout_recorder"),
        out.join("payout-recorder.wasm"),
    )
    .unwrap();
    out
}

/// An app whose test environment pays every operator through the
/// `payout-recorder` adapter, reporting to the recorder at `recorder`, with
/// these `bulk` settings. `dir` holds its components and must outlive it.
pub async fn spawn_app_paying_to(
    recorder: SocketAddr,
    dir: &Path,
    settings: &[(&str, &str)],
) -> TestApp {
    let components = recorder_components(dir);
    spawn_app_with(|c| {
        bulk_settings(c, settings);
        c.components_dir = Some(components);
        c.routing.insert(
            "test".into(),
            [("*".to_string(), "payout-recorder".into())].into(),
        );
        let r = c.components.entry("payout-recorder".into()).or_default();
        r.allowed_hosts = vec![recorder.to_string()];
        r.settings
            .insert("url".into(), format!("http://{recorder}"));
    })
    .await
}
