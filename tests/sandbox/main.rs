//! Each component alone in a wasmtime sandbox with fake capabilities
//! (in-memory storage, a clock that moves when told, scripted HTTP) — the
//! way a platform team tests its own component before deploying it.

#[path = "../support/mod.rs"]
mod support;

use std::time::Duration;

use mmc_host::config::{ComponentConfig, Config};
use mmc_host::runtime::bindings::adapter_types::*;
use mmc_host::runtime::bindings::http_types::{Caller, Request};
use mmc_host::runtime::{CallError, Kind};
use mmc_host::sandbox::{Sandbox, adapter_config};
use serde_json::{Value, json};

fn simulator() -> Sandbox {
    let mut settings = ComponentConfig::default();
    settings
        .settings
        .insert("completion_delay_ms".into(), "3000".into());
    let mut config = adapter_config("simulator", "test", settings);
    config.cache_dir = Some(support::cache_dir());
    let sb = Sandbox::new(&config).unwrap();
    sb.load(
        "simulator",
        &support::components_dir().join("simulator.wasm"),
    )
    .unwrap();
    sb
}

fn payment(phone: &str, operator: &str) -> InitiateRequest {
    InitiateRequest {
        payment_id: "p1".into(),
        reference: "r1".into(),
        operator: operator.into(),
        environment: "test".into(),
        amount: 1500,
        currency: "XOF".into(),
        country: "BJ".into(),
        phone: Some(phone.into()),
        mode: "direct".into(),
        description: None,
        callback_url: "http://127.0.0.1/cb".into(),
        return_url: None,
    }
}

fn op_ref(psp: &str) -> OperationRef {
    OperationRef {
        id: "p1".into(),
        operator: "mtn-bj".into(),
        environment: "test".into(),
        psp_reference: Some(psp.into()),
        phone: None,
        amount: 1500,
        currency: "XOF".into(),
    }
}

#[test]
fn simulator_describes_the_ten_operators() {
    let sb = simulator();
    let loaded = sb.runtime.get("simulator").unwrap();
    assert_eq!(loaded.kind, Kind::Adapter);
    let slugs: Vec<&str> = loaded.operators.iter().map(|o| o.slug.as_str()).collect();
    assert_eq!(slugs.len(), 10);
    for s in [
        "mtn-bj",
        "moov-bj",
        "celtiis-bj",
        "coris-bj",
        "togocom-tg",
        "moov-tg",
        "orange-ci",
        "mtn-ci",
        "moov-ci",
        "wave-ci",
    ] {
        assert!(slugs.contains(&s), "{s}");
    }
    let coris = loaded
        .operators
        .iter()
        .find(|o| o.slug == "coris-bj")
        .unwrap();
    assert!(coris.requires_otp);
    assert_eq!(sb.runtime.catalogue("test").len(), 10);
    assert!(sb.runtime.catalogue("live").is_empty());
}

#[test]
fn simulator_outcomes_follow_the_phone_and_the_clock() {
    let sb = simulator();
    let initiate = |phone: &str, op: &str| {
        let req = payment(phone, op);
        sb.runtime
            .call_adapter("test", op, |s, a| {
                a.mmc_adapter_operator().call_initiate(s, &req)
            })
            .unwrap()
    };
    let status = |psp: &str| {
        sb.runtime
            .call_adapter("test", "mtn-bj", |s, a| {
                a.mmc_adapter_operator().call_status(s, &op_ref(psp))
            })
            .unwrap()
    };

    // 0005: an explicit refusal (nothing performed), so the payment may fail.
    assert!(matches!(
        initiate("+2290166000005", "mtn-bj"),
        Err(AdapterError::Rejected(_))
    ));
    assert!(matches!(
        initiate("+2290166000001", "coris-bj"),
        Ok(Initiated::OtpRequired(_))
    ));
    let Ok(Initiated::AwaitingCustomer(slow)) = initiate("+2290166004321", "mtn-bj") else {
        panic!()
    };
    assert_eq!(status(&slow).unwrap(), PspStatus::Pending);
    sb.clock.advance(Duration::from_secs(3));
    assert!(
        support::completed(&status(&slow).unwrap()).is_some(),
        "completes after the configured delay"
    );
    let Ok(Initiated::AwaitingCustomer(r)) = initiate("+2290166000002", "mtn-bj") else {
        panic!()
    };
    assert!(matches!(status(&r).unwrap(), PspStatus::Failed(f) if f.code == "insufficient_funds"));
    let Ok(Initiated::AwaitingCustomer(r)) = initiate("+2290166000004", "mtn-bj") else {
        panic!()
    };
    sb.clock.advance(Duration::from_secs(3600));
    assert_eq!(
        status(&r).unwrap(),
        PspStatus::Pending,
        "0004 never completes"
    );

    let Ok(Initiated::OtpRequired(r)) = initiate("+2290166000001", "coris-bj") else {
        panic!()
    };
    let confirm = |otp: &str| {
        let r = op_ref(&r);
        let otp = otp.to_string();
        sb.runtime
            .call_adapter("test", "coris-bj", move |s, a| {
                a.mmc_adapter_operator().call_confirm_otp(s, &r, &otp)
            })
            .unwrap()
    };
    assert_eq!(confirm("000000").unwrap(), OtpOutcome::WrongCode);
    let OtpOutcome::Accepted(paid) = confirm("123456").unwrap() else {
        panic!("the right code is accepted")
    };
    assert!(support::completed(&paid).is_some(), "{paid:?}");
    assert!(
        sb.http.requests.lock().is_empty(),
        "the simulator makes no network calls"
    );
}

