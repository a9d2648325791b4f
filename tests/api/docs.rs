//! `/docs`: the merchant's guide, and `/docs/api`: the API reference,
//! rendered by the server from the OpenAPI documents it serves, readable
//! offline.

use serde_json::{Value, json};

use crate::checkout::node_json;
use crate::support::*;
use mmc_test_kit::service_test;

/// Every operationId of the OpenAPI document at `path`, as the server serves it.
async fn operation_ids(app: &TestApp, path: &str) -> Vec<String> {
    let doc: Value = app
        .client
        .get(app.url(path))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut ids = Vec::new();
    for item in doc["paths"].as_object().unwrap().values() {
        for op in item.as_object().unwrap().values() {
            if let Some(id) = op["operationId"].as_str() {
                ids.push(id.to_string());
            }
        }
    }
    ids
}

#[service_test]
async fn the_api_reference_has_every_operation_of_the_documents_served(app: TestApp) {
    let resp = app.client.get(app.url("/docs/api")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let header = |name: &str| {
        resp.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(header("content-type"), "text/html; charset=utf-8");
    let csp = header("content-security-policy");
    assert!(
        csp.starts_with("default-src 'none';") && !csp.contains("script-src"),
        "{csp}"
    );
    let html = resp.text().await.unwrap();
    assert!(!html.contains("<script"), "nothing to run");
    // Every operation of both generations' documents, each with its anchor.
    let current = operation_ids(&app, "/api/v1/collect/openapi.json").await;
    let legacy = operation_ids(&app, "/api/v1/collect/mobile-money/openapi.json").await;
    assert!(
        current.len() > 10 && legacy.len() >= 4,
        "{current:?} {legacy:?}"
    );
    for id in &current {
        assert!(html.contains(&format!("<section id=\"{id}\"")), "#{id}");
        assert!(
            html.contains(&format!("<a href=\"#{id}\">")),
            "linked: {id}"
        );
    }
    for id in &legacy {
        assert!(
            html.contains(&format!("<section id=\"legacy-{id}\"")),
            "#legacy-{id}"
        );
    }
    // What an operation shows: method and path, parameters, body, responses.
    let create = &html[html.find("<section id=\"createPayment\"").unwrap()..];
    let create = &create[..create.find("</section>").unwrap()];
    for needle in [
        "<span class=\"method\">POST</span> <code>/api/v1/collect/payments</code>",
        "<code>Idempotency-Key</code></td><td>header</td><td>yes</td>",
        "<a href=\"#schema-CreatePayment\">CreatePayment</a>",
        "<td><code>201</code></td>",
        "<td><code>409</code></td>",
    ] {
        assert!(create.contains(needle), "{needle}\n{create}");
    }
    assert!(html.contains("<section id=\"schema-CreatePayment\">"));
    assert!(html.contains("<h3 id=\"tag-payments\">payments</h3>"));

    // The guide links to it; HEAD is answered as GET is.
    let guide = app
        .client
        .get(app.url("/docs"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        guide.contains("<a href=\"/docs/api\">"),
        "linked from /docs"
    );
    let head = app.client.head(app.url("/docs/api")).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(
        head.headers()["content-length"].to_str().unwrap(),
        html.len().to_string()
    );
}

/// In Chromium: from /docs to the reference to createPayment, and not one
/// request leaves the server (no CDN, no font, no script).
#[service_test]
async fn the_api_reference_works_offline_in_a_browser(app: TestApp) {
    let out = node_json(vec!["docs_api.mjs".into(), app.url("/docs")]).await;
    assert_eq!(out["outside"], json!([]), "{out}");
    assert_eq!(out["violations"], json!([]), "{out}");
    assert_eq!(out["reference"]["url"], app.url("/docs/api"), "{out}");
    assert_eq!(out["reference"]["scripts"], 0, "{out}");
    let op = &out["op"];
    assert_eq!(op["hash"], "#createPayment", "{out}");
    let heading = op["heading"].as_str().unwrap();
    assert!(
        heading.contains("POST") && heading.contains("/api/v1/collect/payments"),
        "{op}"
    );
    assert!(
        op["text"].as_str().unwrap().contains("Create a payment"),
        "{op}"
    );
    let top = op["top"].as_i64().unwrap();
    assert!(
        (-5..100).contains(&top) && op["scrollY"].as_i64().unwrap() > 0,
        "{op}"
    );
    assert!(
        out["requests"].as_array().unwrap().len() >= 2,
        "the two pages were seen: {out}"
    );
}

/// `/docs` serves the merchant's chapters of the book, each at its own path
/// under the same policy, and not the chapters for operators of the service;
/// an error's `doc_url` is a row of the errors chapter.
#[service_test]
async fn the_guide_serves_the_merchants_chapters_only(app: TestApp) {
    let index = app.client.get(app.url("/docs")).send().await.unwrap();
    assert_eq!(index.status(), 200);
    let csp = index.headers()["content-security-policy"].clone();
    let index = index.text().await.unwrap();
    for chapter in ["keys", "payments", "webhooks", "errors", "going-live"] {
        assert!(
            index.contains(&format!("<a href=\"/docs/{chapter}\">")),
            "{chapter} listed: {index}"
        );
        let resp = app
            .client
            .get(app.url(&format!("/docs/{chapter}")))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 200, "{chapter}");
        assert_eq!(resp.headers()["content-security-policy"], csp, "{chapter}");
        assert_eq!(resp.headers()["content-type"], "text/html; charset=utf-8");
    }
    for not_served in [
        "architecture",
        "configuration",
        "benchmarks",
        "README",
        "nothing",
    ] {
        let resp = app
            .client
            .get(app.url(&format!("/docs/{not_served}")))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404, "{not_served}");
    }
    let resp = app
        .client
        .get(app.url("/api/v1/collect/payments/nothing-here"))
        .bearer_auth(app.test_key("Boutique"))
        .send()
        .await
        .unwrap();
    let body: Value = resp.json().await.unwrap();
    let doc_url = body["error"]["doc_url"].as_str().unwrap();
    assert!(
        doc_url.ends_with("/docs/errors#payment_not_found"),
        "{body}"
    );
    let errors = app
        .client
        .get(app.url("/docs/errors"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        errors.contains("<a id=\"payment_not_found\"></a>"),
        "{errors}"
    );
}
