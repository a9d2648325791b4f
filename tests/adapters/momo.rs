//! `momo` (MTN MoMo Open API) against the fake MTN.

use std::time::Duration;

use mmc_runtime::bindings::adapter_types::*;
use serde_json::json;

use crate::registry::{self, AtOperator, Entry, Harness, Op};
use crate::support::fakes::mtn::{self, FakeMtn};
use crate::support::fakes::{Callbacks, Fault, Outcome, REFUSED_BECAUSE_OF_US};
use crate::support::fakes::{Plumbing, normal_key};
use crate::support::*;
use crate::*;
use futures::future::BoxFuture;
use mmc_config::ComponentConfig;
use mmc_test_kit::service_test;

const PHONE: &str = "+2290166000001";

pub(crate) async fn mtn_app(
    fake: &FakeMtn,
    tweak: impl FnOnce(&mut mmc_config::ComponentConfig),
) -> TestApp {
    let mut component = fake.component_config();
    tweak(&mut component);
    app_with_adapter("momo", &["mtn-bj"], component, |_| {}).await
}

/// Returns once MTN has received a request to `endpoint`. A step that must
/// fall while MTN is still answering starts from that arrival, not from a
/// sleep: on a loaded machine a fixed sleep could fall before our request left
/// or after MTN's answer.
async fn arrived(fake: &FakeMtn, endpoint: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while fake.requests(endpoint).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "no request to {endpoint} reached MTN"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

#[service_test]
async fn mtn_payment_completes_via_the_callback_with_the_protocol_followed() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(200));
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(p["status"], "processing", "{p}");
    assert_eq!(p["environment"], "live");
    let reference = operator_id(id);
    assert_eq!(
        p["psp_reference"], reference,
        "X-Reference-Id is our payment id, as the UUIDv4 MTN demands"
    );

    // One request to pay, exactly as the Open API wants it.
    let sent = fake.requests("requesttopay");
    assert_eq!(sent.len(), 1);
    let r = &sent[0];
    assert_eq!(r.header("X-Reference-Id"), Some(reference.as_str()));
    assert_eq!(
        r.header("X-Target-Environment"),
        Some(mtn::TARGET_ENVIRONMENT)
    );
    assert_eq!(
        r.header("Ocp-Apim-Subscription-Key"),
        Some(mtn::COLLECTION_KEY)
    );
    assert!(r.header("Authorization").unwrap().starts_with("Bearer "));
    // The address names the route, so that its adapter reads the callback.
    let callback = format!(
        "{}/api/v1/psp/mtn-bj/callback?environment=live&via=momo",
        app.base
    );
    assert_eq!(r.header("X-Callback-Url"), Some(callback.as_str()));
    let body = r.json().unwrap();
    assert_eq!(body["amount"], "1500", "amounts are strings");
    assert_eq!(body["currency"], "XOF");
    assert_eq!(body["externalId"], id);
    assert_eq!(
        body["payer"],
        json!({"partyIdType": "MSISDN", "partyId": "2290166000001"})
    );
    assert_eq!(fake.requests("token").len(), 1, "one token per operation");

    // The callback (at ~200 ms) completes it well before the first poll (2 s).
    let done = wait_for(&app, &live, id, "completed", Duration::from_millis(1500)).await;
    assert!(done["completed_at"].is_string());
    assert_eq!(fake.callbacks_sent(), vec![(callback, 200)]);
    // The unsigned callback was checked against MTN's own status resource.
    assert!(!fake.requests("requesttopay_status").is_empty());
}

#[service_test]
async fn mtn_payment_completes_by_polling_when_the_callback_never_comes() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.callbacks(Callbacks::Lost);
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    wait_for(&app, &live, id, "completed", Duration::from_secs(8)).await;
    assert!(fake.callbacks_sent().is_empty());
    let polls = fake.requests("requesttopay_status");
    assert!(!polls.is_empty());
    assert!(polls.iter().all(|r| r.path.ends_with(&operator_id(id))));
}

#[service_test]
async fn mtn_failure_carries_the_operators_reason() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.set_outcome("2290166000002", Outcome::Fail("NOT_ENOUGH_FUNDS"));
    fake.set_outcome("2290166000003", Outcome::Fail("APPROVAL_REJECTED"));
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    for (phone, code) in [
        ("+2290166000002", "insufficient_funds"),
        ("+2290166000003", "declined_by_customer"),
    ] {
        let p = create(&app, &live, &live_payment("BJ", "mtn-bj", phone)).await;
        let p = wait_for(
            &app,
            &live,
            p["id"].as_str().unwrap(),
            "failed",
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(p["failure_code"], code, "{p}");
        assert!(p["failure_message"].as_str().unwrap().len() > 5);
    }
}

#[service_test]
async fn mtn_server_error_leaves_the_payment_in_progress_and_a_refusal_fails_it() {
    let fake = FakeMtn::start().await;
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");

    // A 5xx on the request to pay says nothing about what MTN did: unknown.
    fake.inject("requesttopay", Fault::Status(503), 1);
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    assert_eq!(p["status"], "pending", "{p}");
    assert!(p["failure_code"].is_null(), "{p}");

    // A 5xx on the token is different: no request to pay was sent, so it fails.
    // (A new service: the first one keeps its token for the hour.)
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    fake.inject("token", Fault::Status(500), 1);
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    assert_eq!(p["status"], "failed", "{p}");
    assert_eq!(
        fake.requests("requesttopay").len(),
        1,
        "no request to pay without a token"
    );

    // A 4xx carries MTN's reason: a wrong target environment here.
    let app = mtn_app(&fake, |c| {
        c.settings
            .insert("target_environment".into(), "mtnivorycoast".into());
    })
    .await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    assert_eq!(p["status"], "failed", "{p}");
    assert!(
        p["failure_message"]
            .as_str()
            .unwrap()
            .contains("NOT_ALLOWED_TARGET_ENVIRONMENT"),
        "{p}"
    );
}

