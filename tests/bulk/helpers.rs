//! Driving the bulk API over HTTP: requests, waiting for a batch to end,
//! reading every item page by page, building batches and CSV files.

use std::time::{Duration, Instant};

use mmc_host::config::Config;
use serde_json::{Value, json};

use crate::support::TestApp;

pub const ROOT: &str = "/api/v1/bulk-payments/";

/// Sets settings of the `bulk` component.
pub fn bulk_settings(config: &mut Config, settings: &[(&str, &str)]) {
    let c = config.components.entry("bulk".into()).or_default();
    for (k, v) in settings {
        c.settings.insert(k.to_string(), v.to_string());
    }
}

pub async fn send(
    app: &TestApp,
    key: &str,
    method: reqwest::Method,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
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
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

pub async fn post(app: &TestApp, key: &str, path: &str, body: &Value) -> (u16, Value) {
    send(
        app,
        key,
        reqwest::Method::POST,
        path,
        Some("application/json"),
        serde_json::to_vec(body).unwrap(),
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