/// The calls of one `status-many` worker share an instance of the adapter
/// (an adapter session), yet each keeps its own deadline, and a call that
/// traps, runs out its deadline or its memory takes only its own answer
/// down: the next call gets a fresh instance.
#[test]
fn an_adapter_session_shares_one_instance_until_a_call_fails() {
    let mut config = adapter_config(
        "rogue",
        "test",
        ComponentConfig {
            deadline_ms: Some(300),
            memory_mib: Some(16),
            ..ComponentConfig::default()
        },
    );
    config.cache_dir = Some(support::cache_dir());
    let sb = Sandbox::new(&config).unwrap();
    sb.load("rogue", &support::test_component("rogue")).unwrap();
    let instances = || {
        support::metric(
            &sb.runtime.services.metrics.render(),
            "mmc_component_instantiations_total",
            "component=\"rogue\"",
        )
    };
    let at_load = instances();
    let mut session = sb.runtime.adapter_session();
    let mut status = |psp: &str| {
        let started = std::time::Instant::now();
        let (answer, served_by) = session.call(("test", "mtn-bj"), None, |s, a| {
            a.mmc_adapter_operator().call_status(s, &op_ref(psp))
        });
        assert_eq!(served_by.unwrap().name, "rogue");
        (answer, started.elapsed())
    };

    for _ in 0..5 {
        assert!(matches!(status("rogue-ok").0, Ok(Ok(PspStatus::Pending))));
    }
    assert_eq!(instances() - at_load, 1.0, "five calls, one instance");

    // Each call has the whole deadline (300 ms), however long the session.
    let (answer, took) = status("status-loops");
    assert!(matches!(answer, Err(CallError::Deadline(_))), "{answer:?}");
    assert!(took >= Duration::from_millis(300), "{took:?}");
    assert!(matches!(
        status("status-completes").0,
        Ok(Ok(PspStatus::Completed(_)))
    ));
    let (answer, _) = status("status-loops");
    assert!(matches!(answer, Err(CallError::Deadline(_))), "{answer:?}");

    let (answer, _) = status("status-panics");
    assert!(matches!(answer, Err(CallError::Trap { .. })), "{answer:?}");
    let (answer, _) = status("status-hoards");
    assert!(matches!(answer, Err(CallError::Memory(_))), "{answer:?}");
    assert!(matches!(status("rogue-ok").0, Ok(Ok(PspStatus::Pending))));
    assert!(matches!(
        status("status-completes").0,
        Ok(Ok(PspStatus::Completed(_)))
    ));
    // Every failure discarded its instance: the first, then one after each of four failures.
    assert_eq!(instances() - at_load, 5.0);

    // An operator no adapter serves is no route, and does not end the session's instance.
    let (answer, served_by) = session.call(("test", "wave-sn"), None, |s, a| {
        a.mmc_adapter_operator().call_status(s, &op_ref("rogue-ok"))
    });
    assert!(
        matches!(answer, Err(CallError::NoRoute { .. })),
        "{answer:?}"
    );
    assert!(served_by.is_none());
    let (answer, _) = session.call(("test", "mtn-bj"), None, |s, a| {
        a.mmc_adapter_operator().call_status(s, &op_ref("rogue-ok"))
    });
    assert!(matches!(answer, Ok(Ok(PspStatus::Pending))));
    assert_eq!(instances() - at_load, 5.0);
}

fn collect_alone() -> Sandbox {
    let config = Config {
        cache_dir: Some(support::cache_dir()),
        ..Default::default()
    };
    let sb = Sandbox::new(&config).unwrap();
    sb.load("collect", &support::components_dir().join("collect.wasm"))
        .unwrap();
    sb
}