#[service_test]
async fn mtn_timeout_at_initiation_leaves_the_payment_pending_and_polling_finds_it() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.callbacks(Callbacks::Lost);
    // MTN takes the request but answers after our 400 ms timeout.
    fake.inject("requesttopay", Fault::Slow(Duration::from_millis(1500)), 1);
    let app = mtn_app(&fake, |c| {
        c.settings.insert("timeout_ms".into(), "400".into());
    })
    .await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(p["status"], "pending", "outcome unknown: {p}");
    assert_eq!(p["failure_code"], serde_json::Value::Null);
    // The status query by our own id finds what MTN did with it.
    wait_for(&app, &live, id, "completed", Duration::from_secs(8)).await;
    assert_eq!(
        fake.requests("requesttopay").len(),
        1,
        "never submitted twice"
    );
    assert!(fake.transaction(&operator_id(id)).is_some());

    // A token that times out came before the request to pay: nothing was sent
    // (not-sent), so the payment may fail at once and MTN never heard of it.
    // (A new service: the first one keeps its token for the hour.)
    let app = mtn_app(&fake, |c| {
        c.settings.insert("timeout_ms".into(), "400".into());
    })
    .await;
    let live = app.live_key("Shop");
    fake.inject("token", Fault::Slow(Duration::from_millis(1500)), 1);
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    assert_eq!(p["status"], "failed", "{p}");
    assert_eq!(p["failure_code"], "operator_error", "{p}");
    assert_eq!(
        fake.requests("requesttopay").len(),
        1,
        "nothing was submitted"
    );
}

#[service_test]
async fn while_the_operator_is_still_answering_a_replay_is_told_to_retry_and_a_cancel_is_refused() {
    let fake = FakeMtn::start().await;
    fake.callbacks(Callbacks::Lost);
    // MTN answers the request to pay 2 s after it arrives (within our timeout).
    fake.inject("requesttopay", Fault::Slow(Duration::from_millis(2000)), 1);
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let (idem, body) = (new_key(), live_payment("BJ", "mtn-bj", PHONE));
    let replay_meanwhile = async {
        arrived(&fake, "requesttopay").await;
        app.create(&live, &idem, &body).await
    };
    // Nor can it be cancelled meanwhile: MTN would still take the money.
    let cancel_meanwhile = async {
        arrived(&fake, "requesttopay").await;
        let reference = body["reference"].as_str().unwrap();
        let (_, p) = app
            .get(&live, &format!("/api/v1/collect/payments/{reference}"))
            .await;
        let cancel = format!(
            "/api/v1/collect/payments/{}/cancel",
            p["id"].as_str().unwrap()
        );
        app.post(&live, &cancel, json!({})).await
    };
    let ((status, p), (replay_status, err), (cancel_status, refused)) = tokio::join!(
        app.create(&live, &idem, &body),
        replay_meanwhile,
        cancel_meanwhile
    );
    assert_eq!(
        (replay_status, err["error"]["code"].as_str()),
        (409, Some("idempotency_request_in_progress")),
        "{err}"
    );
    assert_eq!(
        (cancel_status, refused["error"]["code"].as_str()),
        (409, Some("payment_not_cancellable")),
        "{refused}"
    );
    assert_eq!(
        (status, p["status"].as_str()),
        (201, Some("processing")),
        "{p}"
    );
    let (status, again) = app.create(&live, &idem, &body).await;
    assert_eq!((status, &again["id"]), (200, &p["id"]), "{again}");
    assert_eq!(fake.requests("requesttopay").len(), 1, "one request to pay");
}

#[service_test]
async fn a_reconciliation_round_asks_the_operator_about_its_payments_concurrently() {
    const N: usize = 6;
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.callbacks(Callbacks::Lost);
    // Each status query takes 800 ms: one after another, a round would take 4.8 s.
    fake.inject(
        "requesttopay_status",
        Fault::Slow(Duration::from_millis(800)),
        N,
    );
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let mut ids = Vec::new();
    for _ in 0..N {
        let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
        ids.push(id_of(&p));
    }
    for id in &ids {
        wait_for(&app, &live, id, "completed", Duration::from_secs(15)).await;
    }
    let asked = fake.requests("requesttopay_status");
    assert!(
        asked.len() >= N,
        "one query per payment at least: {}",
        asked.len()
    );
    // Asked one after another, no two queries would arrive less than 800 ms
    // apart. (A round may take only some of the payments, if they fell due
    // on both sides of a tick: hence the closest pair, not the whole spread.)
    let mut at: Vec<_> = asked.iter().map(|r| r.at).collect();
    at.sort();
    let closest = at.windows(2).map(|w| w[1] - w[0]).min().unwrap();
    assert!(
        closest < Duration::from_millis(300),
        "the queries were not concurrent: the closest two arrived {closest:?} apart"
    );
}

