//! `pawapay` (PSP aggregator, pawaPay v2) against the fake aggregator.

use std::time::Duration;

use mmc_runtime::bindings::adapter_types::*;
use serde_json::{Value, json};

use crate::registry::{self, AtOperator, Entry, Harness, Op, Otp};
use crate::support::fakes::pawapay::{self, FakePawapay};
use crate::support::fakes::{Callbacks, Fault, Outcome, REFUSED_BECAUSE_OF_US};
use crate::support::fakes::{Plumbing, normal_key};
use crate::support::*;
use crate::*;
use futures::future::BoxFuture;
use mmc_config::ComponentConfig;
use mmc_test_kit::service_test;

const MOOV_BJ: &str = "+2290195000001";
/// Where pawaPay really serves (no Celtiis or Coris Money in its Benin list).
const ALL: &[&str] = &["moov-bj", "togocom-tg", "moov-tg", "orange-ci", "moov-ci"];

pub(crate) async fn pawapay_app(
    fake: &FakePawapay,
    tweak: impl FnOnce(&mut mmc_config::ComponentConfig),
) -> TestApp {
    let mut component = fake.component_config();
    tweak(&mut component);
    let app = app_with_adapter("pawapay", ALL, component, |_| {}).await;
    // One dashboard URL for every operator: any slug the adapter serves routes to it.
    fake.set_callback_url(&format!(
        "{}/api/v1/psp/moov-bj/callback?environment=live",
        app.base
    ));
    app
}

#[service_test]
async fn pawapay_deposit_completes_via_the_callback_with_the_protocol_followed() {
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(150));
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "moov-bj", MOOV_BJ)).await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(p["status"], "processing", "{p}");
    let deposit_id = operator_id(id);
    assert_eq!(
        p["psp_reference"], deposit_id,
        "depositId is our payment id, as the UUIDv4 pawaPay demands"
    );

    let sent = fake.requests("deposits");
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].header("Authorization"),
        Some(format!("Bearer {}", pawapay::API_TOKEN).as_str())
    );
    let body = sent[0].json().unwrap();
    assert_eq!(body["depositId"], deposit_id);
    assert_eq!(body["amount"], "1500");
    assert_eq!(body["currency"], "XOF");
    assert_eq!(
        body["payer"],
        json!({"type": "MMO", "accountDetails": {"phoneNumber": "2290195000001", "provider": "MOOV_BEN"}})
    );
    assert_eq!(body["clientReferenceId"], p["reference"]);
    assert_eq!(body["customerMessage"], "Order 42");
    assert!(body.get("preAuthorisationCode").is_none());

    // The callback (at ~150 ms) is answered at once; the status check that
    // follows it completes the payment before the first regular poll (2 s).
    wait_for(&app, &live, id, "completed", Duration::from_millis(1900)).await;
    assert_eq!(fake.callbacks_sent().len(), 1);
    assert_eq!(fake.callbacks_sent()[0].1, 200);
}

#[service_test]
async fn pawapay_completes_by_polling_when_the_callback_is_lost() {
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.callbacks(Callbacks::Lost);
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(
        &app,
        &live,
        &live_payment("TG", "togocom-tg", "+22890123456"),
    )
    .await;
    let id = p["id"].as_str().unwrap();
    wait_for(&app, &live, id, "completed", Duration::from_secs(8)).await;
    let record = fake.record(&operator_id(id)).unwrap();
    assert_eq!(record.provider, "TOGOCOM_TGO");
    assert_eq!(record.phone, "22890123456");
    assert!(!fake.requests("deposit_status").is_empty());
    assert!(fake.callbacks_sent().is_empty());
}

#[service_test]
async fn pawapay_failures_carry_the_aggregators_reason() {
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.set_outcome("22890000002", Outcome::Fail("PAYMENT_NOT_APPROVED"));
    fake.set_outcome("2250100000003", Outcome::Fail("INSUFFICIENT_BALANCE"));
    let app = pawapay_app(&fake, |c| {
        // A provider code the aggregator does not know.
        c.settings
            .insert("provider_code.moov-tg".into(), "FLOOZ_TGO".into());
    })
    .await;
    let live = app.live_key("Shop");
    for (country, operator, phone, code) in [
        ("TG", "togocom-tg", "+22890000002", "declined_by_customer"),
        ("CI", "moov-ci", "+2250100000003", "insufficient_funds"),
    ] {
        let p = create(&app, &live, &live_payment(country, operator, phone)).await;
        let p = wait_for(
            &app,
            &live,
            p["id"].as_str().unwrap(),
            "failed",
            Duration::from_secs(5),
        )
        .await;
        assert_eq!(p["failure_code"], code, "{p}");
    }
    // A provider the account's active configuration does not have is described
    // closed, so the payment is refused before anything is sent.
    let (status, err) = app
        .create(
            &live,
            &new_key(),
            &live_payment("TG", "moov-tg", "+22899000001"),
        )
        .await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["code"], "operator_unavailable", "{err}");
    assert!(
        !fake
            .requests("deposits")
            .iter()
            .any(|r| r.json().unwrap()["payer"]["accountDetails"]["provider"] == "FLOOZ_TGO"),
        "nothing sent with an unknown provider"
    );
}

