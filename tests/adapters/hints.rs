//! Every operator callback is a hint, for every adapter: however well it is
//! signed, what it claims is never recorded. The service reads its subject
//! back from the provider by our id and records what that read says: a
//! signed "paid" for money the provider never took changes nothing, and a
//! "failed" for a payment the provider completed ends completed, never
//! failed on the way. A callback taken once is remembered, so the same
//! notification again is answered 200, counted, and changes nothing.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cinetpay;
use crate::fedapay::fedapay_app;
use crate::momo::mtn_app;
use crate::pawapay::pawapay_app;
use crate::registry;
use crate::support::fakes::cinetpay::{self as fake_cinetpay, FakeCinetPay};
use crate::support::fakes::fedapay::{self as fake_fedapay, FakeFedaPay};
use crate::support::fakes::mtn::FakeMtn;
use crate::support::fakes::pawapay::FakePawapay;
use crate::support::fakes::wave::{self as fake_wave, FakeWave};
use crate::support::fakes::{Callbacks, Outcome};
use crate::support::*;
use crate::wave::wave_app;
use crate::*;
use mmc_test_kit::service_test;

const WAVE_CI: &str = "+2250700000001";
const CELTIIS: &str = "+2290140000001";
const MOOV_BJ: &str = "+2290195000001";
const MTN_BJ: &str = "+2290166000001";

