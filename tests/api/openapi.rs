//! The OpenAPI document: served without a key, valid OpenAPI 3.1
//! (openapi-spec-validator), and the live server fuzzed against it with
//! schemathesis (every check, both environments' keys). The Python tools are
//! installed by `make tools` (a dependency of `make test`) in target/venv.

use std::process::Command;

use serde_json::Value;

use crate::support::*;
use mmc_test_kit::service_test;

fn venv_tool(name: &str) -> std::path::PathBuf {
    let path = target_dir().join("venv/bin").join(name);
    assert!(
        path.exists(),
        "{} is missing: run `make tools` (make test does)",
        path.display()
    );
    path
}

#[service_test]
async fn the_document_is_public_and_valid_openapi_3_1(app: TestApp) {
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
        "/webhook-endpoints/{endpoint_id}/rotate-secret",
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
    // Pinned: the generated SDKs' method names are the operationIds (a
    // rename breaks every merchant's code that calls it).
    assert_eq!(
        ids.iter().map(String::as_str).collect::<Vec<_>>(),
        [
            "cancelPayment",
            "confirmOtp",
            "createBulkPayment",
            "createPayment",
            "createWebhookEndpoint",
            "deleteWebhookEndpoint",
            "exportPayments",
            "getBulkPayment",
            "getCallbackSecret",
            "getEvent",
            "getOpenApi",
            "getPayment",
            "getPaymentRoute",
            "getReconciliationCase",
            "getRefund",
            "importBulkPaymentCsv",
            "listBalances",
            "listBulkPaymentItems",
            "listBulkPayments",
            "listEvents",
            "listOperators",
            "listPaymentRefunds",
            "listPayments",
            "listReconciliationCases",
            "listReconciliationReports",
            "listWebhookEndpoints",
            "predictOperator",
            "refundPayment",
            "resendEvent",
            "rotateWebhookEndpointSecret",
            "updateWebhookEndpoint",
            "validateBulkPayment",
        ],
        "the operationIds changed: generated SDK method names change with them"
    );
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
    .args(fuzz_seed())
    .output()
    .unwrap()
}

/// A fixed seed by default, so `make test` gives the same verdict every
/// time; `MMC_TEST_FUZZ_SEED=N` tries another sequence, `=random` a new one
/// each run (to look for what the fixed one does not reach).
fn fuzz_seed() -> Vec<String> {
    match std::env::var("MMC_TEST_FUZZ_SEED").as_deref() {
        Ok("random") => Vec::new(),
        Ok(n) => vec!["--seed".into(), n.to_string()],
        Err(_) => vec!["--seed".into(), "20261125".into()],
    }
}

#[service_test]
async fn the_legacy_generation_has_its_document_and_it_holds_under_fuzzing() {
    let app = spawn_app_with(|c| {
        c.rate_limit.per_second = 0.0;
        c.routing.insert(
            "live".into(),
            [("*".to_string(), "simulator".into())].into(),
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
    let doc = resp.bytes().await.unwrap();
    let mut ids: Vec<String> = operations(&serde_json::from_slice(&doc).unwrap())
        .map(|(_, op)| op["operationId"].as_str().unwrap_or_default().to_string())
        .collect();
    ids.sort();
    // Pinned, as the current generation's: SDK method names.
    assert_eq!(
        ids,
        ["confirm", "initiate", "legacyOpenApi", "operators", "read"],
        "the legacy operationIds changed"
    );
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), doc).unwrap();
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

#[service_test]
async fn schemathesis_finds_no_5xx_and_no_response_outside_the_document() {
    let app = spawn_app_with(|c| {
        c.rate_limit.per_second = 0.0; // the fuzzer is not the subject here
        // Live operators need adapters; here the simulator stands in for them.
        c.routing.insert(
            "live".into(),
            [("*".to_string(), "simulator".into())].into(),
        );
    })
    .await;
    let doc: Value = app
        .client
        .get(app.url("/api/v1/collect/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let links: usize = operations(&doc)
        .flat_map(|(_, op)| op["responses"].as_object().into_iter().flatten())
        .filter_map(|(_, r)| r["links"].as_object().map(|l| l.len()))
        .sum();
    assert!(links > 10, "{links} links");
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
        // The stateful phase ran scenarios over the document's own links:
        // links schemathesis cannot follow would leave it with none (or
        // with only the links it infers, which it does without any).
        let stateful = Stateful::of(&stdout);
        assert!(
            stateful.scenarios > 0 && stateful.links_covered > 0,
            "the stateful phase ran nothing: {stateful:?}\n{stdout}"
        );
        assert_eq!(
            stateful.links_total - stateful.links_inferred,
            links,
            "schemathesis does not see the document's links: {stateful:?}\n{stdout}"
        );
    }
}

/// Every operation of an OpenAPI document: (method, operation).
fn operations(doc: &Value) -> impl Iterator<Item = (&String, &Value)> {
    doc["paths"]
        .as_object()
        .into_iter()
        .flatten()
        .flat_map(|(_, item)| item.as_object().into_iter().flatten())
        .filter(|(_, op)| op["operationId"].is_string())
}

/// What schemathesis (4.x) reports of its stateful phase:
///
/// ```text
///  ✅  Stateful (in 7.83s)
///
///      Scenarios:    40
///      API Links:    33 covered / 49 selected / 49 total (24 inferred)
/// ```
#[derive(Debug, Default)]
struct Stateful {
    scenarios: usize,
    links_covered: usize,
    links_total: usize,
    links_inferred: usize,
}

impl Stateful {
    fn of(stdout: &str) -> Stateful {
        let section = stdout
            .split_once("Stateful (in ")
            .unwrap_or_else(|| panic!("no stateful phase in the output:\n{stdout}"))
            .1;
        let field = |name: &str| -> &str {
            section
                .lines()
                .find_map(|l| l.trim().strip_prefix(name))
                .unwrap_or_else(|| panic!("no {name} in the stateful phase:\n{stdout}"))
                .trim()
        };
        // The number before `word` in "33 covered / 49 selected / 49 total (24 inferred)".
        let number_before = |text: &str, word: &str| -> Option<usize> {
            let before = text.split_once(word)?.0.trim_end();
            let digits = before.rsplit(|c: char| !c.is_ascii_digit()).next()?;
            digits.parse().ok()
        };
        let links = field("API Links:");
        Stateful {
            scenarios: field("Scenarios:")
                .parse()
                .unwrap_or_else(|e| panic!("{e}: {stdout}")),
            links_covered: number_before(links, " covered").unwrap_or_default(),
            links_total: number_before(links, " total").unwrap_or_default(),
            links_inferred: number_before(links, " inferred").unwrap_or_default(),
        }
    }
}

#[test]
fn schemathesis_stateful_summary_is_read() {
    let out = " ✅  Fuzzing (in 8.62s)\n\n     ✅ 24 passed\n\n ✅  Stateful (in 7.83s)\n\n     Scenarios:    40\n     API Links:    33 covered / 49 selected / 49 total (24 inferred)\n\n     ✅ 40 passed\n";
    let s = Stateful::of(out);
    assert_eq!(
        (
            s.scenarios,
            s.links_covered,
            s.links_total,
            s.links_inferred
        ),
        (40, 33, 49, 24)
    );
    let none = " 🚫  Stateful (in 0.01s)\n\n     Scenarios:    0\n     API Links:    0 covered / 41 selected / 66 total (41 inferred)\n";
    assert_eq!(Stateful::of(none).scenarios, 0);
}
