//! The adapter platform: hard isolation of a misbehaving adapter, and the
//! admin API — deploy (refusing bad versions), hot swap under load, rollback,
//! persistence across restarts, the audit trail of adapter calls.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::*;
use mmc_test_kit::service_test;

fn components_with(extra: &[(&str, std::path::PathBuf)]) -> std::path::PathBuf {
    let dir = tempfile::tempdir().unwrap().keep();
    for name in ["collect", "simulator"] {
        std::fs::copy(
            components_dir().join(format!("{name}.wasm")),
            dir.join(format!("{name}.wasm")),
        )
        .unwrap();
    }
    for (name, path) in extra {
        std::fs::copy(path, dir.join(format!("{name}.wasm"))).unwrap();
    }
    dir
}

pub use crate::support::new_version;

/// The app with `mtn-bj` served by the misbehaving `rogue` adapter (300 ms
/// deadline, 16 MiB of memory), then `adjust`ed.
async fn spawn_rogue_app(adjust: impl FnOnce(&mut mmc_config::Config)) -> TestApp {
    let dir = components_with(&[("rogue", test_component("rogue"))]);
    spawn_app_with(move |c| {
        c.components_dir = Some(dir);
        c.routing
            .get_mut("test")
            .unwrap()
            .insert("mtn-bj".into(), "rogue".into());
        c.components.entry("rogue".into()).or_default().deadline_ms = Some(300);
        c.components.entry("rogue".into()).or_default().memory_mib = Some(16);
        adjust(c);
    })
    .await
}

#[service_test]
async fn a_panicking_looping_hungry_or_lying_adapter_leaves_one_payment_unknown_never_the_host() {
    let app = spawn_rogue_app(|_| {}).await;
    let key = app.test_key("Shop");
    // A trap, a deadline, a memory cap or an unusable answer after the adapter
    // may have sent the request: the outcome is unknown, never `failed`; the
    // payment stays in progress for reconciliation to ask the operator.
    let (status, code) = ("pending", None::<&str>);
    for phone in [
        "+2290166000101", // panic
        "+2290166000102", // loops: deadline
        "+2290166000103", // memory cap
        "+2290166000104", // garbage reference
        "+2290166000105", // garbage redirect
    ] {
        let started = Instant::now();
        let (s, p) = app.create(&key, &new_key(), &direct_payment(phone)).await;
        assert_eq!(s, 201, "{phone}: {p}");
        assert_eq!(p["status"], status, "{phone}: {p}");
        assert_eq!(p["failure_code"].as_str(), code, "{phone}");
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{phone} took {:?}",
            started.elapsed()
        );
        assert_eq!(
            app.client
                .get(app.url("/healthz"))
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
    }
    // Other operators (the simulator) are untouched.
    let mut moov = direct_payment("+2290195000001");
    moov["operator"] = json!("moov-bj");
    assert_eq!(
        app.create(&key, &new_key(), &moov).await.1["status"],
        "processing"
    );
    let text = app.metrics().await;
    for kind in ["trap", "deadline", "memory"] {
        assert!(
            metric(
                &text,
                "mmc_component_traps_total",
                &format!("component=\"rogue\",kind=\"{kind}\"")
            ) >= 1.0,
            "{kind}: {text}"
        );
    }
}

