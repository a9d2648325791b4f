//! Each component alone in a wasmtime sandbox with fake capabilities
//! (in-memory storage, a clock that moves when told, scripted HTTP) — the
//! way a platform team tests its own component before deploying it.

#[path = "../support/mod.rs"]
mod support;

use std::time::Duration;

use mmc_config::{ComponentConfig, Config};
use mmc_runtime::bindings::adapter_types::*;
use mmc_runtime::bindings::http_types::{Caller, Request};
use mmc_runtime::{CallError, Kind};
use mmc_sandbox::{Sandbox, adapter_config};
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

/// The rogue adapter alone (a 300 ms deadline, 16 MiB of memory), each
/// instance serving `calls` calls, with room for `warm` idle instances.
fn rogue(calls: Option<u32>, warm: u32) -> Sandbox {
    let mut config = adapter_config(
        "rogue",
        "test",
        ComponentConfig {
            deadline_ms: Some(300),
            memory_mib: Some(16),
            calls_per_instance: calls,
            ..ComponentConfig::default()
        },
    );
    config.cache_dir = Some(support::cache_dir());
    config.limits.warm_instances = warm;
    let sb = Sandbox::new(&config).unwrap();
    sb.load("rogue", &support::test_component("rogue")).unwrap();
    sb
}

/// Instances of the rogue adapter made so far.
fn rogue_instances(sb: &Sandbox) -> f64 {
    support::metric(
        &sb.runtime.services.metrics.render(),
        "mmc_component_instantiations_total",
        "component=\"rogue\"",
    )
}

/// The calls of one `status-many` worker share an instance of the adapter
/// (an adapter session), yet each keeps its own deadline, and a call that
/// traps, runs out its deadline or its memory takes only its own answer
/// down: the next call gets a fresh instance.
#[test]
fn an_adapter_session_shares_one_instance_until_a_call_fails() {
    let sb = rogue(None, 0);
    let instances = || rogue_instances(&sb);
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

/// An adapter configured to serve several calls per instance keeps one warm
/// between calls, up to that many; a failed call drops it, a redeploy starts
/// afresh, a runtime no one else holds is let go with its idle instances, and
/// with no room for idle instances every call has its own.
#[test]
fn an_adapter_serving_several_calls_per_instance_keeps_it_until_a_call_fails() {
    let rogue = |calls: u32, warm: u32| rogue(Some(calls), warm);
    let instances = rogue_instances;
    let status = |sb: &Sandbox, psp: &str| {
        sb.runtime.call_adapter("test", "mtn-bj", |s, a| {
            a.mmc_adapter_operator().call_status(s, &op_ref(psp))
        })
    };

    let sb = rogue(3, 8);
    let at_load = instances(&sb);
    for _ in 0..7 {
        assert!(matches!(
            status(&sb, "rogue-ok"),
            Ok(Ok(PspStatus::Pending))
        ));
    }
    assert_eq!(
        instances(&sb) - at_load,
        3.0,
        "seven calls, three per instance"
    );

    // The eighth call is the third instance's second; each failure drops its instance.
    let answer = status(&sb, "status-panics");
    assert!(matches!(answer, Err(CallError::Trap { .. })), "{answer:?}");
    let answer = status(&sb, "status-loops");
    assert!(matches!(answer, Err(CallError::Deadline(_))), "{answer:?}");
    let answer = status(&sb, "status-hoards");
    assert!(matches!(answer, Err(CallError::Memory(_))), "{answer:?}");
    assert!(matches!(
        status(&sb, "status-completes"),
        Ok(Ok(PspStatus::Completed(_)))
    ));
    assert_eq!(
        instances(&sb) - at_load,
        6.0,
        "one instance more after each failure"
    );

    // A redeploy (the same bytes, prepared again) is served by a new instance.
    assert!(matches!(
        status(&sb, "rogue-ok"),
        Ok(Ok(PspStatus::Pending))
    ));
    sb.load("rogue", &support::test_component("rogue")).unwrap();
    let before = instances(&sb);
    assert!(matches!(
        status(&sb, "rogue-ok"),
        Ok(Ok(PspStatus::Pending))
    ));
    assert_eq!(
        instances(&sb) - before,
        1.0,
        "the new version's own instance"
    );

    // Idle instances hold their runtime; once nothing else does, they go, and it with them.
    let runtime = std::sync::Arc::downgrade(&sb.runtime);
    drop(sb);
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while runtime.upgrade().is_some() && std::time::Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        runtime.upgrade().is_none(),
        "a runtime kept alive by its idle instances"
    );

    // No room for idle instances: each call has a fresh one.
    let sb = rogue(3, 0);
    let at_load = instances(&sb);
    for _ in 0..3 {
        assert!(matches!(
            status(&sb, "rogue-ok"),
            Ok(Ok(PspStatus::Pending))
        ));
    }
    assert_eq!(instances(&sb) - at_load, 3.0);
}