#[service_test]
async fn pawapay_5xx_and_timeout_stay_pending_without_a_second_deposit() {
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.callbacks(Callbacks::Lost);
    let app = pawapay_app(&fake, |c| {
        c.settings.insert("timeout_ms".into(), "400".into());
    })
    .await;
    let live = app.live_key("Shop");

    fake.inject("deposits", Fault::Status(500), 1);
    let p = create(
        &app,
        &live,
        &live_payment("BJ", "moov-bj", "+2290195000011"),
    )
    .await;
    // A 500 says nothing about what pawaPay did: the deposit stays in progress.
    assert_eq!(p["status"], "pending", "{p}");
    assert!(p["failure_code"].is_null(), "{p}");
    assert!(
        fake.record(&operator_id(p["id"].as_str().unwrap()))
            .is_none()
    );

    fake.inject("deposits", Fault::Slow(Duration::from_millis(1500)), 1);
    let p = create(
        &app,
        &live,
        &live_payment("BJ", "moov-bj", "+2290195000012"),
    )
    .await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(p["status"], "pending", "{p}");
    wait_for(&app, &live, id, "completed", Duration::from_secs(8)).await;
    let deposits: Vec<_> = fake
        .requests("deposits")
        .into_iter()
        .filter(|r| r.json().unwrap()["depositId"] == operator_id(id))
        .collect();
    assert_eq!(
        deposits.len(),
        1,
        "each deposit id is initiated exactly once"
    );

    // A status check answering garbage is survived; the next one settles.
    fake.inject("deposit_status", Fault::Malformed, 1);
    let p = create(
        &app,
        &live,
        &live_payment("BJ", "moov-bj", "+2290195000013"),
    )
    .await;
    wait_for(
        &app,
        &live,
        p["id"].as_str().unwrap(),
        "completed",
        Duration::from_secs(12),
    )
    .await;
}

#[service_test]
async fn pawapay_forged_duplicate_and_late_callbacks_never_move_a_terminal_payment() {
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.callbacks(Callbacks::Duplicate);
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "moov-bj", MOOV_BJ)).await;
    let id = p["id"].as_str().unwrap();
    let done = wait_for(&app, &live, id, "completed", Duration::from_secs(3)).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let answers: Vec<u16> = fake.callbacks_sent().iter().map(|(_, s)| *s).collect();
    assert_eq!(answers, vec![200, 200]);

    // Forged: claims FAILED; the aggregator's status says COMPLETED.
    let deposit_id = operator_id(id);
    let forged = json!({"depositId": deposit_id, "status": "FAILED",
        "failureReason": {"failureCode": "PAYER_NOT_FOUND"}});
    assert_eq!(
        fake.send_raw_callback(serde_json::to_vec(&forged).unwrap())
            .await,
        200
    );
    // Late: the aggregator flips to FAILED after the fact and calls back.
    fake.set_status(&deposit_id, "FAILED", Some("UNSPECIFIED_FAILURE"));
    assert_eq!(fake.send_callback(&deposit_id).await, 200);
    tokio::time::sleep(Duration::from_millis(1500)).await; // the checks that follow
    let after = payment(&app, &live, id).await;
    assert_eq!(after["status"], "completed");
    assert_eq!(after["completed_at"], done["completed_at"]);
    assert_eq!(after["failure_code"], Value::Null);

    // Unreadable, ambiguous or foreign bodies are refused.
    assert_eq!(fake.send_raw_callback(b"not json".to_vec()).await, 400);
    let both = json!({"depositId": deposit_id, "payoutId": deposit_id});
    assert_eq!(
        fake.send_raw_callback(serde_json::to_vec(&both).unwrap())
            .await,
        400
    );
    let foreign = json!({"depositId": "not-a-uuid", "status": "COMPLETED"});
    assert_eq!(
        fake.send_raw_callback(serde_json::to_vec(&foreign).unwrap())
            .await,
        400
    );
}