/// Reconciliation asks many payments' status in one round, and the calls of
/// one worker of the round share an adapter instance. A status call that
/// panics, loops or exhausts its memory there leaves its own payment in
/// progress (unknown) and costs the others nothing: they complete.
#[service_test]
async fn a_status_call_that_fails_in_a_reconciliation_round_leaves_only_its_payment_unknown() {
    let app = spawn_rogue_app(|c| {
        // 43 creates, then reads of each until it is done: past one key's rate.
        c.rate_limit.per_second = 0.0;
    })
    .await;
    let key = app.test_key("Shop");
    let phones = (0..40)
        .map(|_| "+2290166000109") // completed at the first status
        .chain([
            "+2290166000106", // status panics
            "+2290166000107", // status loops: deadline
            "+2290166000108", // status exhausts its memory
        ]);
    let created = futures::future::join_all(phones.map(|phone| {
        let (app, key) = (&app, &key);
        async move {
            let (id, p) = app.create_ok(key, &direct_payment(phone)).await;
            assert_eq!(p["status"], "processing", "{p}");
            (phone, id)
        }
    }))
    .await;
    let failed = |text: &str, outcome: &str| {
        metric(
            text,
            "mmc_adapter_calls_total",
            &format!("adapter=\"rogue\",operation=\"status\",outcome=\"{outcome}\""),
        )
    };
    let mut waiting: Vec<_> = created
        .iter()
        .filter(|(p, _)| p.ends_with("0109"))
        .collect();
    for _ in 0..100 {
        let mut still = Vec::new();
        for entry in waiting {
            let (_, p) = app
                .get(&key, &format!("/api/v1/collect/payments/{}", entry.1))
                .await;
            if p["status"] != "completed" {
                still.push(entry);
            }
        }
        waiting = still;
        let text = app.metrics().await;
        if waiting.is_empty()
            && ["trap", "deadline", "memory"]
                .iter()
                .all(|o| failed(&text, o) >= 1.0)
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(waiting.is_empty(), "not completed: {waiting:?}");
    let text = app.metrics().await;
    for outcome in ["trap", "deadline", "memory"] {
        assert!(failed(&text, outcome) >= 1.0, "{outcome}: {text}");
    }
    for (phone, id) in created.iter().filter(|(p, _)| !p.ends_with("0109")) {
        let (_, p) = app
            .get(&key, &format!("/api/v1/collect/payments/{id}"))
            .await;
        assert_eq!(
            p["status"], "processing",
            "{phone}: unknown stays in progress: {p}"
        );
        assert!(p["failure_code"].is_null(), "{phone}: {p}");
    }
}

#[service_test]
async fn the_admin_api_needs_its_token_and_refuses_bad_versions() {
    let app = spawn_app_with(|c| c.admin_token = Some(ADMIN.into())).await;
    let key = app.test_key("Shop");
    let resp = app
        .client
        .get(app.admin_url("/admin/v1/adapters"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 401, "a merchant key is not an admin token");
    assert_eq!(
        app.client
            .get(app.admin_url("/admin/v1/adapters"))
            .send()
            .await
            .unwrap()
            .status(),
        401
    );
    // Never on the public listener, even with the right token.
    let public = app
        .client
        .get(app.url("/admin/v1/adapters"))
        .bearer_auth(ADMIN)
        .send()
        .await
        .unwrap();
    assert_eq!(public.status(), 404);
    // The token is checked before the body is read: an upload announced but
    // never sent is answered 401 at once (it used to wait for the body).
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(&app.admin_base["http://".len()..])
            .await
            .unwrap();
        stream
            .write_all(
                b"PUT /admin/v1/adapters/simulator HTTP/1.1\r\nHost: admin\r\n\
                  Content-Length: 50000000\r\n\r\n",
            )
            .await
            .unwrap();
        let mut head = [0u8; 12];
        tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut head))
            .await
            .expect("answered without the body")
            .unwrap();
        assert_eq!(&head, b"HTTP/1.1 401");
    }
    let (status, list) = admin(&app, reqwest::Method::GET, "/admin/v1/adapters", None).await;
    assert_eq!(status, 200);
    let sim = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "simulator")
        .unwrap()
        .clone();
    assert_eq!(sim["operators"].as_array().unwrap().len(), 10);

    let (status, err) = admin(
        &app,
        reqwest::Method::PUT,
        "/admin/v1/adapters/simulator",
        Some(b"not wasm".to_vec()),
    )
    .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("component_refused")),
        "{err}"
    );
    let collect = std::fs::read(components_dir().join("collect.wasm")).unwrap();
    let (status, err) = admin(
        &app,
        reqwest::Method::PUT,
        "/admin/v1/adapters/simulator",
        Some(collect),
    )
    .await;
    assert_eq!(status, 400, "an API component is not an adapter: {err}");
    let hostile = std::fs::read(test_component("hostile")).unwrap();
    let (status, _) = admin(
        &app,
        reqwest::Method::PUT,
        "/admin/v1/adapters/simulator",
        Some(hostile),
    )
    .await;
    assert_eq!(status, 400);
    let (_, after) = admin(&app, reqwest::Method::GET, "/admin/v1/adapters", None).await;
    let still = after["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "simulator")
        .unwrap();
    assert_eq!(still["hash"], sim["hash"], "the old version keeps serving");
    let (status, _) = admin(
        &app,
        reqwest::Method::POST,
        "/admin/v1/adapters/simulator/rollback",
        None,
    )
    .await;
    assert_eq!(status, 409, "nothing to roll back to yet");
}