#[service_test]
async fn a_callback_that_beats_the_answer_to_the_request_to_pay_stands() {
    let fake = FakeMtn::start().await;
    // MTN settles at 100 ms and calls back, but answers our request after 2.5 s.
    // An MTN callback is not trusted: it only makes the payment due, and the
    // next reconciliation round (every second) asks MTN. The answer must come
    // after that round, or it is not the answer that is being tested (1 s left
    // the round on either side of it on a loaded machine).
    fake.settle_after(Duration::from_millis(100));
    fake.inject("requesttopay", Fault::Slow(Duration::from_millis(2500)), 1);
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    assert_eq!(fake.callbacks_sent().len(), 1, "the callback came first");
    // The answer to the initiation (processing) must not undo what the callback did.
    assert_eq!(p["status"], "completed", "{p}");
    let id = p["id"].as_str().unwrap();
    assert_eq!(payment(&app, &live, id).await["status"], "completed");
}

#[service_test]
async fn an_mtn_refund_pending_at_the_operator_is_settled_by_polling() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    wait_for(&app, &live, id, "completed", Duration::from_secs(3)).await;
    refund_left_pending(&app, &live, id).await;
    // MTN says nothing more unless asked: reconciliation asks, and the full refund lands.
    wait_for(&app, &live, id, "refunded", Duration::from_secs(8)).await;
    assert!(!fake.requests("refund_status").is_empty());
}

/// Refunds payment `id` in full; MTN answers 202, so the refund is pending.
async fn refund_left_pending(app: &TestApp, key: &str, id: &str) {
    let refunds = format!("/api/v1/collect/payments/{id}/refunds");
    let (status, r) = app.post(key, &refunds, json!({})).await;
    assert_eq!(
        (status, r["status"].as_str()),
        (201, Some("pending")),
        "{r}"
    );
}

/// Refunds pending at MTN are asked about together: a round's status queries
/// go out at once (`refund-status-many`), not one after another.
#[service_test]
async fn mtn_refunds_pending_at_the_operator_are_asked_about_together() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let mut ids = Vec::new();
    for _ in 0..3 {
        let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
        let id = id_of(&p);
        wait_for(&app, &live, &id, "completed", Duration::from_secs(3)).await;
        ids.push(id);
    }
    // Each status query answers after 400 ms (MTN does the lookup, then is slow).
    fake.inject("refund_status", Fault::Slow(Duration::from_millis(400)), 6);
    for id in &ids {
        refund_left_pending(&app, &live, id).await;
    }
    for id in &ids {
        wait_for(&app, &live, id, "refunded", Duration::from_secs(10)).await;
    }
    let at_once = fake.most_at_once("refund_status");
    assert!(
        at_once >= 2,
        "a round's queries went out together: {at_once} at once"
    );
}

#[service_test]
async fn a_checkout_page_payment_on_its_way_to_mtn_is_sent_once_and_cannot_be_cancelled() {
    let fake = FakeMtn::start().await;
    fake.callbacks(Callbacks::Lost);
    fake.inject("requesttopay", Fault::Slow(Duration::from_millis(2000)), 1);
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let hosted = json!({"reference": format!("h-{}", uuid::Uuid::new_v4()), "amount": 1500,
                        "currency": "XOF", "country": "BJ", "mode": "hosted"});
    let p = create(&app, &live, &hosted).await;
    let id = p["id"].as_str().unwrap();
    let page = format!("{}/checkout/{id}", app.base);
    let choose = || async {
        app.client
            .post(&page)
            .form(&[("operator", "mtn-bj"), ("phone", PHONE)])
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    let meanwhile = async {
        arrived(&fake, "requesttopay").await;
        let again = choose().await; // the customer taps "pay" twice
        let cancel = format!("/api/v1/collect/payments/{id}/cancel");
        (again, app.post(&live, &cancel, json!({})).await)
    };
    let (first, (again, (cancel_status, refused))) = tokio::join!(choose(), meanwhile);
    assert_eq!((first, again), (200, 200), "both land on the page");
    assert_eq!(
        (cancel_status, refused["error"]["code"].as_str()),
        (409, Some("payment_not_cancellable")),
        "{refused}"
    );
    assert_eq!(fake.requests("requesttopay").len(), 1, "one request to pay");
    // (The page the customer lands on asks MTN, which may have settled it already.)
    let status = payment(&app, &live, id).await["status"].clone();
    assert!(status == "processing" || status == "completed", "{status}");
}

#[service_test]
async fn mtn_forged_callback_is_only_a_hint() {
    let fake = FakeMtn::start().await;
    fake.set_outcome("2290166000004", Outcome::Stay);
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", "+2290166000004")).await;
    let id = p["id"].as_str().unwrap();
    // Anyone can PUT to the callback URL: MTN signs nothing.
    let forged = json!({"externalId": id, "amount": "1500", "currency": "XOF",
                        "financialTransactionId": "123", "status": "SUCCESSFUL"});
    let (status, answer) = notify(
        &app,
        "mtn-bj",
        "PUT",
        &[],
        serde_json::to_vec(&forged).unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    // MTN's own status says PENDING: nothing moves.
    // (The page the customer lands on asks MTN, which may have settled it already.)
    let status = payment(&app, &live, id).await["status"].clone();
    assert!(status == "processing" || status == "completed", "{status}");
}

#[service_test]
async fn mtn_duplicate_and_late_callbacks_never_move_a_terminal_payment() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.callbacks(Callbacks::Duplicate);
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    let done = wait_for(&app, &live, id, "completed", Duration::from_secs(3)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let answers: Vec<u16> = fake.callbacks_sent().iter().map(|(_, s)| *s).collect();
    assert_eq!(answers, vec![200, 200], "the duplicate is acknowledged");

    // MTN flips the transaction to FAILED afterwards and calls back: too late.
    fake.set_status(
        &operator_id(id),
        "FAILED",
        Some("INTERNAL_PROCESSING_ERROR"),
    );
    assert_eq!(fake.send_callback(&operator_id(id)).await, 200);
    let after = payment(&app, &live, id).await;
    assert_eq!(after["status"], "completed");
    assert_eq!(after["completed_at"], done["completed_at"]);
    assert_eq!(after["failure_code"], serde_json::Value::Null);
}

#[service_test]
async fn mtn_malformed_bodies_are_refused_and_polling_recovers() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.callbacks(Callbacks::Lost);
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    // A callback we cannot read: 400, nothing applied.
    let (status, answer) = notify(&app, "mtn-bj", "PUT", &[], b"<xml>nope</xml>".to_vec()).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["code"], "callback_invalid");
    let (status, _) = notify(
        &app,
        "mtn-bj",
        "PUT",
        &[],
        br#"{"status":"SUCCESSFUL"}"#.to_vec(),
    )
    .await;
    assert_eq!(status, 400, "no externalId, nothing to look up");
    // The first status answer is garbage: the poll after it settles the payment.
    fake.inject("requesttopay_status", Fault::Malformed, 1);
    wait_for(&app, &live, id, "completed", Duration::from_secs(12)).await;
    assert!(fake.requests("requesttopay_status").len() >= 2);
}