#[service_test]
async fn forged_callback_for_a_pending_deposit_changes_nothing() {
    let fake = FakePawapay::start().await;
    fake.set_outcome("2290195000004", Outcome::Stay);
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(
        &app,
        &live,
        &live_payment("BJ", "moov-bj", "+2290195000004"),
    )
    .await;
    let id = p["id"].as_str().unwrap();
    let forged = json!({"depositId": operator_id(id), "status": "COMPLETED",
        "amount": "1500", "currency": "XOF"});
    let (status, answer) = notify(
        &app,
        "moov-bj",
        "POST",
        &[],
        serde_json::to_vec(&forged).unwrap(),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    tokio::time::sleep(Duration::from_millis(1500)).await; // the check that follows
    assert_eq!(payment(&app, &live, id).await["status"], "processing");
}

/// Orange Money CI is `PREAUTH` in the account's active configuration: the
/// deposit travels with the customer's code, and the operator checks it
/// after pawaPay took the deposit, so a wrong code fails the payment.
#[service_test]
async fn preauth_flow_submits_the_deposit_with_the_code() {
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(100));
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let start = |phone: &'static str| {
        let (app, live) = (&app, &live);
        async move {
            let p = create(app, live, &live_payment("CI", "orange-ci", phone)).await;
            assert_eq!(p["status"], "awaiting_otp", "{p}");
            assert_eq!(p["next_action"]["type"], "confirm_otp");
            id_of(&p)
        }
    };
    let id = start("+2250700000001").await;
    assert!(
        fake.requests("deposits").is_empty(),
        "PREAUTH: nothing sent before the code"
    );
    let confirm = |id: &str| format!("/api/v1/collect/payments/{id}/confirm");
    let (status, p) = app
        .post(&live, &confirm(&id), json!({"otp": pawapay::GOOD_OTP}))
        .await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["status"], "processing");
    let sent = fake.requests("deposits");
    assert_eq!(sent.len(), 1);
    let body = sent[0].json().unwrap();
    assert_eq!(body["preAuthorisationCode"], pawapay::GOOD_OTP);
    assert_eq!(body["payer"]["accountDetails"]["provider"], "ORANGE_CIV");
    assert_eq!(body["depositId"], operator_id(&id));
    wait_for(&app, &live, &id, "completed", Duration::from_secs(3)).await;

    // A wrong code: taken, then failed by the operator under the same deposit id.
    let id = start("+2250700000009").await;
    let (status, p) = app
        .post(&live, &confirm(&id), json!({"otp": "000000"}))
        .await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["status"], "processing");
    let p = wait_for(&app, &live, &id, "failed", Duration::from_secs(3)).await;
    assert_eq!(p["failure_code"], "declined_by_customer", "{p}");
    let record = fake.record(&operator_id(&id)).unwrap();
    assert_eq!(record.failure.as_deref(), Some(pawapay::WRONG_CODE_FAILURE));
    // The payment is over: another code is refused without reaching pawaPay.
    let (status, err) = app
        .post(&live, &confirm(&id), json!({"otp": pawapay::GOOD_OTP}))
        .await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error"]["code"], "otp_not_required");
    assert_eq!(fake.requests("deposits").len(), 2);
}

#[service_test]
async fn pawapay_refunds_and_payouts_at_adapter_level() {
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(100));
    // Loading describes, and describing asks pawaPay (blocking HTTP): off the runtime.
    let adapter = tokio::task::block_in_place(|| Direct::load("pawapay", fake.component_config()));
    let ops = adapter.operators();
    let slugs: Vec<&str> = ops.iter().map(|o| o.slug.as_str()).collect();
    assert_eq!(slugs, ALL);
    // From the active configuration: Orange CI is PREAUTH at pawaPay.
    assert!(
        ops.iter()
            .all(|o| o.requires_otp == (o.slug == "orange-ci"))
    );

    let req = initiate_request("moov-bj", "BJ", MOOV_BJ);
    let id = req.payment_id.clone();
    assert_eq!(
        adapter.initiate(req.clone()).await.unwrap(),
        Initiated::AwaitingCustomer(id.clone())
    );
    // The same payment again is DUPLICATE_IGNORED, never a second debit.
    assert_eq!(
        adapter.initiate(req).await.unwrap(),
        Initiated::AwaitingCustomer(id.clone())
    );
    let paid = operation(&id, "moov-bj", Some(id.clone()), MOOV_BJ, 1500);
    let status = adapter
        .settled(Duration::from_secs(3), || adapter.status(paid.clone()))
        .await;
    assert_eq!(completed(&status), Some(1500));

    let refund = |amount| RefundRequest {
        refund_id: uuid::Uuid::new_v4().to_string(),
        payment: paid.clone(),
        amount,
        reason: "requested_by_customer".into(),
    };
    let r = refund(1000);
    let refund_id = r.refund_id.clone();
    let started = adapter.refund(r).await.unwrap();
    assert_eq!(started.psp_reference, refund_id);
    assert_eq!(started.status, PspStatus::Pending);
    let body = fake.requests("refunds")[0].json().unwrap();
    assert_eq!(
        body,
        json!({"refundId": refund_id, "depositId": id, "amount": "1000", "currency": "XOF"})
    );
    let op = operation(
        &refund_id,
        "moov-bj",
        Some(refund_id.clone()),
        MOOV_BJ,
        1000,
    );
    let status = adapter
        .settled(Duration::from_secs(3), || adapter.refund_status(op.clone()))
        .await;
    assert_eq!(completed(&status), Some(1000));
    // More than what is left: refused with the reason.
    let started = adapter.refund(refund(600)).await.unwrap();
    assert_eq!(failed(started.status).code, "amount_out_of_range");

    // Payouts: a non-UUID id maps to a stable UUID; a retry is DUPLICATE_IGNORED.
    let first = adapter
        .payout(payout_request("orange-ci", "po-77", "+2250700000077"))
        .await
        .unwrap();
    assert!(uuid::Uuid::parse_str(&first.psp_reference).is_ok());
    let body = fake.requests("payouts")[0].json().unwrap();
    assert_eq!(body["payoutId"], first.psp_reference);
    assert_eq!(
        body["recipient"]["accountDetails"]["provider"],
        "ORANGE_CIV"
    );
    assert_eq!(
        body["recipient"]["accountDetails"]["phoneNumber"],
        "2250700000077"
    );
    let retry = adapter
        .payout(payout_request("orange-ci", "po-77", "+2250700000077"))
        .await
        .unwrap();
    assert_eq!(retry.psp_reference, first.psp_reference);
    let op = operation("po-77", "orange-ci", None, "+2250700000077", 2500);
    let status = adapter
        .settled(Duration::from_secs(3), || adapter.payout_status(op.clone()))
        .await;
    assert_eq!(completed(&status), Some(2500));

    fake.set_outcome("2250700000078", Outcome::Fail("RECIPIENT_NOT_FOUND"));
    let started = adapter
        .payout(payout_request("orange-ci", "po-78", "+2250700000078"))
        .await
        .unwrap();
    let op = operation(
        "po-78",
        "orange-ci",
        Some(started.psp_reference),
        "+2250700000078",
        2500,
    );
    let status = adapter
        .settled(Duration::from_secs(3), || adapter.payout_status(op.clone()))
        .await;
    assert_eq!(failed(status).code, "recipient_not_found");

    // A payout callback is parsed: a hint naming the payout (its status is asked after).
    let inbound = Inbound {
        operator: "moov-bj".into(),
        environment: "live".into(),
        method: "POST".into(),
        headers: vec![],
        body: serde_json::to_vec(&json!({"payoutId": first.psp_reference, "status": "COMPLETED"}))
            .unwrap(),
    };
    let updates = adapter.parse_callback(inbound).await.unwrap();
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].kind, SubjectKind::Payout);
    assert_eq!(
        updates[0].status,
        PspStatus::Pending,
        "unsigned: never believed"
    );
    assert_eq!(
        updates[0].psp_reference.as_ref(),
        Some(&first.psp_reference)
    );

    // The operators setting narrows what is served.
    let mut c = fake.component_config();
    c.settings
        .insert("operators".into(), "coris-bj, moov-tg".into());
    let narrowed = tokio::task::block_in_place(|| Direct::load("pawapay", c));
    let slugs: Vec<String> = narrowed.operators().into_iter().map(|o| o.slug).collect();
    assert_eq!(slugs, vec!["moov-tg"], "coris-bj is not pawaPay's to serve");
}

