//! A component that loops forever, allocates without bound, panics or traps
//! with an open transaction is stopped and reported; the server keeps serving.

use std::time::{Duration, Instant};

use mmc_config::{Generation, Route};

use crate::support::*;
use mmc_test_kit::service_test;

async fn app_with_hostile() -> TestApp {
    app_with_hostile_and(|_| {}).await
}

async fn app_with_hostile_and(adjust: impl FnOnce(&mut mmc_config::Config)) -> TestApp {
    let components = tempfile::tempdir().unwrap().keep();
    for name in ["collect", "simulator"] {
        std::fs::copy(
            components_dir().join(format!("{name}.wasm")),
            components.join(format!("{name}.wasm")),
        )
        .unwrap();
    }
    std::fs::copy(test_component("hostile"), components.join("hostile.wasm")).unwrap();
    spawn_app_with(move |c| {
        c.components_dir = Some(components);
        c.limits.api_deadline_ms = 500;
        c.limits.memory_mib = 32;
        c.routes.push(Route {
            prefix: "/api/v1/hostile".into(),
            component: "hostile".into(),
            generation: Generation::Current,
            public: false,
            max_body_bytes: None,
        });
        adjust(c);
    })
    .await
}

/// `GET /api/v1/hostile/{what}`: the last segment picks the misbehaviour.
fn hostile(app: &TestApp, key: &str, what: &str) -> reqwest::RequestBuilder {
    app.client
        .get(app.url(&format!("/api/v1/hostile/{what}")))
        .bearer_auth(key)
}

#[service_test]
async fn a_call_beyond_the_instance_slots_waits_for_a_slot_instead_of_failing() {
    // One API call at a time, each with a 1 s deadline.
    let app = app_with_hostile_and(|c| {
        c.limits.concurrent_calls = 1;
        c.limits.api_deadline_ms = 1_000;
    })
    .await;
    let key = app.test_key("Shop");
    // The runaway loop holds the only slot until its deadline stops it...
    let looping = tokio::spawn(hostile(&app, &key, "loop").send());
    tokio::time::sleep(Duration::from_millis(100)).await;
    // ...so a create sent meanwhile queues for the slot, then succeeds.
    let asked = Instant::now();
    app.create_ok(&key, &direct_payment("+2290166000001")).await;
    assert!(
        asked.elapsed() >= Duration::from_millis(500),
        "the create waited for the slot ({:?})",
        asked.elapsed()
    );
    assert_eq!(looping.await.unwrap().unwrap().status(), 500);
}

#[service_test]
async fn runaway_components_are_stopped_and_the_server_keeps_serving() {
    let app = app_with_hostile().await;
    let key = app.test_key("Shop");
    let hostile = |what: &str| hostile(&app, &key, what).send();

    // Start the infinite loop, and while it runs, serve other requests.
    let started = Instant::now();
    let looping = tokio::spawn(hostile("loop"));
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        app.client
            .get(app.url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let (status, _) = app
        .create(&key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    assert_eq!(status, 201, "a create succeeds while a component loops");
    let resp = looping.await.unwrap().unwrap();
    assert_eq!(resp.status(), 500);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["type"], "api_error");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "stopped near its 500 ms deadline: {:?}",
        started.elapsed()
    );

    let resp = hostile("alloc").await.unwrap();
    assert_eq!(resp.status(), 500);
    assert_eq!(
        resp.json::<serde_json::Value>().await.unwrap()["error"]["type"],
        "api_error"
    );

    let resp = hostile("panic").await.unwrap();
    assert_eq!(resp.status(), 500);

    // A trap with an open transaction: rolled back, the writer is free again.
    let resp = hostile("storage").await.unwrap();
    assert_eq!(resp.status(), 500);
    let (status, _) = app
        .create(&key, &new_key(), &direct_payment("+2290166000001"))
        .await;
    assert_eq!(status, 201);

    assert_eq!(
        hostile("fine").await.unwrap().status(),
        200,
        "the component still serves after its traps"
    );

    let text = app.metrics().await;
    assert_eq!(
        metric(
            &text,
            "mmc_component_traps_total",
            "component=\"hostile\",kind=\"deadline\""
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "mmc_component_traps_total",
            "component=\"hostile\",kind=\"memory\""
        ),
        1.0,
        "{text}"
    );
    assert_eq!(
        metric(
            &text,
            "mmc_component_traps_total",
            "component=\"hostile\",kind=\"trap\""
        ),
        2.0,
        "{text}"
    );
}

/// GETs run on the tokio worker that read them (on SQLite); one that computes
/// past the inline budget is stopped there and served again on a blocking
/// thread, so a slow read answers normally and never holds a worker for long.
#[service_test]
async fn a_read_that_computes_past_the_inline_budget_is_answered_from_a_blocking_thread() {
    let app = app_with_hostile().await;
    let key = app.test_key("Shop");
    let hostile = |what: &str| hostile(&app, &key, what).send();
    let slow = tokio::spawn(hostile("slow"));
    // While it computes, the worker it started on serves again.
    tokio::time::sleep(Duration::from_millis(60)).await;
    let asked = Instant::now();
    assert_eq!(hostile("fine").await.unwrap().status(), 200);
    assert!(
        asked.elapsed() < Duration::from_millis(100),
        "{:?}",
        asked.elapsed()
    );
    let resp = slow.await.unwrap().unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "slow but done");

    // Writing to stderr on a worker (WASI's blocking stream calls) is no panic.
    let resp = hostile("stderr").await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.text().await.unwrap(), "wrote to stderr");

    let text = app.metrics().await;
    let calls = |outcome: &str| {
        metric(
            &text,
            "mmc_component_calls_total",
            &format!("component=\"hostile\",outcome=\"{outcome}\""),
        )
    };
    if on_postgres() {
        // A read on PostgreSQL is a network round trip: every request runs
        // on a blocking thread, and none has anything to move.
        assert_eq!(calls("moved"), 0.0, "{text}");
    } else {
        assert_eq!(calls("moved"), 1.0, "{text}");
    }
    assert_eq!(calls("ok"), 3.0, "{text}");
}