#[service_test]
async fn a_denied_host_fails_the_payment_and_the_host_keeps_serving() {
    let fake = FakeMtn::start().await;
    // base_url points at the fake, the allow-list at somewhere else.
    let app = mtn_app(&fake, |c| {
        c.allowed_hosts = vec!["api.mtn.example:443".into()]
    })
    .await;
    let (_, test, live) = app.merchant("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    assert_eq!(p["status"], "failed", "{p}");
    assert_eq!(p["failure_code"], "operator_error");
    assert!(
        p["failure_message"].as_str().unwrap().contains("denied"),
        "{p}"
    );
    assert!(fake.requests("token").is_empty(), "nothing left the host");
    // The service carries on: reads, and test payments through the simulator.
    let id = p["id"].as_str().unwrap();
    assert_eq!(payment(&app, &live, id).await["status"], "failed");
    let (status, sim) = app
        .create(&test, &new_key(), &direct_payment("+2290166000001"))
        .await;
    assert_eq!(status, 201, "{sim}");
    assert_eq!(sim["status"], "processing");
}

#[service_test]
async fn mtn_refund_and_payout_at_adapter_level() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    let adapter = Direct::load("momo", fake.component_config());

    // A successful request to pay first.
    let req = initiate_request("mtn-bj", "BJ", PHONE);
    let payment_id = req.payment_id.clone();
    let Ok(Initiated::AwaitingCustomer(reference)) = adapter.initiate(req).await else {
        panic!("initiation");
    };
    assert_eq!(reference, payment_id);
    let paid = operation(&payment_id, "mtn-bj", Some(reference.clone()), PHONE, 1500);
    let status = adapter
        .settled(Duration::from_secs(3), || adapter.status(paid.clone()))
        .await;
    assert_eq!(completed(&status), Some(1500));

    // Refund: disbursement v2, pointing at the request to pay.
    let refund_id = uuid::Uuid::new_v4().to_string();
    let started = adapter
        .refund(RefundRequest {
            refund_id: refund_id.clone(),
            payment: paid.clone(),
            amount: 500,
            // MTN answers 400 to an apostrophe in a note: the refund's notes are cleaned too.
            reason: "customer's dispute".into(),
        })
        .await
        .unwrap();
    assert_eq!(started.psp_reference, refund_id);
    assert_eq!(started.status, PspStatus::Pending);
    let sent = &fake.requests("refund")[0];
    assert_eq!(
        sent.header("Ocp-Apim-Subscription-Key"),
        Some(mtn::DISBURSEMENT_KEY)
    );
    assert_eq!(sent.json().unwrap()["referenceIdToRefund"], payment_id);
    assert_eq!(sent.json().unwrap()["amount"], "500");
    assert_eq!(
        sent.json().unwrap()["payerMessage"],
        "Refund: customers dispute"
    );
    let refund = operation(
        &refund_id,
        "mtn-bj",
        Some(started.psp_reference),
        PHONE,
        500,
    );
    let status = adapter
        .settled(Duration::from_secs(3), || {
            adapter.refund_status(refund.clone())
        })
        .await;
    assert_eq!(completed(&status), Some(500));

    // Payouts: ids that are not UUIDs map to a stable derived UUID.
    let started = adapter
        .payout(payout_request(
            "mtn-bj",
            "po_batch1_item7",
            "+2290166000009",
        ))
        .await
        .unwrap();
    assert!(uuid::Uuid::parse_str(&started.psp_reference).is_ok());
    let body = fake.requests("transfer")[0].json().unwrap();
    assert_eq!(body["payee"]["partyId"], "2290166000009");
    assert_eq!(body["externalId"], "po_batch1_item7");
    let again = adapter
        .payout(payout_request(
            "mtn-bj",
            "po_batch1_item7",
            "+2290166000009",
        ))
        .await
        .unwrap();
    assert_eq!(
        again.psp_reference, started.psp_reference,
        "409 = already there"
    );
    assert_eq!(fake.requests("transfer").len(), 2);
    let by_id = operation("po_batch1_item7", "mtn-bj", None, "+2290166000009", 2500);
    let status = adapter
        .settled(Duration::from_secs(3), || {
            adapter.payout_status(by_id.clone())
        })
        .await;
    assert_eq!(completed(&status), Some(2500));

    fake.set_outcome("2290166000008", Outcome::Fail("PAYEE_NOT_FOUND"));
    let started = adapter
        .payout(payout_request(
            "mtn-bj",
            "po_batch1_item8",
            "+2290166000008",
        ))
        .await
        .unwrap();
    let op = operation(
        "po_batch1_item8",
        "mtn-bj",
        Some(started.psp_reference),
        "+2290166000008",
        2500,
    );
    let status = adapter
        .settled(Duration::from_secs(3), || adapter.payout_status(op.clone()))
        .await;
    assert_eq!(failed(status).code, "recipient_not_found");
}