/// pawaPay reports a refund failed, then made after all (its callback names
/// the refund and the deposit it refunds): the late success is recorded —
/// the refund completes and the payment is refunded — never dropped.
#[service_test]
async fn a_refund_reported_failed_then_made_is_recorded() {
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(100));
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "moov-bj", MOOV_BJ)).await;
    let id = p["id"].as_str().unwrap();
    wait_for(&app, &live, id, "completed", Duration::from_secs(8)).await;
    fake.settle_after(Duration::from_secs(3600)); // the refund waits for us
    let (status, r) = app
        .post(
            &live,
            &format!("/api/v1/collect/payments/{id}/refunds"),
            json!({}),
        )
        .await;
    assert_eq!((status, &r["status"]), (201, &json!("pending")), "{r}");
    let refund = &operator_id(r["id"].as_str().unwrap());

    fake.customer_acts(refund, Outcome::Fail("OTHER_ERROR"))
        .await; // final, called back
    let events = |t: &'static str| {
        let app = &app;
        let live = live.clone();
        async move {
            let (_, body) = app
                .get(&live, &format!("/api/v1/events?type={t}&limit=100"))
                .await;
            body["data"].as_array().map_or(0, Vec::len)
        }
    };
    // Each callback is a hint: the check that follows it (within ~1 s) decides.
    let until = |t: &'static str| async move {
        for _ in 0..50 {
            if events(t).await == 1 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("no {t} event");
    };
    until("collect.refund.failed").await;
    assert_eq!(payment(&app, &live, id).await["status"], "completed");

    fake.set_status(refund, "COMPLETED", None);
    assert_eq!(fake.send_callback(refund).await, 200);
    until("collect.refund.completed").await;
    assert_eq!(payment(&app, &live, id).await["status"], "refunded");
    let metrics = app.metrics().await;
    assert!(
        metric(
            &metrics,
            "mmc_component_events_total",
            r#"component="collect",event="late_refund_success""#
        ) >= 1.0,
        "{metrics}"
    );
}

