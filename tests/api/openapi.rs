//! The OpenAPI document: served without a key, valid OpenAPI 3.1
//! (openapi-spec-validator), and the live server fuzzed against it with
//! schemathesis (every check, both environments' keys). The Python tools are
//! installed by `make tools` (a dependency of `make test`) in target/venv.

use std::process::Command;

use serde_json::Value;

use crate::support::*;

fn venv_tool(name: &str) -> std::path::PathBuf {
    let path = target_dir().join("venv/bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: run `make tools` (make test does)",
        path.display()
    );
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_document_is_public_and_valid_openapi_3_1() {
    let app = spawn_app().await;
    let resp = app
        .client
        .get(app.url("/api/v1/collect/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let doc: Value = resp.json().await.unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    // Every route the component serves is documented.
    for path in [
        "/collect/payments",
        "/collect/payments/{reference_or_id}",
        "/collect/payments/{reference_or_id}/confirm",
        "/collect/payments/{reference_or_id}/cancel",
        "/collect/payments/{reference_or_id}/refunds",
        "/collect/payments/operators/",
        "/collect/payments/export",
        "/collect/refunds/{refund_id}",
        "/collect/openapi.json",
        // Served by the host and by the bulk component: the same document.
        "/webhook-endpoints",
        "/webhook-endpoints/{endpoint_id}",
        "/webhook-endpoints/callback-secret",
        "/events",
        "/events/{event_id}",
        "/events/{event_id}/resend",
        "/bulk-payments/",
        "/bulk-payments/import_csv/",
        "/bulk-payments/{bulk_payment_id}/",
        "/bulk-payments/{bulk_payment_id}/items/",
        "/bulk-payments/{bulk_payment_id}/validate/",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} is not documented");
    }
    // What generators need: a unique operationId per operation, request
    // bodies as named schemas, headers as plain strings (a `format: uuid`
    // header becomes an object that HTTP clients refuse as a header value).
    let mut ids = std::collections::BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path}: no operationId"));
            assert!(ids.insert(id.to_string()), "{id} twice");
            for (media, body) in op["requestBody"]["content"]
                .as_object()
                .into_iter()
                .flatten()
            {
                if media.ends_with("json") || media.starts_with("multipart/") {
                    assert!(
                        body["schema"]["$ref"].is_string(),
                        "{id}: {media} body is not a named schema"
                    );
                }
            }
            for p in op["parameters"].as_array().into_iter().flatten() {
                assert!(
                    p["schema"]["format"].is_null() || p["in"] != "header",
                    "{id}: header {p}"
                );
            }
        }
    }
    let body = &doc["paths"]["/bulk-payments/import_csv/"]["post"]["requestBody"]["content"];
    assert!(body["text/csv"].is_object() && body["multipart/form-data"].is_object());
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), serde_json::to_vec(&doc).unwrap()).unwrap();
    let out = Command::new(venv_tool("openapi-spec-validator"))
        .arg(file.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// schemathesis, every check, against `doc` on the live server with `key`.
fn fuzz(base: &str, doc: &str, key: &str, config: Option<&str>) -> std::process::Output {
    let mut cmd = Command::new(venv_tool("schemathesis"));
    if let Some(file) = config {
        cmd.arg("--config-file")
            .arg(root().join("tests/api").join(file));
    }
    cmd.args([
        "run",
        &format!("{base}{doc}"),
        "--url",
        &format!("{base}/api/v1"),
    ])
    .args([
        "--checks",
        "all",
        "--max-examples",
        "40",
        "--workers",
        "1",
        "--no-color",
    ])
    .args(["--header", &format!("Authorization: Bearer {key}")])
    .args(["--suppress-health-check", "all", "--request-timeout", "20"])
    .output()
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_legacy_generation_has_its_document_and_it_holds_under_fuzzing() {
    let app = spawn_app_with(|c| {
        c.rate_limit.per_second = 0.0;
        c.routing.insert(
            "live".into(),
            [("*".to_string(), "simulator".to_string())].into(),
        );
    })
    .await;
    let resp = app
        .client
        .get(app.url("/api/v1/collect/mobile-money/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "public");
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), resp.bytes().await.unwrap()).unwrap();
    let out = Command::new(venv_tool("openapi-spec-validator"))
        .arg(file.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let (_, test_key, live_key) = app.merchant("Fuzz");
    for key in [test_key, live_key] {
        let base = app.base.clone();
        let out = tokio::task::spawn_blocking(move || {
            fuzz(
                &base,
                "/api/v1/collect/mobile-money/openapi.json",
                &key,
                Some("schemathesis-legacy.toml"),
            )
        })
        .await
        .unwrap();
        assert!(
            out.status.success(),
            "schemathesis failed:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemathesis_finds_no_5xx_and_no_response_outside_the_document() {
    let app = spawn_app_with(|c| {
        c.rate_limit.per_second = 0.0; // the fuzzer is not the subject here
        // Live operators need adapters; here the simulator stands in for them.
        c.routing.insert(
            "live".into(),
            [("*".to_string(), "simulator".to_string())].into(),
        );
    })
    .await;
    let (_, test_key, live_key) = app.merchant("Fuzz");
    for key in [&test_key, &live_key] {
        let base = app.base.clone();
        let key = key.clone();
        let out = tokio::task::spawn_blocking(move || {
            fuzz(
                &base,
                "/api/v1/collect/openapi.json",
                &key,
                Some("schemathesis.toml"),
            )
        })
        .await
        .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "schemathesis failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