/// A status round (an adapter session) of an adapter that keeps its
/// instances warm borrows an idle one and gives it back when the round ends,
/// so rounds and single calls share the interpreter's warm instances; an
/// instance whose call failed in a round is not given back, and one that has
/// served its `calls_per_instance` goes.
#[test]
fn a_status_round_of_a_warm_adapter_borrows_its_idle_instance_and_gives_it_back() {
    let sb = rogue(Some(6), 8);
    let instances = || rogue_instances(&sb);
    let single = || {
        sb.runtime.call_adapter("test", "mtn-bj", |s, a| {
            a.mmc_adapter_operator().call_status(s, &op_ref("rogue-ok"))
        })
    };
    let round = |psps: &[&str]| {
        let mut session = sb.runtime.adapter_session();
        psps.iter()
            .map(|psp| {
                session
                    .call(("test", "mtn-bj"), None, |s, a| {
                        a.mmc_adapter_operator().call_status(s, &op_ref(psp))
                    })
                    .0
            })
            .collect::<Vec<_>>()
    };
    let pending = |a: &Result<_, CallError>| matches!(a, Ok(Ok(PspStatus::Pending)));
    let at_load = instances();

    assert!(pending(&single()));
    let answers = round(&["rogue-ok", "rogue-ok"]);
    assert!(answers.iter().all(pending));
    assert!(pending(&single()));
    assert_eq!(instances() - at_load, 1.0, "four calls, one warm instance");

    // A failed call in a round drops the instance; the round goes on with a new one.
    let answers = round(&["status-panics", "rogue-ok"]);
    assert!(
        matches!(answers[0], Err(CallError::Trap { .. })),
        "{answers:?}"
    );
    assert!(pending(&answers[1]));
    assert_eq!(instances() - at_load, 2.0);
    // The round's new instance was given back: the next call finds it.
    assert!(pending(&single()));
    assert_eq!(instances() - at_load, 2.0);

    // Six calls an instance: a round that reaches the sixth lets it go.
    let answers = round(&["rogue-ok"; 4]);
    assert!(answers.iter().all(pending));
    assert!(pending(&single()));
    assert_eq!(instances() - at_load, 3.0, "the second instance served six");
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
    call_in(sb, "collect", method, path, headers, body)
}