/// The live catalogue's operators, by slug.
async fn catalogue(app: &TestApp, key: &str) -> std::collections::BTreeMap<String, Value> {
    let (status, body) = app.get(key, "/api/v1/collect/payments/operators/").await;
    assert_eq!(status, 200, "{body}");
    body["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|c| c["operators"].as_array().unwrap().clone())
        .map(|o| (o["slug"].as_str().unwrap().to_string(), o))
        .collect()
}

#[service_test]
async fn the_catalogue_shows_pawapays_active_configuration() {
    let fake = FakePawapay::start().await;
    fake.set_provider_conf("MOOV_BEN", 200, 50_000, "OPERATIONAL");
    fake.set_provider_conf("TOGOCOM_TGO", 500, 150_000, "DELAYED");
    fake.set_provider_conf("MOOV_CIV", 100, 300_000, "CLOSED");
    fake.remove_provider("ORANGE_CIV");
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let ops = catalogue(&app, &live).await;
    let slugs: Vec<&str> = ops.keys().map(String::as_str).collect();
    let mut all = ALL.to_vec();
    all.sort();
    assert_eq!(slugs, all, "every served operator is still listed");
    let shown = |slug: &str| {
        let o = &ops[slug];
        (
            o["min_amount"].as_u64().unwrap(),
            o["max_amount"].as_u64().unwrap(),
            o["status"].as_str().unwrap().to_string(),
        )
    };
    assert_eq!(shown("moov-bj"), (200, 50_000, "operational".into()));
    assert_eq!(shown("togocom-tg"), (500, 150_000, "delayed".into()));
    assert_eq!(shown("moov-ci").2, "closed");
    // Not configured for the account: pawaPay would refuse it.
    assert_eq!(shown("orange-ci").2, "closed");

    let asked = fake.requests("active_conf");
    assert_eq!(asked.len(), 1, "asked once, when the adapter was described");
    assert_eq!(
        asked[0].header("Authorization"),
        Some(format!("Bearer {}", pawapay::API_TOKEN).as_str())
    );
}

#[service_test]
async fn a_payment_above_pawapays_maximum_is_refused_before_anything_is_sent() {
    let fake = FakePawapay::start().await;
    fake.set_provider_conf("MOOV_BEN", 100, 1_000, "OPERATIONAL");
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    // 1500 is within the operator table's limits, above pawaPay's for this account.
    let (status, err) = app
        .create(&live, &new_key(), &live_payment("BJ", "moov-bj", MOOV_BJ))
        .await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["code"], "amount_out_of_range", "{err}");
    assert!(
        fake.requests("deposits").is_empty(),
        "nothing reached pawaPay"
    );
    assert!(fake.records().is_empty());

    // Within pawaPay's limits: sent as usual.
    let mut body = live_payment("BJ", "moov-bj", MOOV_BJ);
    body["amount"] = json!(900);
    let p = create(&app, &live, &body).await;
    assert_eq!(p["status"], "processing", "{p}");
    assert_eq!(fake.requests("deposits").len(), 1);
}

/// A provider pawaPay's active configuration reports `CLOSED` is described
/// `closed` in the catalogue, and a payment to it is refused (400) before
/// any deposit is sent.
#[service_test]
async fn a_provider_closed_in_the_active_configuration_is_refused_before_anything_is_sent() {
    let fake = FakePawapay::start().await;
    fake.set_provider_conf("MOOV_TGO", 100, 1_000_000, "CLOSED");
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    assert_eq!(catalogue(&app, &live).await["moov-tg"]["status"], "closed");
    let (status, err) = app
        .create(
            &live,
            &new_key(),
            &live_payment("TG", "moov-tg", "+22899000002"),
        )
        .await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["code"], "operator_unavailable", "{err}");
    assert!(fake.requests("deposits").is_empty(), "nothing sent");
}

#[service_test]
async fn without_the_active_configuration_the_catalogue_comes_from_the_operator_table() {
    for fault in [Fault::Status(500), Fault::Malformed] {
        let fake = FakePawapay::start().await;
        fake.set_provider_conf("MOOV_BEN", 100, 1_000, "CLOSED");
        fake.inject("active_conf", fault.clone(), 1);
        let app = pawapay_app(&fake, |_| {}).await;
        let live = app.live_key("Shop");
        let ops = catalogue(&app, &live).await;
        assert_eq!(ops.len(), ALL.len(), "{fault:?}: {ops:?}");
        for slug in ALL {
            let table = mmc_domain::operators::find(slug).unwrap();
            let o = &ops[*slug];
            assert_eq!(o["min_amount"], table.min_amount, "{fault:?} {slug}");
            assert_eq!(o["max_amount"], table.max_amount, "{fault:?} {slug}");
            assert_eq!(o["status"], "operational", "{fault:?} {slug}");
        }
        assert_eq!(fake.requests("active_conf").len(), 1);
    }
}

/// The host asks adapters to describe themselves again every minute, so the
/// catalogue follows pawaPay's active configuration after load too.
#[service_test]
async fn the_catalogue_follows_the_active_configuration_after_load() {
    let fake = FakePawapay::start().await;
    let app = pawapay_app(&fake, |c| {
        c.settings.insert("active_conf_ttl_ms".into(), "0".into());
    })
    .await;
    let live = app.live_key("Shop");
    assert_eq!(
        catalogue(&app, &live).await["moov-tg"]["status"],
        "operational"
    );
    fake.set_provider_conf("MOOV_TGO", 100, 1_000_000, "CLOSED");
    let runtime = app.service.site.app.runtime.clone();
    tokio::task::spawn_blocking(move || runtime.refresh_descriptions())
        .await
        .unwrap();
    assert_eq!(catalogue(&app, &live).await["moov-tg"]["status"], "closed");
}