async fn counted(app: &TestApp, event: &str) -> f64 {
    metric(
        &app.metrics().await,
        "mmc_component_events_total",
        &format!(r#"component="collect",event="{event}""#),
    )
}

/// Waits until the provider has answered more than `before` status reads
/// of the payment, then for the round that asked to record its answer.
async fn read_back(reads: impl Fn() -> usize, before: usize) {
    let deadline = Instant::now() + Duration::from_secs(15);
    while reads() <= before {
        assert!(
            Instant::now() < deadline,
            "the provider was never asked about the payment"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
}

/// After a callback claiming success for a payment the provider still
/// holds as pending, and the provider's read: nothing final is recorded.
async fn assert_nothing_recorded(app: &TestApp, key: &str, id: &str, status: &str) {
    let p = payment(app, key, id).await;
    assert_eq!(p["status"], status, "the claim was not believed: {p}");
    assert!(p["completed_at"].is_null(), "{p}");
    let events = app.event_types(key, id).await;
    assert!(
        !events.iter().any(|e| e == "collect.payment.completed"),
        "{events:?}"
    );
}

/// A payment the provider completed, after a callback that claimed it
/// failed: completed as read, never recorded failed first.
async fn assert_completed_as_read(app: &TestApp, key: &str, id: &str) {
    let done = wait_for(app, key, id, "completed", Duration::from_secs(20)).await;
    assert!(done["failure_code"].is_null(), "{done}");
    let events = app.event_types(key, id).await;
    assert!(
        !events.iter().any(|e| e == "collect.payment.failed"),
        "the failure claimed was never recorded: {events:?}"
    );
}

/// A notification sent again, byte for byte: answered 200, applied to
/// nothing, counted.
async fn assert_replay_ignored(app: &TestApp, answer: (u16, Value), replays_before: f64) {
    let (status, body) = answer;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["applied"], 0, "{body}");
    assert_eq!(body["replayed"], true, "{body}");
    assert_eq!(
        counted(app, "callback_replayed").await,
        replays_before + 1.0
    );
}

// Wave: signed checkout webhooks.

fn wave_event(session: &str, id: &str, checkout_status: &str, payment_status: &str) -> Vec<u8> {
    let kind = if checkout_status == "complete" {
        "checkout.session.completed"
    } else {
        "checkout.session.expired"
    };
    serde_json::to_vec(&json!({
        "id": format!("AE_{}", uuid::Uuid::new_v4().simple()),
        "type": kind,
        "data": {"id": session, "client_reference": id, "checkout_status": checkout_status,
            "payment_status": payment_status, "amount": "1500", "currency": "XOF"}}))
    .unwrap()
}

async fn wave_notify(app: &TestApp, body: &[u8]) -> (u16, Value) {
    let signature = fake_wave::signature(fake_wave::WEBHOOK_SECRET, fake_wave::now(), body);
    notify(
        app,
        "wave-ci",
        "POST",
        &[("wave-signature", signature.as_str())],
        body.to_vec(),
    )
    .await
}

async fn wave_payment(app: &TestApp, key: &str) -> (String, String) {
    let p = create(app, key, &live_payment("CI", "wave-ci", WAVE_CI)).await;
    assert_eq!(p["status"], "awaiting_payment", "{p}");
    (id_of(&p), p["psp_reference"].as_str().unwrap().to_string())
}

#[service_test]
async fn a_signed_wave_success_for_an_unpaid_session_records_nothing() {
    let fake = FakeWave::start().await;
    let app = wave_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let (id, session) = wave_payment(&app, &live).await;
    let reads = || fake.requests("session_get").len();
    let before = reads();
    let claim = wave_event(&session, &id, "complete", "succeeded");
    let (status, answer) = wave_notify(&app, &claim).await;
    assert_eq!((status, &answer["applied"]), (200, &json!(1)), "{answer}");
    read_back(reads, before).await;
    assert_nothing_recorded(&app, &live, &id, "awaiting_payment").await;

    // The same webhook again (a replay of the captured bytes).
    let replays = counted(&app, "callback_replayed").await;
    assert_replay_ignored(&app, wave_notify(&app, &claim).await, replays).await;
    assert_nothing_recorded(&app, &live, &id, "awaiting_payment").await;

    // The customer really pays: the next read says so.
    fake.mark_paid(&session);
    wait_for(&app, &live, &id, "completed", Duration::from_secs(20)).await;
}

#[service_test]
async fn a_signed_wave_failure_for_a_paid_session_ends_completed() {
    let fake = FakeWave::start().await;
    fake.callbacks(Callbacks::Lost);
    let app = wave_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let (id, session) = wave_payment(&app, &live).await;
    assert!(fake.mark_paid(&session));
    let (status, answer) =
        wave_notify(&app, &wave_event(&session, &id, "expired", "cancelled")).await;
    assert_eq!((status, &answer["applied"]), (200, &json!(1)), "{answer}");
    assert_completed_as_read(&app, &live, &id).await;
}

/// A callback about a payment the provider failed brings one read (the
/// provider may have taken the money after all); the same callback again
/// brings none, while another one does.
#[service_test]
async fn a_replayed_wave_webhook_brings_no_read() {
    let fake = FakeWave::start().await;
    let app = wave_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let (id, session) = wave_payment(&app, &live).await;
    fake.session_expires(&session);
    let reads = || fake.requests("session_get").len();
    let before = reads();
    let claim = wave_event(&session, &id, "complete", "succeeded");
    assert_eq!(wave_notify(&app, &claim).await.0, 200);
    read_back(reads, before).await;
    let failed = wait_for(&app, &live, &id, "failed", Duration::from_secs(10)).await;
    assert_eq!(failed["failure_code"], "approval_expired", "{failed}");

    let after_first = reads();
    let replays = counted(&app, "callback_replayed").await;
    assert_replay_ignored(&app, wave_notify(&app, &claim).await, replays).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(reads(), after_first, "a replay brings no read");

    // Another notification (another event) does.
    let other = wave_event(&session, &id, "complete", "succeeded");
    let (status, answer) = wave_notify(&app, &other).await;
    assert_eq!((status, &answer["applied"]), (200, &json!(1)), "{answer}");
    read_back(reads, after_first).await;
    assert_eq!(payment(&app, &live, &id).await["status"], "failed");
}

/// Wave's shared-secret strategy works, and is warned of when the adapter
/// loads; signing, the default, is not.
#[service_test]
async fn wave_shared_secret_mode_is_warned_of_at_start() {
    let warned = |text: &str| {
        metric(
            text,
            "mmc_component_events_total",
            r#"component="wave",event="webhook_security_shared_secret""#,
        )
    };
    let fake = FakeWave::start().await;
    let signing = wave_app(&fake, |_| {}).await;
    assert_eq!(warned(&signing.metrics().await), 0.0);

    let fake = FakeWave::start().await;
    let shared = wave_app(&fake, |c| {
        c.settings
            .insert("webhook_security".into(), "shared_secret".into());
    })
    .await;
    assert_eq!(warned(&shared.metrics().await), 1.0);
}

// FedaPay: signed webhooks carrying the transaction.

/// FedaPay's event about transaction `tx`, its entity saying `status`.
fn fedapay_event(fake: &FakeFedaPay, tx: &str, name: &str, status: &str) -> Vec<u8> {
    let mut event: Value = serde_json::from_slice(&fake.event(name, tx)).unwrap();
    event["entity"]["status"] = json!(status);
    serde_json::to_vec(&event).unwrap()
}

async fn fedapay_notify(app: &TestApp, body: &[u8]) -> (u16, Value) {
    let signature =
        fake_fedapay::signature(fake_fedapay::WEBHOOK_SECRET, fake_fedapay::now(), body);
    notify(
        app,
        "celtiis-bj",
        "POST",
        &[("X-FEDAPAY-SIGNATURE", signature.as_str())],
        body.to_vec(),
    )
    .await
}

async fn fedapay_payment(app: &TestApp, key: &str) -> (String, String) {
    let p = create(app, key, &live_payment("BJ", "celtiis-bj", CELTIIS)).await;
    assert_eq!(p["status"], "processing", "{p}");
    (id_of(&p), p["psp_reference"].as_str().unwrap().to_string())
}

#[service_test]
async fn a_signed_fedapay_approval_of_a_pending_transaction_records_nothing() {
    let fake = FakeFedaPay::start().await;
    fake.set_outcome(CELTIIS, Outcome::Stay);
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let (id, tx) = fedapay_payment(&app, &live).await;
    let reads = || fake.requests("transaction_get").len();
    let before = reads();
    let claim = fedapay_event(&fake, &tx, "transaction.approved", "approved");
    let (status, answer) = fedapay_notify(&app, &claim).await;
    assert_eq!((status, &answer["applied"]), (200, &json!(1)), "{answer}");
    read_back(reads, before).await;
    assert_nothing_recorded(&app, &live, &id, "processing").await;

    let replays = counted(&app, "callback_replayed").await;
    assert_replay_ignored(&app, fedapay_notify(&app, &claim).await, replays).await;
    assert_nothing_recorded(&app, &live, &id, "processing").await;
}

#[service_test]
async fn a_signed_fedapay_decline_of_an_approved_transaction_ends_completed() {
    let fake = FakeFedaPay::start().await;
    fake.set_outcome(CELTIIS, Outcome::Stay);
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let (id, tx) = fedapay_payment(&app, &live).await;
    // Approved at FedaPay; its own webhook lost.
    fake.callbacks(Callbacks::Lost);
    fake.customer_pays(&tx).await;
    let claim = fedapay_event(&fake, &tx, "transaction.declined", "declined");
    let (status, answer) = fedapay_notify(&app, &claim).await;
    assert_eq!((status, &answer["applied"]), (200, &json!(1)), "{answer}");
    assert_completed_as_read(&app, &live, &id).await;
}

// CinetPay: notifications signed by their x-token.

fn cinetpay_claim(fake: &FakeCinetPay, id: &str, message: &str) -> Vec<(&'static str, String)> {
    let mut fields = fake.fields(id);
    for (k, v) in fields.iter_mut() {
        if *k == "cpm_error_message" {
            *v = message.into();
        }
    }
    fields
}

async fn cinetpay_send(fake: &FakeCinetPay, id: &str, fields: &[(&str, String)]) -> u16 {
    let token = fake_cinetpay::x_token(fake_cinetpay::SECRET_KEY, fields);
    fake.send_notification(id, fields, Some(token)).await
}

async fn cinetpay_payment(app: &TestApp, key: &str) -> String {
    let phone = (cinetpay::ENTRY.phone)(1);
    let p = create(app, key, &live_payment("CI", "orange-ci", &phone)).await;
    assert_eq!(p["status"], "awaiting_payment", "{p}");
    id_of(&p)
}

#[service_test]
async fn a_signed_cinetpay_paid_notice_for_an_unpaid_link_records_nothing() {
    let fake = FakeCinetPay::start().await;
    let app = registry::serve(&cinetpay::ENTRY, &fake, |_| {}, |_| {}).await;
    let live = app.live_key("Shop");
    let id = cinetpay_payment(&app, &live).await;
    let reads = || fake.requests("payment_check").len();
    let before = reads();
    let claim = cinetpay_claim(&fake, &id, "SUCCES");
    assert_eq!(cinetpay_send(&fake, &id, &claim).await, 200);
    read_back(reads, before).await;
    assert_nothing_recorded(&app, &live, &id, "awaiting_payment").await;

    let replays = counted(&app, "callback_replayed").await;
    assert_eq!(cinetpay_send(&fake, &id, &claim).await, 200);
    assert_eq!(counted(&app, "callback_replayed").await, replays + 1.0);
    assert_nothing_recorded(&app, &live, &id, "awaiting_payment").await;
}

#[service_test]
async fn a_signed_cinetpay_refusal_of_a_paid_link_ends_completed() {
    let fake = FakeCinetPay::start().await;
    let app = registry::serve(&cinetpay::ENTRY, &fake, |_| {}, |_| {}).await;
    let live = app.live_key("Shop");
    let id = cinetpay_payment(&app, &live).await;
    assert!(fake.mark_paid(&id));
    let claim = cinetpay_claim(&fake, &id, "PAYMENT_FAILED");
    assert_eq!(cinetpay_send(&fake, &id, &claim).await, 200);
    assert_completed_as_read(&app, &live, &id).await;
}

// pawaPay and MTN: callbacks we cannot authenticate, always hints.

fn pawapay_claim(deposit_id: &str, status: &str) -> Vec<u8> {
    let mut body = json!({"depositId": deposit_id, "status": status, "amount": "1500",
        "currency": "XOF", "country": "BEN", "payer": {"type": "MMO", "accountDetails":
        {"phoneNumber": "2290195000001", "provider": "MOOV_BEN"}}});
    if status == "FAILED" {
        body["failureReason"] = json!({"failureCode": "PAYER_NOT_FOUND"});
    }
    serde_json::to_vec(&body).unwrap()
}

#[service_test]
async fn a_pawapay_success_for_a_pending_deposit_records_nothing_and_a_failure_for_a_completed_one_ends_completed()
 {
    let fake = FakePawapay::start().await;
    fake.callbacks(Callbacks::Lost);
    fake.set_outcome(MOOV_BJ, Outcome::Stay);
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "moov-bj", MOOV_BJ)).await;
    let id = id_of(&p);
    let deposit = operator_id(&id);
    let reads = || fake.requests("deposit_status").len();
    let before = reads();
    let claim = pawapay_claim(&deposit, "COMPLETED");
    let (status, answer) = notify(&app, "moov-bj", "POST", &[], claim.clone()).await;
    assert_eq!((status, &answer["applied"]), (200, &json!(1)), "{answer}");
    read_back(reads, before).await;
    assert_nothing_recorded(&app, &live, &id, "processing").await;
    let replays = counted(&app, "callback_replayed").await;
    let again = notify(&app, "moov-bj", "POST", &[], claim).await;
    assert_replay_ignored(&app, again, replays).await;

    fake.customer_acts(&deposit, Outcome::Succeed).await;
    let failure = pawapay_claim(&deposit, "FAILED");
    let (status, answer) = notify(&app, "moov-bj", "POST", &[], failure).await;
    assert_eq!(status, 200, "{answer}");
    assert_completed_as_read(&app, &live, &id).await;
}