/// One request to the API component `component`, from merchant `m1`'s test key.
fn call_in(
    sb: &Sandbox,
    component: &str,
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
    let resp = sb.runtime.handle(component, Some(&caller), &req).unwrap();
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

/// Bulk and the MTN adapter together, MTN answered by a script.
fn bulk_with_momo() -> Sandbox {
    let mut momo = ComponentConfig {
        allowed_hosts: vec!["mtn.example:8443".into()],
        ..Default::default()
    };
    momo.settings
        .insert("base_url".into(), "http://mtn.example:8443".into());
    momo.settings
        .insert("target_environment".into(), "mtnbenin".into());
    // Benin only: one disbursement account, whose balance a batch reads first.
    momo.settings.insert("operators".into(), "mtn-bj".into());
    for secret in [
        "disbursement_api_user",
        "disbursement_api_key",
        "disbursement_subscription_key",
        "collection_api_user",
        "collection_api_key",
        "collection_subscription_key",
    ] {
        momo.secrets.insert(secret.into(), "sandbox-secret".into());
    }
    let mut config = adapter_config("momo", "test", momo);
    config.cache_dir = Some(support::cache_dir());
    let sb = Sandbox::new(&config).unwrap();
    for name in ["bulk", "momo"] {
        sb.load(
            name,
            &support::components_dir().join(format!("{name}.wasm")),
        )
        .unwrap();
    }
    sb
}

fn bulk_call(sb: &Sandbox, method: &str, path: &str, body: Value) -> (u16, Value) {
    let idem = [("idempotency-key", "4b1f7c2e-5d3a-4e8f-9a0b-1c2d3e4f5a6b")];
    call_in(sb, "bulk", method, path, &idem, body)
}

/// A node frozen between claiming a payout and sending it (here: the clock
/// jumps while it fetches MTN's token) wakes past the attempt's sending
/// deadline: the host sends none of its bytes. The payout stays
/// `processing`; once nothing can be in flight, MTN's "not found" makes it
/// go again under the same `X-Reference-Id`, once, and MTN's answer ends it.
#[test]
fn a_payout_whose_sender_froze_past_its_deadline_sends_nothing_then_goes_once_under_its_id() {
    use mmc_runtime::bindings::host::mmc::platform::outbound_http::Response as HttpResponse;
    let sb = bulk_with_momo();
    let clock = sb.clock.clone();
    let paid = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let froze = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let broken = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let answer = |status: u16, body: Value| {
        Ok(HttpResponse {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: if body.is_null() {
                Vec::new()
            } else {
                serde_json::to_vec(&body).unwrap()
            },
        })
    };
    let float_read = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (paid_in, froze_in, broken_in) = (paid.clone(), froze.clone(), broken.clone());
    let float_in = float_read.clone();
    sb.http.respond_with(move |req| {
        use std::sync::atomic::Ordering::SeqCst;
        match (req.method.as_str(), req.url.as_str()) {
            ("POST", u) if u.ends_with("/disbursement/token/") => {
                // The batch's float is read first, under a token too short-lived
                // to be kept; the payout's own token is where the node
                // freezes, for two minutes.
                if !float_in.load(SeqCst) {
                    return answer(
                        200,
                        json!({"access_token": "f1oat", "token_type": "access_token", "expires_in": 60}),
                    );
                }
                if !froze_in.swap(true, SeqCst) {
                    clock.advance(Duration::from_secs(120));
                }
                answer(
                    200,
                    json!({"access_token": "t0k3n", "token_type": "access_token", "expires_in": 36000}),
                )
            }
            ("GET", u) if u.ends_with("/disbursement/v1_0/account/balance") => {
                float_in.store(true, SeqCst);
                answer(200, json!({"availableBalance": "1000000", "currency": "XOF"}))
            }
            ("POST", u) if u.ends_with("/disbursement/v1_0/transfer") => answer(202, Value::Null),
            ("GET", u) if u.contains("/disbursement/v1_0/transfer/") => {
                if broken_in.load(SeqCst) {
                    answer(503, json!({"message": "upstream unavailable"}))
                } else if paid_in.load(SeqCst) {
                    answer(
                        200,
                        json!({"financialTransactionId": "9001", "externalId": "x", "amount": "2500",
                               "currency": "XOF", "payee": {"partyIdType": "MSISDN", "partyId": "2290166000001"},
                               "status": "SUCCESSFUL"}),
                    )
                } else {
                    answer(
                        404,
                        json!({"code": "RESOURCE_NOT_FOUND", "message": "Requested resource was not found."}),
                    )
                }
            }
            _ => answer(404, json!({"code": "NOT_FOUND", "message": "no such endpoint"})),
        }
    });
    let batch = json!({"name": "Salaires", "items": [{"beneficiary_name": "Awa Koné",
        "phone": "+2290166000001", "amount": 2500, "currency": "XOF", "reference": "awa-1"}]});
    let (status, b) = bulk_call(&sb, "POST", "/api/v1/bulk-payments/", batch);
    assert_eq!(status, 201, "{b}");
    let id = b["id"].as_str().unwrap().to_string();
    let (status, v) = bulk_call(
        &sb,
        "POST",
        &format!("/api/v1/bulk-payments/{id}/validate/"),
        json!({}),
    );
    assert_eq!(status, 200, "{v}");
    let transfers = || {
        sb.http
            .requests
            .lock()
            .iter()
            .filter(|r| r.method == "POST" && r.url.ends_with("/v1_0/transfer"))
            .map(|r| {
                r.headers
                    .iter()
                    .find(|(k, _)| k == "X-Reference-Id")
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            })
            .collect::<Vec<String>>()
    };
    let item = || {
        let (_, page) = bulk_call(
            &sb,
            "GET",
            &format!("/api/v1/bulk-payments/{id}/items/"),
            Value::Null,
        );
        page["results"][0].clone()
    };

    // Claimed, then frozen past the attempt's deadline: nothing leaves.
    sb.runtime.run_job("bulk", "payouts", 10).unwrap();
    assert!(
        float_read.load(std::sync::atomic::Ordering::SeqCst),
        "the batch's float was read before its first payout"
    );
    assert!(
        froze.load(std::sync::atomic::Ordering::SeqCst),
        "the token was fetched"
    );
    assert_eq!(
        transfers(),
        Vec::<String>::new(),
        "no transfer after the deadline"
    );
    assert_eq!(item()["status"], "processing", "unknown, never failed");

    // The check after it: MTN does not know the payout, and nothing of ours
    // can be on its way: sent again, under the id it always had, once.
    sb.clock.advance(Duration::from_secs(3));
    sb.runtime.run_job("bulk", "payouts", 10).unwrap();
    let sent = transfers();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(item()["status"], "processing");

    // MTN's status cannot be read for a while: still processing, and the
    // item says why.
    broken.store(true, std::sync::atomic::Ordering::SeqCst);
    sb.clock.advance(Duration::from_secs(5));
    sb.runtime.run_job("bulk", "payouts", 10).unwrap();
    let unreadable = item();
    assert_eq!(unreadable["status"], "processing");
    assert!(
        unreadable["unconfirmed"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("could not be read")),
        "{unreadable}"
    );
    let batch = || {
        bulk_call(
            &sb,
            "GET",
            &format!("/api/v1/bulk-payments/{id}/"),
            Value::Null,
        )
        .1
    };
    let summary = batch();
    assert_eq!(summary["unconfirmed"]["count"], 1, "{summary}");
    assert_eq!(
        summary["unconfirmed"]["reasons"][0]["reason"], unreadable["unconfirmed"]["reason"],
        "{summary}"
    );

    // MTN pays it; the next check records it.
    broken.store(false, std::sync::atomic::Ordering::SeqCst);
    paid.store(true, std::sync::atomic::Ordering::SeqCst);
    sb.clock.advance(Duration::from_secs(5));
    sb.runtime.run_job("bulk", "payouts", 10).unwrap();
    sb.clock.advance(Duration::from_secs(60));
    sb.runtime.run_job("bulk", "payouts", 10).unwrap();
    let done = item();
    assert_eq!(done["status"], "completed", "{done}");
    assert!(done.get("unconfirmed").is_none(), "{done}");
    let summary = batch();
    assert!(summary.get("unconfirmed").is_none(), "{summary}");
    assert_eq!(transfers(), sent, "nothing more was sent");
}

/// A job's lease as a test sets it.
struct TestLease(std::sync::atomic::AtomicBool);

impl mmc_runtime::state::LeaseGuard for TestLease {
    fn held(&self) -> bool {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// A node whose lease on the payouts job has passed (it resumed after
/// another node took the job over) commits nothing: it claims no item, so
/// it sends no payout; with the lease held, the same run pays.
#[test]
fn a_payouts_run_whose_lease_has_passed_claims_and_sends_nothing() {
    use mmc_runtime::bindings::host::mmc::platform::outbound_http::Response as HttpResponse;
    let sb = bulk_with_momo();
    sb.http.respond_with(|req| {
        let (status, body) = if req.url.ends_with("/disbursement/token/") {
            (
                200,
                json!({"access_token": "t0k3n", "token_type": "access_token", "expires_in": 3600})
                    .to_string(),
            )
        } else {
            (202, String::new())
        };
        Ok(HttpResponse {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.into_bytes(),
        })
    });
    let batch = json!({"name": "Primes", "items": [{"beneficiary_name": "Kofi Mensah",
        "phone": "+2290166000002", "amount": 1500, "currency": "XOF", "reference": "kofi-1"}]});
    let (status, b) = bulk_call(&sb, "POST", "/api/v1/bulk-payments/", batch);
    assert_eq!(status, 201, "{b}");
    let id = b["id"].as_str().unwrap().to_string();
    let validate = format!("/api/v1/bulk-payments/{id}/validate/");
    assert_eq!(bulk_call(&sb, "POST", &validate, json!({})).0, 200);
    let items = format!("/api/v1/bulk-payments/{id}/items/");
    let sent = || {
        sb.http
            .requests
            .lock()
            .iter()
            .filter(|r| r.method == "POST" && r.url.ends_with("/v1_0/transfer"))
            .count()
    };

    let lease = std::sync::Arc::new(TestLease(std::sync::atomic::AtomicBool::new(false)));
    let passed: std::sync::Arc<dyn mmc_runtime::state::LeaseGuard> = lease.clone();
    let _ = sb
        .runtime
        .run_job_leased("bulk", "payouts", 10, Some(passed));
    assert_eq!(sent(), 0, "nothing sent under a lease that has passed");
    let (_, page) = bulk_call(&sb, "GET", &items, Value::Null);
    assert_eq!(page["results"][0]["status"], "pending", "{page}");

    lease.0.store(true, std::sync::atomic::Ordering::SeqCst);
    let held: std::sync::Arc<dyn mmc_runtime::state::LeaseGuard> = lease;
    sb.runtime
        .run_job_leased("bulk", "payouts", 10, Some(held))
        .unwrap();
    assert_eq!(sent(), 1);
    let (_, page) = bulk_call(&sb, "GET", &items, Value::Null);
    assert_eq!(page["results"][0]["status"], "processing", "{page}");
}