#[service_test]
async fn mtn_configuration_problems_are_operator_errors_not_traps() {
    let fake = FakeMtn::start().await;
    // `operators` narrows what is described.
    let mut c = fake.component_config();
    c.settings.insert("operators".into(), "mtn-ci".into());
    let adapter = Direct::load("momo", c);
    let slugs: Vec<String> = adapter.operators().into_iter().map(|o| o.slug).collect();
    assert_eq!(slugs, vec!["mtn-ci"]);

    let adapter = Direct::load("momo", fake.component_config());
    let slugs: Vec<String> = adapter.operators().into_iter().map(|o| o.slug).collect();
    assert_eq!(slugs, vec!["mtn-bj", "mtn-ci"]);

    // No base_url: described, but every call is not sent.
    let mut c = fake.component_config();
    c.settings.remove("base_url");
    let adapter = Direct::load("momo", c);
    assert_eq!(adapter.operators().len(), 2);
    let err = adapter
        .initiate(initiate_request("mtn-bj", "BJ", PHONE))
        .await
        .unwrap_err();
    assert_eq!(err, AdapterError::NotSent("base_url not configured".into()));

    // Wrong API key: MTN refuses the token; no request to pay is sent.
    let mut c = fake.component_config();
    c.secrets
        .insert("collection_api_key".into(), "wrong".into());
    let adapter = Direct::load("momo", c);
    let err = adapter
        .initiate(initiate_request("mtn-bj", "BJ", PHONE))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AdapterError::NotSent(m) if m.contains("401")),
        "{err:?}"
    );
    assert!(fake.requests("requesttopay").is_empty());

    // Per-operator override: mtn-ci speaks to another market.
    let mut c = fake.component_config();
    c.settings
        .insert("target_environment.mtn-ci".into(), "mtnivorycoast".into());
    let adapter = Direct::load("momo", c);
    let err = adapter
        .initiate(initiate_request("mtn-ci", "CI", "+2250500000001"))
        .await
        .unwrap_err();
    // The fake serves mtnbenin only: a 403 refused because of us, not by the customer.
    assert!(
        matches!(&err, AdapterError::Rejected(m) if m.contains("NOT_ALLOWED_TARGET_ENVIRONMENT")),
        "{err:?}"
    );
    assert_eq!(
        fake.requests("requesttopay")[0].header("X-Target-Environment"),
        Some("mtnivorycoast")
    );
}

/// A token lasts an hour at MTN: it is fetched once and reused (the host's
/// cache capability), not fetched before every operation; when MTN drops it,
/// the 401 (which performed nothing) renews it and the request goes again
/// under the same X-Reference-Id.
#[service_test]
async fn an_mtn_token_is_reused_and_renewed_when_mtn_drops_it() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let collection_tokens = || {
        fake.requests("token")
            .iter()
            .filter(|r| r.path.contains("collection"))
            .count()
    };
    let mut ids = Vec::new();
    for _ in 0..3 {
        let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
        ids.push(id_of(&p));
    }
    for id in &ids {
        wait_for(&app, &live, id, "completed", Duration::from_secs(8)).await;
    }
    assert_eq!(
        collection_tokens(),
        1,
        "one token for three payments and their checks"
    );
    // Calls per payment at MTN: one request to pay, then the status checks.
    let calls = fake.requests("requesttopay").len() + fake.requests("requesttopay_status").len();
    println!(
        "MTN calls for 3 payments: {calls} + {} token(s)",
        collection_tokens()
    );

    fake.revoke_tokens();
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(p["status"], "processing", "{p}");
    assert_eq!(collection_tokens(), 2, "renewed after the 401");
    let sent: Vec<_> = fake
        .requests("requesttopay")
        .into_iter()
        .filter(|r| r.header("X-Reference-Id") == p["psp_reference"].as_str())
        .collect();
    assert_eq!(sent.len(), 2, "sent again after the 401, under the same id");
    assert!(
        fake.transaction(p["psp_reference"].as_str().unwrap())
            .is_some()
    );
    wait_for(&app, &live, id, "completed", Duration::from_secs(8)).await;
}