/// pawaPay's Benin list has MTN and Moov only: routing Celtiis or Coris
/// Money to it serves nothing, and a provider code outside the account's
/// configuration is described closed: refused before anything is sent.
#[service_test]
async fn operators_pawapay_does_not_serve_are_never_sent_there() {
    let fake = FakePawapay::start().await;
    let mut component = fake.component_config();
    // As if someone mapped Moov to a provider pawaPay does not have.
    component
        .settings
        .insert("provider_code.moov-bj".into(), "CELTIIS_BEN".into());
    let app = app_with_adapter(
        "pawapay",
        &["celtiis-bj", "coris-bj", "moov-bj"],
        component,
        |_| {},
    )
    .await;
    let live = app.live_key("Shop");
    for (operator, phone) in [
        ("celtiis-bj", "+2290140000001"),
        ("coris-bj", "+2290122000001"),
    ] {
        let (status, err) = app
            .create(&live, &new_key(), &live_payment("BJ", operator, phone))
            .await;
        assert_eq!(status, 400, "{err}");
        assert_eq!(err["error"]["code"], "operator_unavailable", "{err}");
    }
    assert!(fake.requests("deposits").is_empty(), "nothing sent");

    // Not in the account's active configuration either: refused before sending.
    let (status, err) = app
        .create(&live, &new_key(), &live_payment("BJ", "moov-bj", MOOV_BJ))
        .await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["code"], "operator_unavailable", "{err}");
    assert!(fake.requests("deposits").is_empty(), "nothing sent");
}

/// pawaPay's predict-provider knows ported numbers: with `predict_provider`
/// on, the prediction API answers what pawaPay says (`source: provider`),
/// once per number (kept a day), and the hosted checkout page preselects
/// it; a number pawaPay cannot place falls back to the numbering plan.
#[service_test]
async fn predictions_come_from_pawapay_where_configured() {
    let fake = FakePawapay::start().await;
    // In MTN's range, moved to Moov.
    fake.port("2290166000042", "MOOV_BEN");
    let app = pawapay_app(&fake, |c| {
        c.settings.insert("predict_provider".into(), "true".into());
    })
    .await;
    let live = app.live_key("Shop");
    let path = "/api/v1/collect/payments/operators/predict?phone=%2B2290166000042";
    for _ in 0..2 {
        let (status, p) = app.get(&live, path).await;
        assert_eq!(status, 200, "{p}");
        assert_eq!(p["operator"], "moov-bj", "{p}");
        assert_eq!(p["source"], "provider");
        assert_eq!(p["available"], true);
    }
    let asked = fake.requests("predict_provider");
    assert_eq!(asked.len(), 1, "the answer is kept");
    assert_eq!(asked[0].json().unwrap()["phoneNumber"], "2290166000042");

    // pawaPay has no Celtiis: its range is the numbering plan's word.
    let (_, p) = app
        .get(
            &live,
            "/api/v1/collect/payments/operators/predict?phone=%2B2290140000001",
        )
        .await;
    assert_eq!(p["operator"], "celtiis-bj", "{p}");
    assert_eq!(p["source"], "numbering_plan");

    // The hosted page offers the predicted operator first.
    let body = json!({"reference": "h-ported", "amount": 1500, "currency": "XOF",
        "country": "BJ", "mode": "hosted", "customer": {"phone": "+2290166000042"}});
    let p = create(&app, &live, &body).await;
    let page = app
        .client
        .get(p["next_action"]["checkout_url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        page.contains(r#"<option value="moov-bj" selected>"#),
        "{page}"
    );

    // Not configured: pawaPay is not asked, the plan answers.
    let quiet = FakePawapay::start().await;
    let app = pawapay_app(&quiet, |_| {}).await;
    let live = app.live_key("Shop");
    let (_, p) = app.get(&live, path).await;
    assert_eq!(p["operator"], "mtn-bj", "{p}");
    assert_eq!(p["source"], "numbering_plan");
    assert!(quiet.requests("predict_provider").is_empty());
}

/// A callback speaks only for payments its adapter serves and that were
/// sent: a pawaPay body naming an MTN payment, or a hosted payment nobody
/// has paid yet (a forged reference would stop the customer from paying),
/// is ignored and counted.
#[service_test]
async fn callbacks_speak_only_for_sent_payments_of_their_adapter() {
    let fake = FakePawapay::start().await;
    let mtn = crate::support::fakes::mtn::FakeMtn::start().await;
    mtn.set_outcome("2290166000004", Outcome::Stay);
    let momo = mtn.component_config();
    let app = app_with_adapter("pawapay", ALL, fake.component_config(), |c| {
        c.routing
            .get_mut("live")
            .unwrap()
            .insert("mtn-bj".into(), "momo".into());
        c.components.insert("momo".into(), momo);
    })
    .await;
    let live = app.live_key("Shop");
    let forge = |id: &str| {
        serde_json::to_vec(&json!({"depositId": operator_id(id), "status": "COMPLETED",
            "amount": "1500", "currency": "XOF"}))
        .unwrap()
    };

    let mtn_payment = create(&app, &live, &live_payment("BJ", "mtn-bj", "+2290166000004")).await;
    let id = mtn_payment["id"].as_str().unwrap();
    let (status, answer) = notify(&app, "moov-bj", "POST", &[], forge(id)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["applied"], 0, "{answer}");

    let hosted = json!({"reference": "h-forged", "amount": 1500, "currency": "XOF",
        "country": "BJ", "mode": "hosted"});
    let p = create(&app, &live, &hosted).await;
    let hid = p["id"].as_str().unwrap();
    let (status, answer) = notify(&app, "moov-bj", "POST", &[], forge(hid)).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["applied"], 0, "{answer}");
    let after = payment(&app, &live, hid).await;
    assert_eq!(after["status"], "awaiting_payment");
    assert!(after["psp_reference"].is_null(), "{after}");

    let metrics = app
        .client
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for event in [
        "callback_from_foreign_adapter",
        "callback_for_unsent_payment",
    ] {
        assert!(
            metrics.contains(&format!(
                "mmc_component_events_total{{component=\"collect\",event=\"{event}\"}} 1"
            )),
            "{event}: {metrics}"
        );
    }
}