#[service_test]
async fn hot_swap_under_load_loses_nothing_and_rollback_and_restart_keep_versions() {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_path_buf();
    let d = data_dir.clone();
    let app = spawn_app_with(move |c| {
        c.admin_token = Some(ADMIN.into());
        c.data_dir = d;
        c.rate_limit.per_second = 0.0;
    })
    .await;
    let key = app.test_key("Shop");
    let original = std::fs::read(components_dir().join("simulator.wasm")).unwrap();
    let v2 = new_version(&original, "v2");

    // Load: 4 workers creating payments for ~2 s; the swap happens in the middle.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut workers = Vec::new();
    for _ in 0..4 {
        let (client, url, key, stop) = (
            app.client.clone(),
            app.url("/api/v1/collect/payments"),
            key.clone(),
            stop.clone(),
        );
        workers.push(tokio::spawn(async move {
            let mut results = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let resp = client
                    .post(&url)
                    .bearer_auth(&key)
                    .header("Idempotency-Key", new_key())
                    .json(&direct_payment("+2290166001234"))
                    .send()
                    .await
                    .unwrap();
                let status = resp.status().as_u16();
                let body: Value = resp.json().await.unwrap();
                results.push((
                    status,
                    body["id"].as_str().unwrap_or_default().to_string(),
                    Instant::now(),
                ));
            }
            results
        }));
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let (status, deployed) = admin(
        &app,
        reqwest::Method::PUT,
        "/admin/v1/adapters/simulator",
        Some(v2.clone()),
    )
    .await;
    let swapped_at = Instant::now();
    assert_eq!(status, 200, "{deployed}");
    let v2_hash = deployed["hash"].as_str().unwrap().to_string();
    tokio::time::sleep(Duration::from_millis(700)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut results = Vec::new();
    for w in workers {
        results.extend(w.await.unwrap());
    }
    let failed: Vec<_> = results.iter().filter(|(s, _, _)| *s != 201).collect();
    assert!(
        failed.is_empty(),
        "{} of {} requests failed: {failed:?}",
        failed.len(),
        results.len()
    );
    assert!(results.len() > 20, "a real load: {}", results.len());

    // The audit trail shows the new version serving right after the swap.
    let after: Vec<_> = results
        .iter()
        .filter(|(_, _, at)| *at > swapped_at + Duration::from_millis(50))
        .collect();
    assert!(!after.is_empty());
    for (_, id, _) in after.iter().take(5) {
        let calls = calls_once_listed(&app, id, "initiate", 1).await;
        let c = &calls[0];
        assert_eq!(c["operation"], "initiate");
        assert_eq!(c["adapter"], "simulator");
        assert_eq!(c["outcome"], "ok");
        assert_eq!(c["version"], v2_hash.as_str(), "served by the new version");
        assert!(c["duration_ms"].as_f64().unwrap() >= 0.0);
    }

    // Rollback, then v2 again, then a restart keeps the deployed version.
    let (status, back) = admin(
        &app,
        reqwest::Method::POST,
        "/admin/v1/adapters/simulator/rollback",
        None,
    )
    .await;
    assert_eq!(status, 200);
    assert_ne!(back["hash"], v2_hash.as_str());
    let (status, _) = admin(
        &app,
        reqwest::Method::PUT,
        "/admin/v1/adapters/simulator",
        Some(v2),
    )
    .await;
    assert_eq!(status, 200);
    app.service.running.task.abort();
    app.service.running.admin_task.abort();
    let restarted = spawn_app_with(move |c| {
        c.admin_token = Some(ADMIN.into());
        c.data_dir = data_dir;
    })
    .await;
    let (_, list) = admin(&restarted, reqwest::Method::GET, "/admin/v1/adapters", None).await;
    let sim = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["name"] == "simulator")
        .unwrap();
    assert_eq!(
        sim["hash"],
        v2_hash.as_str(),
        "the deployed version survives a restart"
    );
    assert!(sim["versions"].as_array().unwrap().len() >= 2);
}