/// MTN gives a partner 2 s to answer a callback: ours is answered at once,
/// whatever MTN does meanwhile (here its status resource is slow), and the
/// check with MTN happens after the answer.
#[service_test]
async fn an_mtn_callback_is_answered_within_a_second_whatever_mtn_does_meanwhile() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.callbacks(Callbacks::Lost);
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    fake.inject(
        "requesttopay_status",
        Fault::Slow(Duration::from_secs(3)),
        2,
    );
    tokio::time::sleep(Duration::from_millis(300)).await; // MTN has settled it
    let started = std::time::Instant::now();
    assert_eq!(fake.send_callback(&operator_id(id)).await, 200);
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "answered in {took:?}");
    wait_for(&app, &live, id, "completed", Duration::from_secs(15)).await;
}

/// MTN's markets: its sandbox takes EUR only, so a XOF payment configured
/// against it is refused before anything is sent (our configuration, not the
/// customer); a second market our API user is provisioned for serves
/// `mtn-ci` in XOF, and its requests are found only in that market.
#[service_test]
async fn mtn_markets_take_their_own_currency() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(50));
    fake.provision("sandbox");
    fake.provision("mtnivorycoast");
    let mut c = fake.component_config();
    c.settings
        .insert("target_environment.mtn-bj".into(), "sandbox".into());
    c.settings
        .insert("target_environment.mtn-ci".into(), "mtnivorycoast".into());
    let adapter = Direct::load("momo", c);
    let err = adapter
        .initiate(initiate_request("mtn-bj", "BJ", PHONE))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, AdapterError::NotSent(m) if m.contains("EUR")),
        "{err:?}"
    );
    assert!(fake.requests("requesttopay").is_empty());

    let req = initiate_request("mtn-ci", "CI", "+2250500000001");
    let id = req.payment_id.clone();
    assert!(matches!(
        adapter.initiate(req).await.unwrap(),
        Initiated::AwaitingCustomer(_)
    ));
    let sent = fake.requests("requesttopay");
    assert_eq!(
        sent[0].header("X-Target-Environment"),
        Some("mtnivorycoast")
    );
    assert_eq!(sent[0].json().unwrap()["currency"], "XOF");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let op = operation(&id, "mtn-ci", None, "+2250500000001", 1500);
    assert_eq!(completed(&adapter.status(op).await.unwrap()), Some(1500));

    // The fake refuses what MTN refuses: another market's currency (400),
    // and the request is not found from another market.
    let http = reqwest::Client::new();
    let token: serde_json::Value = http
        .post(format!("{}/collection/token/", fake.base_url()))
        .basic_auth(mtn::API_USER, Some(mtn::API_KEY))
        .header("Ocp-Apim-Subscription-Key", mtn::COLLECTION_KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let bearer = format!("Bearer {}", token["access_token"].as_str().unwrap());
    let request_to_pay = |market: &'static str, currency: &'static str| {
        http.post(format!("{}/collection/v1_0/requesttopay", fake.base_url()))
            .header("Authorization", &bearer)
            .header("Ocp-Apim-Subscription-Key", mtn::COLLECTION_KEY)
            .header("X-Target-Environment", market)
            .header("X-Reference-Id", uuid::Uuid::new_v4().to_string())
            .json(
                &json!({"amount": "1500", "currency": currency, "externalId": "x",
                "payer": {"partyIdType": "MSISDN", "partyId": "2290166000001"},
                "payerMessage": "Order", "payeeNote": "Order"}),
            )
            .send()
    };
    assert_eq!(
        request_to_pay("sandbox", "XOF").await.unwrap().status(),
        400
    );
    assert_eq!(
        request_to_pay("mtnbenin", "EUR").await.unwrap().status(),
        400
    );
    assert_eq!(
        request_to_pay("sandbox", "EUR").await.unwrap().status(),
        202
    );
    let elsewhere = http
        .get(format!(
            "{}/collection/v1_0/requesttopay/{}",
            fake.base_url(),
            sent[0].header("X-Reference-Id").unwrap()
        ))
        .header("Authorization", &bearer)
        .header("Ocp-Apim-Subscription-Key", mtn::COLLECTION_KEY)
        .header("X-Target-Environment", "mtnbenin")
        .send()
        .await
        .unwrap();
    assert_eq!(elsewhere.status(), 404);
}

/// Refused because of us: MTN's 401 (still refused after the token was
/// renewed), 403, 404 and 429 to a request to pay performed nothing and are
/// not the customer's doing. The payment fails with `operator_error` and
/// MTN's message, and the host counts each as a `rejected` call of `momo`.
#[service_test]
async fn mtn_refusals_caused_by_us_are_operator_errors_counted_per_adapter() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    // A first payment: the token is kept from now on, so a 401 is first
    // taken for a dropped token (renewed, the request sent again).
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    assert_eq!(p["status"], "processing", "{p}");
    let rejected = |metrics: &str| {
        metric(
            metrics,
            "mmc_adapter_calls_total",
            r#"adapter="momo",operation="initiate",outcome="rejected""#,
        )
    };
    assert_eq!(rejected(&app.metrics().await), 0.0);
    for (i, (status, says)) in REFUSED_BECAUSE_OF_US
        .into_iter()
        .zip([
            "Access denied",
            "NOT_ALLOWED",
            "RESOURCE_NOT_FOUND",
            "Rate limit",
        ])
        .enumerate()
    {
        let phone = format!("+22901660001{i:02}");
        let times = if status == 401 { 2 } else { 1 };
        fake.inject_for("requesttopay", &phone, mtn::refusal(status), times);
        let p = create(&app, &live, &live_payment("BJ", "mtn-bj", &phone)).await;
        assert_eq!(p["status"], "failed", "{status}: {p}");
        assert_eq!(p["failure_code"], "operator_error", "{status}: {p}");
        let message = p["failure_message"].as_str().unwrap();
        assert!(
            message.contains(&status.to_string()) && message.contains(says),
            "{status}: MTN's status and message are kept: {message}"
        );
        assert_eq!(fake.faults_left("requesttopay", &phone), 0, "{status}");
        let digits: String = phone.chars().filter(char::is_ascii_digit).collect();
        assert!(
            fake.transactions().iter().all(|t| t.party != digits),
            "{status}: nothing was performed at MTN"
        );
    }
    assert_eq!(rejected(&app.metrics().await), 4.0);
}

