use crate::support::*;
use mmc_test_kit::service_test;

#[service_test]
async fn healthz_answers_without_key_and_metrics_count_requests(app: TestApp) {
    let resp = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "ok\n");
    let key = app.test_key("Shop");
    let (status, _) = app.get(&key, "/api/v1/collect/payments/nope").await;
    assert_eq!(status, 404);
    let text = app.metrics().await;
    assert_eq!(
        metric(
            &text,
            "mmc_http_requests_total",
            "route=\"healthz\",status=\"200\""
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "mmc_http_requests_total",
            "route=\"collect\",status=\"404\""
        ),
        1.0,
        "{text}"
    );
    assert!(
        metric(
            &text,
            "mmc_component_calls_total",
            "component=\"collect\",outcome=\"ok\""
        ) >= 1.0,
        "{text}"
    );
    assert!(
        text.contains("mmc_http_request_duration_seconds_bucket{route=\"collect\",le=\"+Inf\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("mmc_component_call_duration_seconds_count{component=\"simulator\"}"),
        "{text}"
    );
}

#[service_test]
async fn every_component_is_loaded_and_compiled_code_is_cached_on_disk(app: TestApp) {
    let names: Vec<String> = app
        .service
        .site
        .app
        .runtime
        .list()
        .iter()
        .map(|l| l.name.clone())
        .collect();
    assert!(
        names.contains(&"collect".to_string()) && names.contains(&"simulator".to_string()),
        "{names:?}"
    );
    let cached: Vec<_> = std::fs::read_dir(cache_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    for loaded in app.service.site.app.runtime.list() {
        let prefix = format!("{}-{}", loaded.name, &loaded.hash[..32]);
        assert!(
            cached
                .iter()
                .any(|f| f.starts_with(&prefix) && f.ends_with(".cwasm")),
            "{prefix} not in {cached:?}"
        );
    }
}

#[service_test]
async fn unknown_paths_are_404_in_the_current_shape(app: TestApp) {
    let resp = app
        .client
        .get(app.url("/api/v1/nothing-here"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["type"], "not_found_error");
    assert!(
        body["error"]["doc_url"]
            .as_str()
            .unwrap()
            .ends_with("/docs/errors#resource_not_found")
    );
}

#[service_test]
async fn oversized_bodies_are_refused_with_413() {
    let app = spawn_app_with(|c| c.limits.max_body_bytes = 1024).await;
    let key = app.test_key("Shop");
    let resp = app
        .client
        .post(app.url("/api/v1/collect/payments"))
        .bearer_auth(&key)
        .header("Idempotency-Key", new_key())
        .header("content-type", "application/json")
        .body(vec![b' '; 4096])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "payload_too_large");
}

#[service_test]
async fn a_create_moves_the_instantiation_rows_written_and_wal_counters(app: TestApp) {
    let key = app.test_key("Shop");
    let collect = "component=\"collect\"";
    let before = app.metrics().await;
    app.create_ok(&key, &direct_payment("+2290166000001")).await;
    let after = app.metrics().await;
    let moved =
        |name: &str, labels: &str| counter(&after, name, labels) - counter(&before, name, labels);
    assert!(
        moved("mmc_component_instantiations_total", collect) >= 1.0,
        "{after}"
    );
    // The payment (put) and its `created` event (an outbox row), at least.
    let rows = "mmc_storage_rows_written_total";
    assert!(
        moved(rows, "component=\"collect\",kind=\"put\"") >= 1.0,
        "{after}"
    );
    assert!(
        moved(rows, "component=\"collect\",kind=\"emit\"") >= 1.0,
        "{after}"
    );
    if !on_postgres() {
        // Process-wide: other tests' servers add theirs, never take away.
        assert!(moved("mmc_sqlite_wal_bytes_total", "") >= 4096.0, "{after}");
    }
}