fn call(
    sb: &Sandbox,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (u16, Value) {
    let caller = Caller {
        merchant_id: "m1".into(),
        merchant_name: "Boutique Awa".into(),
        environment: "test".into(),
        key_id: "k1".into(),
        person: None,
        require_second_approver: false,
        request_id: "r1".into(),
        base_url: "https://pay.example".into(),
    };
    let req = Request {
        method: method.into(),
        path: path.into(),
        query: String::new(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        body: if body.is_null() {
            Vec::new()
        } else {
            serde_json::to_vec(&body).unwrap()
        },
    };
    let resp = sb.runtime.handle("collect", Some(&caller), &req).unwrap();
    (
        resp.status,
        serde_json::from_slice(&resp.body).unwrap_or(Value::Null),
    )
}

#[test]
fn collect_alone_stores_hosted_payments_and_refuses_unreachable_operators() {
    let sb = collect_alone();
    let idem = [("idempotency-key", "6f1c1a52-8d0e-4c1e-9a57-3f4f2c8b9d10")];
    let hosted = json!({"reference": "h1", "amount": 500, "currency": "XOF", "country": "TG", "mode": "hosted"});
    let (status, p) = call(
        &sb,
        "POST",
        "/api/v1/collect/payments",
        &idem,
        hosted.clone(),
    );
    assert_eq!(status, 201, "{p}");
    assert_eq!(p["status"], "awaiting_payment");
    assert_eq!(
        p["checkout_url"],
        format!("https://pay.example/checkout/{}", p["id"].as_str().unwrap())
    );
    assert_eq!(
        p["created_at"], "2026-06-01T00:00:00.000Z",
        "the fake clock"
    );
    assert_eq!(p["expires_at"], "2026-06-01T00:15:00.000Z", "default 900 s");
    let (status, again) = call(&sb, "POST", "/api/v1/collect/payments", &idem, hosted);
    assert_eq!(
        (status, &again["id"], &again["idempotent_replay"]),
        (200, &p["id"], &json!(true))
    );
    let (status, read) = call(&sb, "GET", "/api/v1/collect/payments/h1", &[], Value::Null);
    assert_eq!((status, &read["id"]), (200, &p["id"]));

    // Events were written with the change (outbox), in order.
    let events: Vec<String> = sb
        .storage
        .events()
        .iter()
        .map(|e| e.event_type.clone())
        .collect();
    assert_eq!(
        events,
        vec![
            "collect.payment.created",
            "collect.payment.awaiting_payment"
        ],
        "every status change has its event"
    );

    // No adapter is loaded in this sandbox: the operator is unavailable, nothing is stored.
    let direct = json!({"reference": "d1", "amount": 500, "currency": "XOF", "country": "TG", "operator": "tmoney",
                        "customer": {"phone": "90000001"}});
    let (status, err) = call(
        &sb,
        "POST",
        "/api/v1/collect/payments",
        &[("idempotency-key", "0b6a1f3e-2c4d-4e5f-8a9b-0c1d2e3f4a5b")],
        direct,
    );
    assert_eq!(status, 400);
    assert_eq!(err["error"]["code"], "operator_unavailable");
    assert_eq!(
        call(&sb, "GET", "/api/v1/collect/payments/d1", &[], Value::Null).0,
        404
    );
}

#[test]
fn collect_expires_unfinished_payments_when_the_clock_passes_their_deadline() {
    let sb = collect_alone();
    let idem = [("idempotency-key", "6f1c1a52-8d0e-4c1e-9a57-3f4f2c8b9d11")];
    let hosted = json!({"reference": "h2", "amount": 500, "currency": "XOF", "country": "CI", "mode": "hosted", "expires_in_seconds": 300});
    assert_eq!(
        call(&sb, "POST", "/api/v1/collect/payments", &idem, hosted).0,
        201
    );
    assert_eq!(
        sb.runtime.run_job("collect", "expire", 10).unwrap(),
        0,
        "not yet due"
    );
    sb.clock.advance(Duration::from_secs(301));
    assert_eq!(sb.runtime.run_job("collect", "expire", 10).unwrap(), 1);
    let (_, p) = call(&sb, "GET", "/api/v1/collect/payments/h2", &[], Value::Null);
    assert_eq!(p["status"], "expired");
    assert_eq!(
        sb.runtime.run_job("collect", "expire", 10).unwrap(),
        0,
        "expired once"
    );
    let events: Vec<String> = sb
        .storage
        .events()
        .iter()
        .map(|e| e.event_type.clone())
        .collect();
    assert_eq!(
        events,
        vec![
            "collect.payment.created",
            "collect.payment.awaiting_payment",
            "collect.payment.expired"
        ]
    );
}