/// MTN answers 400 to some characters in `payerMessage`/`payeeNote`
/// (apostrophes among them): a description and a reference full of them
/// still make a request to pay MTN takes, and the payment completes.
#[service_test]
async fn mtn_notes_with_characters_mtn_refuses_are_cleaned_and_the_payment_completes() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let mut body = live_payment("BJ", "mtn-bj", PHONE);
    body["description"] = json!("L'épicerie d'Awa: \"promo\" <10%> & co; merci");
    body["reference"] = json!(format!(
        "commande d'Awa #{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    ));
    let p = create(&app, &live, &body).await;
    assert_eq!(
        p["status"], "processing",
        "MTN took the request to pay: {p}"
    );
    let sent = fake.requests("requesttopay")[0].json().unwrap();
    for note in ["payerMessage", "payeeNote"] {
        let text = sent[note].as_str().unwrap();
        assert!(
            !text.is_empty() && !text.contains(['\'', '"', '<', '>', '&', ';']),
            "{note}: {text}"
        );
    }
    assert!(
        sent["payerMessage"]
            .as_str()
            .unwrap()
            .starts_with("Lepicerie dAwa"),
        "accents folded, apostrophes dropped: {sent}"
    );
    wait_for(
        &app,
        &live,
        p["id"].as_str().unwrap(),
        "completed",
        Duration::from_secs(5),
    )
    .await;
}

/// MTN gives a partner 2 s to answer a callback, then tries again (20
/// times at most). Here the service has one adapter slot
/// (`limits.adapter_concurrent_calls = 1`, `slot_wait_ms` 5 s for payments)
/// and another payment's request to pay holds it while MTN answers that one
/// slowly: the callback does not wait a payment's time for the slot, it is
/// answered 503 at once (within MTN's 2 s), and MTN's next attempt gets 200.
#[service_test]
async fn an_mtn_callback_met_by_a_full_pool_is_answered_503_at_once_and_delivered_again() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(300));
    let mut component = fake.component_config();
    component
        .settings
        .insert("timeout_ms".into(), "6000".into());
    let app = app_with_adapter("momo", &["mtn-bj"], component, |c| {
        c.limits.adapter_concurrent_calls = Some(1);
        c.limits.slot_wait_ms = Some(5_000);
    })
    .await;
    let live = app.live_key("Shop");
    let slow = "+2290166000077";
    fake.set_outcome(slow, Outcome::Stay);
    fake.inject_for(
        "requesttopay",
        slow,
        Fault::Slow(Duration::from_millis(3500)),
        1,
    );
    let a = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let a_id = a["id"].as_str().unwrap();
    // A settles (at 300 ms) and MTN calls back while B holds the only slot.
    let b = create(&app, &live, &live_payment("BJ", "mtn-bj", slow)).await;
    assert_eq!(b["status"], "processing", "{b}");
    assert_eq!(fake.faults_left("requesttopay", slow), 0);
    wait_for(&app, &live, a_id, "completed", Duration::from_secs(10)).await;
    let url = format!(
        "{}/api/v1/psp/mtn-bj/callback?environment=live&via=momo",
        app.base
    );
    let until = std::time::Instant::now() + Duration::from_secs(10);
    let answers = loop {
        let answers: Vec<u16> = fake
            .callbacks_sent()
            .into_iter()
            .filter(|(u, _)| *u == url)
            .map(|(_, s)| s)
            .collect();
        if answers.contains(&200) || std::time::Instant::now() >= until {
            break answers;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(
        answers[0], 503,
        "busy, answered within MTN's 2 s (not left to time out): {answers:?}"
    );
    assert_eq!(
        answers.last(),
        Some(&200),
        "a later attempt was answered: {answers:?}"
    );
    assert!(answers.len() <= mtn::DELIVERY.attempts, "{answers:?}");
}

/// MTN asks that a token be renewed ten minutes before it expires: an
/// hour's token is reused for 50 minutes and renewed after, and one with
/// less than ten minutes left is never reused.
#[service_test]
async fn mtn_tokens_are_renewed_ten_minutes_before_they_expire() {
    let fake = FakeMtn::start().await;
    let adapter = Direct::load("momo", fake.component_config());
    let op = operation(
        &uuid::Uuid::new_v4().to_string(),
        "mtn-bj",
        None,
        PHONE,
        1500,
    );
    let tokens = || fake.requests("token").len();
    adapter.status(op.clone()).await.unwrap();
    adapter.sandbox.clock.advance(Duration::from_secs(2999));
    adapter.status(op.clone()).await.unwrap();
    assert_eq!(tokens(), 1, "kept while more than ten minutes are left");
    adapter.sandbox.clock.advance(Duration::from_secs(2));
    adapter.status(op.clone()).await.unwrap();
    assert_eq!(tokens(), 2, "renewed ten minutes before it expires");
    fake.set_token_lifetime(599);
    adapter.sandbox.clock.advance(Duration::from_secs(3001));
    adapter.status(op.clone()).await.unwrap();
    adapter.status(op.clone()).await.unwrap();
    assert_eq!(tokens(), 4, "never kept with under ten minutes left");
}

/// MTN caps status requests at 10 a second: thirty payments read with
/// `?sync=true` at once ask MTN at that pace, and the reads past a second's
/// wait are answered without asking (their outcome stays unknown, asked
/// again later), never by sending an eleventh request within a second.
#[service_test]
async fn status_requests_to_mtn_are_spaced_to_ten_a_second() {
    let fake = FakeMtn::start().await;
    fake.callbacks(Callbacks::Lost);
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let mut ids = Vec::new();
    for n in 0..30 {
        let phone = format!("+22901660{:05}", 40_000 + n);
        fake.set_outcome(&phone, Outcome::Stay);
        let p = create(&app, &live, &live_payment("BJ", "mtn-bj", &phone)).await;
        ids.push(id_of(&p));
    }
    let before = fake.requests("requesttopay_status").len();
    let paths: Vec<String> = ids
        .iter()
        .map(|id| format!("/api/v1/collect/payments/{id}?sync=true"))
        .collect();
    let reads = paths.iter().map(|path| app.get(&live, path));
    for (status, p) in futures::future::join_all(reads).await {
        assert_eq!(status, 200, "{p}");
    }
    let mut at: Vec<std::time::Instant> = fake.requests("requesttopay_status")[before..]
        .iter()
        .map(|r| r.at)
        .collect();
    at.sort();
    assert!(at.len() >= 10, "the first ten were asked: {}", at.len());
    let metrics = app.metrics().await;
    for w in at.windows(11) {
        let spread = w[10] - w[0];
        assert!(
            spread >= Duration::from_millis(950),
            "eleven status requests within {spread:?} ({} in all, at {:?}): {}",
            at.len(),
            at.iter()
                .map(|t| (*t - at[0]).as_millis())
                .collect::<Vec<_>>(),
            metrics
                .lines()
                .filter(|l| l.starts_with("mmc_adapter_calls_total"))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
    assert!(
        metrics.contains(r#"outcome="paced""#),
        "the reads past a second's wait were not sent: {metrics}"
    );
}

/// `momo` in the registry of adapters: the contract tests and every cell of
/// the fault matrix run over it.
pub const ENTRY: Entry = Entry {
    name: "momo",
    operator: "mtn-bj",
    routes: &["mtn-bj"],
    country: "BJ",
    phone: |n| format!("+2290166{:06}", 700_000 + n),
    unsupported: &[(Op::ConfirmOtp, "MTN has no OTP step")],
    otp: None,
    refund_status_query: true,
    keyless_initiate: None,
    // MTN's default target environment (its sandbox) takes EUR only: the
    // kit's XOF payment needs a market, or the adapter rightly sends nothing.
    conformance_settings: &[("target_environment", "mtnbenin")],
    conformance_secrets: &[
        "collection_api_user",
        "collection_api_key",
        "collection_subscription_key",
        "disbursement_api_user",
        "disbursement_api_key",
        "disbursement_subscription_key",
    ],
    start: registry::start::<mtn::Mtn>,
};

/// MTN knows our operations by the UUIDv4 made from our id
/// (`X-Reference-Id`); a cancel asks where the request to pay stands.
impl Harness for FakeMtn {
    fn plumbing(&self) -> &Plumbing {
        FakeMtn::plumbing(self)
    }

    fn component_config(&self) -> ComponentConfig {
        FakeMtn::component_config(self)
    }

    fn endpoint(&self, op: Op) -> &'static str {
        match op {
            Op::Cancel => "requesttopay_status",
            Op::Refund => "refund",
            Op::Payout => "transfer",
            _ => "requesttopay",
        }
    }

    fn target(&self, op: Op, phone: &str, payment_id: &str, _: &str) -> String {
        match op {
            Op::Cancel | Op::Refund => operator_id(payment_id),
            _ => phone.to_string(),
        }
    }

    fn customer_approves<'a>(&'a self, payment_id: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let key = operator_id(payment_id);
            self.customer_acts(&key, Outcome::Succeed).await;
            self.transaction(&key).is_some_and(|t| t.succeeded())
        })
    }

    fn payment(&self, payment_id: &str) -> AtOperator {
        match self.transaction(&operator_id(payment_id)) {
            Some(t) => AtOperator {
                moved: t.succeeded(),
                settled: t.status != "PENDING",
                records: 1,
            },
            None => AtOperator::nothing(),
        }
    }

    fn refund(&self, payment_id: &str, _: &str) -> AtOperator {
        let refunds = self.refunds_of(&operator_id(payment_id));
        AtOperator {
            moved: refunds.iter().any(|t| t.succeeded()),
            settled: refunds.iter().all(|t| t.status != "PENDING"),
            records: refunds.len(),
        }
    }

    fn payout(&self, phone: &str) -> AtOperator {
        let digits = normal_key(phone);
        let transfers: Vec<_> = self
            .transactions()
            .into_iter()
            .filter(|t| t.kind == mtn::Kind::Transfer && t.party == digits)
            .collect();
        AtOperator {
            moved: transfers.iter().any(|t| t.succeeded()),
            settled: transfers.iter().all(|t| t.status != "PENDING"),
            records: transfers.len(),
        }
    }
}