/// Refused because of us: pawaPay's 401, 403, 404 and 429 to a deposit
/// performed nothing and are not the customer's doing. The payment fails
/// with `operator_error` and pawaPay's reason, and the host counts each as
/// a `rejected` call of `pawapay`.
#[service_test]
async fn pawapay_refusals_caused_by_us_are_operator_errors_counted_per_adapter() {
    let fake = FakePawapay::start().await;
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    for (i, (status, says)) in REFUSED_BECAUSE_OF_US
        .into_iter()
        .zip([
            "NO_AUTHENTICATION",
            "AUTHENTICATION_ERROR",
            "NOT_FOUND",
            "Too many requests",
        ])
        .enumerate()
    {
        let phone = format!("+22901950001{i:02}");
        fake.inject_for("deposits", &phone, pawapay::refusal(status), 1);
        let p = create(&app, &live, &live_payment("BJ", "moov-bj", &phone)).await;
        assert_eq!(p["status"], "failed", "{status}: {p}");
        assert_eq!(p["failure_code"], "operator_error", "{status}: {p}");
        let message = p["failure_message"].as_str().unwrap();
        assert!(
            message.contains(&status.to_string()) && message.contains(says),
            "{status}: pawaPay's status and reason are kept: {message}"
        );
        assert_eq!(fake.faults_left("deposits", &phone), 0, "{status}");
        assert!(
            fake.record(&operator_id(p["id"].as_str().unwrap()))
                .is_none(),
            "{status}: no deposit at pawaPay"
        );
    }
    assert_eq!(
        metric(
            &app.metrics().await,
            "mmc_adapter_calls_total",
            r#"adapter="pawapay",operation="initiate",outcome="rejected""#,
        ),
        4.0
    );
}

/// The fake pawaPay delivers a callback by its rule (`pawapay::DELIVERY`):
/// only a 200 counts as delivered (a 202 does not), it does not try again
/// by itself, and an undelivered callback can be resent once, as from
/// pawaPay's dashboard; a delivered one cannot.
#[service_test]
async fn the_fake_pawapay_counts_only_a_200_and_resends_on_request() {
    use crate::support::fakes::{Answer, Receiver};
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(100));
    let receiver =
        Receiver::start("COMPLETED", vec![Answer::Status(202), Answer::Status(200)]).await;
    fake.set_callback_url(&receiver.url());
    // Loading describes, and describing asks pawaPay (blocking HTTP): off the runtime.
    let adapter = tokio::task::block_in_place(|| Direct::load("pawapay", fake.component_config()));
    let req = initiate_request("moov-bj", "BJ", MOOV_BJ);
    let deposit = operator_id(&req.payment_id);
    assert!(matches!(
        adapter.initiate(req).await.unwrap(),
        Initiated::AwaitingCustomer(_)
    ));
    let until = std::time::Instant::now() + Duration::from_secs(5);
    while receiver.received().is_empty() && std::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(receiver.received().len(), 1, "one attempt, no retry");
    assert!(!fake.callback_delivered(&deposit), "a 202 is not delivered");
    assert_eq!(fake.resend_callback(&deposit).await, Some(vec![200]));
    assert!(fake.callback_delivered(&deposit));
    assert_eq!(fake.resend_callback(&deposit).await, None);
    assert_eq!(receiver.received().len(), 2);
}