/// An empty admin token used to mean no admin authentication at all.
#[service_test]
async fn a_short_or_empty_admin_token_is_refused_at_start() {
    for token in ["", "adm_short", "0123456789012345678901234567890"] {
        let dir = tempfile::tempdir().unwrap();
        let mut config = base_config(dir.path());
        config.admin_token = Some(token.into());
        let err = mmc_server::start(config, console_pages())
            .await
            .err()
            .expect("refused to start");
        assert!(err.to_string().contains("at least 32"), "{err}");
    }
}

/// A full adapter pool sends nothing: the create answers `503 operator_busy`
/// (the payment is kept, pending, never failed), and the merchant's retry
/// with the same Idempotency-Key sends it, once, under the same id.
#[service_test]
async fn a_busy_adapter_pool_fails_no_payment_and_the_retry_sends_it_once() {
    let dir = components_with(&[("rogue", test_component("rogue"))]);
    let app = spawn_app_with(move |c| {
        c.components_dir = Some(dir);
        c.routing
            .get_mut("test")
            .unwrap()
            .insert("mtn-bj".into(), "rogue".into());
        c.components.entry("rogue".into()).or_default().deadline_ms = Some(1500);
        c.limits.adapter_concurrent_calls = Some(1);
        c.limits.slot_wait_ms = Some(50);
    })
    .await;
    let key = app.test_key("Shop");
    // One payment holds the only adapter slot (its adapter loops until its deadline).
    let holder = {
        let (app_base, client, key) = (app.base.clone(), app.client.clone(), key.clone());
        tokio::spawn(async move {
            client
                .post(format!("{app_base}/api/v1/collect/payments"))
                .bearer_auth(&key)
                .header("Idempotency-Key", new_key())
                .json(&direct_payment("+2290166000102"))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idem = new_key();
    let body = direct_payment("+2290166000001");
    let (status, e) = app.create(&key, &idem, &body).await;
    if status != 503 {
        let m = app.metrics().await;
        for l in m
            .lines()
            .filter(|l| l.contains("rogue") || l.contains("busy"))
        {
            eprintln!("{l}");
        }
    }
    assert_eq!(status, 503, "{e}");
    assert_eq!(e["error"]["code"], "operator_busy");
    // Kept, not failed, not sent: readable by its reference.
    let reference = body["reference"].as_str().unwrap();
    let (_, p) = app
        .get(&key, &format!("/api/v1/collect/payments/{reference}"))
        .await;
    assert_eq!(p["status"], "pending", "{p}");
    assert!(p["psp_reference"].is_null(), "{p}");
    assert_eq!(holder.await.unwrap(), 201);

    // The retry sends it now, under the same id; a second retry replays it.
    let (status, sent) = app.create(&key, &idem, &body).await;
    assert_eq!(status, 201, "{sent}");
    assert_eq!(sent["id"], p["id"]);
    assert_eq!(sent["status"], "processing", "{sent}");
    assert_eq!(sent["psp_reference"], "rogue-ok");
    let (status, again) = app.create(&key, &idem, &body).await;
    assert_eq!(
        (status, again["idempotent_replay"].as_bool()),
        (200, Some(true))
    );
    let metrics = app.metrics().await;
    assert_eq!(
        metric(
            &metrics,
            "mmc_component_events_total",
            r#"component="collect",event="initiate_busy""#
        ),
        1.0
    );
}