fn mtn_claim(id: &str, status: &str) -> Vec<u8> {
    let mut body = json!({"financialTransactionId": "363440463", "externalId": id,
        "amount": "1500", "currency": "XOF", "payer": {"partyIdType": "MSISDN",
        "partyId": "2290166000001"}, "payerMessage": "", "payeeNote": "", "status": status});
    if status == "FAILED" {
        body["reason"] = json!("APPROVAL_REJECTED");
    }
    serde_json::to_vec(&body).unwrap()
}

#[service_test]
async fn an_mtn_success_for_a_pending_request_records_nothing_and_a_failure_for_a_paid_one_ends_completed()
 {
    let fake = FakeMtn::start().await;
    fake.callbacks(Callbacks::Lost);
    fake.set_outcome(MTN_BJ, Outcome::Stay);
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", MTN_BJ)).await;
    let id = id_of(&p);
    let reads = || fake.requests("requesttopay_status").len();
    let before = reads();
    let claim = mtn_claim(&id, "SUCCESSFUL");
    let (status, answer) = notify(&app, "mtn-bj", "PUT", &[], claim.clone()).await;
    assert_eq!((status, &answer["applied"]), (200, &json!(1)), "{answer}");
    read_back(reads, before).await;
    assert_nothing_recorded(&app, &live, &id, "processing").await;
    let replays = counted(&app, "callback_replayed").await;
    let again = notify(&app, "mtn-bj", "PUT", &[], claim).await;
    assert_replay_ignored(&app, again, replays).await;

    fake.customer_acts(&operator_id(&id), Outcome::Succeed)
        .await;
    let failure = mtn_claim(&id, "FAILED");
    let (status, answer) = notify(&app, "mtn-bj", "PUT", &[], failure).await;
    assert_eq!(status, 200, "{answer}");
    assert_completed_as_read(&app, &live, &id).await;
}