/// When the account's active configuration cannot be read, Orange Money CI
/// (documented `PREAUTH`: the customer generates a code by USSD) still asks
/// for the customer's code instead of sending deposits pawaPay would refuse.
#[service_test]
async fn without_the_active_configuration_orange_ci_still_asks_for_the_code() {
    let fake = FakePawapay::start().await;
    fake.inject("active_conf", Fault::Status(503), 100);
    let adapter = tokio::task::block_in_place(|| Direct::load("pawapay", fake.component_config()));
    let ops = adapter.operators();
    assert!(
        ops.iter()
            .all(|o| o.requires_otp == (o.slug == "orange-ci"))
    );
    let req = initiate_request("orange-ci", "CI", "+2250700000001");
    let id = req.payment_id.clone();
    assert_eq!(
        adapter.initiate(req).await.unwrap(),
        Initiated::OtpRequired(operator_id(&id))
    );
    assert!(
        fake.requests("deposits").is_empty(),
        "nothing sent without the code"
    );
    assert!(!fake.requests("active_conf").is_empty());
}

/// `DUPLICATE_IGNORED` says an earlier request got through: a status check
/// that then fails, even with a 4xx, leaves the payout pending (asked again
/// later), never "nothing was performed".
#[service_test]
async fn after_duplicate_ignored_a_failed_status_check_is_not_a_refusal() {
    let fake = FakePawapay::start().await;
    fake.set_outcome("2250700000079", Outcome::Stay);
    let adapter = tokio::task::block_in_place(|| Direct::load("pawapay", fake.component_config()));
    let first = adapter
        .payout(payout_request("orange-ci", "po-79", "+2250700000079"))
        .await
        .unwrap();
    fake.inject("payout_status", pawapay::refusal(404), 1);
    let retry = adapter
        .payout(payout_request("orange-ci", "po-79", "+2250700000079"))
        .await
        .unwrap();
    assert_eq!(retry.psp_reference, first.psp_reference);
    assert_eq!(retry.status, PspStatus::Pending);
    assert_eq!(
        fake.requests("payout_status").len(),
        1,
        "the check was made"
    );
    assert_eq!(fake.ids_for("payouts", "2250700000079").len(), 1);
}

/// `pawapay` in the registry of adapters: the contract tests and every cell
/// of the fault matrix run over it.
pub const ENTRY: Entry = Entry {
    name: "pawapay",
    operator: "moov-bj",
    routes: &["moov-bj", "orange-ci"],
    country: "BJ",
    phone: |n| format!("+2290195{:06}", 700_000 + n),
    unsupported: &[],
    // Orange CI (PREAUTH at pawaPay): nothing is sent before the code; the
    // deposit carries it.
    otp: Some(Otp {
        operator: "orange-ci",
        country: "CI",
        phone: |n| format!("+225070{:07}", 7_000_000 + n),
        code: pawapay::GOOD_OTP,
    }),
    refund_status_query: true,
    keyless_initiate: None,
    conformance_settings: &[],
    conformance_secrets: &["api_token"],
    start: registry::start::<pawapay::Pawapay>,
};

/// pawaPay knows our operations by the UUIDv4 made from our id
/// (`depositId`, `payoutId`, `refundId`); a cancel asks where the deposit
/// stands.
impl Harness for FakePawapay {
    fn plumbing(&self) -> &Plumbing {
        FakePawapay::plumbing(self)
    }

    fn component_config(&self) -> ComponentConfig {
        FakePawapay::component_config(self)
    }

    fn endpoint(&self, op: Op) -> &'static str {
        match op {
            Op::Cancel => "deposit_status",
            Op::Refund => "refunds",
            Op::Payout => "payouts",
            _ => "deposits",
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
            self.record(&key).is_some_and(|r| r.completed())
        })
    }

    fn payment(&self, payment_id: &str) -> AtOperator {
        match self.record(&operator_id(payment_id)) {
            Some(r) => AtOperator {
                moved: r.completed(),
                settled: matches!(r.status.as_str(), "COMPLETED" | "FAILED"),
                records: 1,
            },
            None => AtOperator::nothing(),
        }
    }

    fn refund(&self, payment_id: &str, _: &str) -> AtOperator {
        let deposit = operator_id(payment_id);
        let refunds: Vec<_> = self
            .records()
            .into_iter()
            .filter(|r| {
                r.kind == pawapay::Kind::Refund && r.deposit_id.as_deref() == Some(deposit.as_str())
            })
            .collect();
        settled_records(&refunds)
    }

    fn payout(&self, phone: &str) -> AtOperator {
        let digits = normal_key(phone);
        let payouts: Vec<_> = self
            .records()
            .into_iter()
            .filter(|r| r.kind == pawapay::Kind::Payout && r.phone == digits)
            .collect();
        settled_records(&payouts)
    }
}

fn settled_records(records: &[pawapay::Record]) -> AtOperator {
    AtOperator {
        moved: records.iter().any(|r| r.completed()),
        settled: records
            .iter()
            .all(|r| matches!(r.status.as_str(), "COMPLETED" | "FAILED")),
        records: records.len(),
    }
}
