//! `wave` (Wave Checkout and Payout) against the fake Wave.

use std::time::Duration;

use mmc_runtime::bindings::adapter_types::*;
use serde_json::{Value, json};

use crate::registry::{self, AtOperator, Entry, Harness, Op};
use crate::support::fakes::Plumbing;
use crate::support::fakes::wave::{self, FakeWave};
use crate::support::fakes::{Callbacks, Fault, Outcome, REFUSED_BECAUSE_OF_US};
use crate::support::*;
use crate::*;
use futures::future::BoxFuture;
use mmc_config::ComponentConfig;
use mmc_test_kit::service_test;

const PHONE: &str = "+2250700000001";

pub(crate) async fn wave_app(
    fake: &FakeWave,
    tweak: impl FnOnce(&mut mmc_config::ComponentConfig),
) -> TestApp {
    let mut component = fake.component_config();
    tweak(&mut component);
    let app = app_with_adapter("wave", &["wave-ci"], component, |_| {}).await;
    // What the merchant sets once in the Wave Business Portal.
    fake.set_callback_url(&format!(
        "{}/api/v1/psp/wave-ci/callback?environment=live",
        app.base
    ));
    app
}

/// Creates a Wave payment; returns (payment id, Wave session id).
pub(crate) async fn wave_payment(app: &TestApp, key: &str) -> (String, String) {
    let p = create(app, key, &live_payment("CI", "wave-ci", PHONE)).await;
    assert_eq!(p["status"], "awaiting_payment", "{p}");
    let session = p["psp_reference"].as_str().unwrap().to_string();
    assert!(session.starts_with("cos-"), "{p}");
    (id_of(&p), session)
}

#[service_test]
async fn wave_checkout_redirects_and_a_signed_webhook_brings_the_read_that_completes_it() {
    let fake = FakeWave::start().await;
    let app = wave_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("CI", "wave-ci", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    let session_id = p["psp_reference"].as_str().unwrap();
    // Hosted at Wave even in direct mode: the customer goes to wave_launch_url.
    assert_eq!(p["status"], "awaiting_payment");
    assert_eq!(p["next_action"]["type"], "redirect_to_checkout");
    assert_eq!(
        p["checkout_url"],
        format!("https://pay.wave.com/c/{session_id}")
    );

    let sent = fake.requests("session_create");
    assert_eq!(sent.len(), 1);
    assert_eq!(
        sent[0].header("Authorization"),
        Some(format!("Bearer {}", wave::API_KEY).as_str())
    );
    let body = sent[0].json().unwrap();
    assert_eq!(body["amount"], "1500", "amounts are strings");
    assert_eq!(body["currency"], "XOF");
    assert_eq!(body["client_reference"], id);
    let back = format!("{}/checkout/{id}", app.base);
    assert_eq!(body["success_url"], back);
    assert_eq!(body["error_url"], back);
    assert!(body.get("restrict_payer_mobile").is_none());

    assert_eq!(fake.customer_pays(session_id).await, vec![200]);
    let done = wait_for(&app, &live, id, "completed", Duration::from_secs(10)).await;
    assert!(done["completed_at"].is_string());
    assert!(
        !fake.requests("session_get").is_empty(),
        "the webhook is a hint: the session was read back"
    );
}

#[service_test]
async fn wave_payment_completes_by_polling_when_the_webhook_is_lost() {
    let fake = FakeWave::start().await;
    fake.callbacks(Callbacks::Lost);
    let app = wave_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let (id, session) = wave_payment(&app, &live).await;
    assert!(fake.customer_pays(&session).await.is_empty());
    wait_for(&app, &live, &id, "completed", Duration::from_secs(8)).await;
    let polls = fake.requests("session_get");
    assert!(!polls.is_empty());
    assert!(polls.iter().all(|r| r.path.ends_with(&session)));
}

#[service_test]
async fn wave_unsigned_forged_or_stale_webhooks_get_401() {
    let fake = FakeWave::start().await;
    let app = wave_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let (id, session) = wave_payment(&app, &live).await;
    fake.mark_paid(&session);

    // Wrong secret, stale timestamp, future timestamp, no header, bad header.
    let now = wave::now();
    let kind = "checkout.session.completed";
    assert_eq!(
        fake.notify_signed_with(kind, &session, "not-the-secret", now)
            .await,
        401
    );
    assert_eq!(
        fake.notify_signed_with(kind, &session, wave::WEBHOOK_SECRET, now - 600)
            .await,
        401
    );
    assert_eq!(
        fake.notify_signed_with(kind, &session, wave::WEBHOOK_SECRET, now + 600)
            .await,
        401
    );
    let body = br#"{"id":"AE_1","type":"checkout.session.completed","data":{}}"#.to_vec();
    assert_eq!(fake.send_webhook(body.clone(), None).await, 401);
    assert_eq!(
        fake.send_webhook(body.clone(), Some("v1=abc".into())).await,
        401
    );
    // A signature over other bytes (re-serialised JSON, say) does not match the raw body.
    let other = wave::signature(wave::WEBHOOK_SECRET, now, b"{\"id\": \"AE_1\"}");
    assert_eq!(fake.send_webhook(body, Some(other)).await, 401);
    let (status, err) = notify(&app, "wave-ci", "POST", &[], b"{}".to_vec()).await;
    assert_eq!(status, 401);
    assert_eq!(err["error"]["code"], "callback_unauthenticated");
    assert_eq!(
        payment(&app, &live, &id).await["status"],
        "awaiting_payment"
    );

    // The genuine one passes.
    assert_eq!(fake.notify(kind, &session).await, vec![200]);
    wait_for(&app, &live, &id, "completed", Duration::from_secs(10)).await;
}

#[service_test]
async fn wave_failed_attempt_is_not_final_and_expiry_fails_with_the_reason() {
    let fake = FakeWave::start().await;
    let app = wave_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let (id, session) = wave_payment(&app, &live).await;
    // The customer's attempt fails; the session stays open for another try.
    assert_eq!(
        fake.customer_attempt_fails(&session, "insufficient-funds")
            .await,
        vec![200]
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        payment(&app, &live, &id).await["status"],
        "awaiting_payment"
    );
    // Then the session runs out; polling learns it.
    fake.session_expires(&session);
    let p = wait_for(&app, &live, &id, "failed", Duration::from_secs(8)).await;
    assert_eq!(p["failure_code"], "insufficient_funds", "{p}");
}

#[service_test]
async fn wave_duplicate_and_out_of_order_webhooks_never_move_a_terminal_payment() {
    let fake = FakeWave::start().await;
    fake.callbacks(Callbacks::Duplicate);
    let app = wave_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let (id, session) = wave_payment(&app, &live).await;
    assert_eq!(fake.customer_pays(&session).await, vec![200, 200]);
    let done = wait_for(&app, &live, &id, "completed", Duration::from_secs(10)).await;
    // A late event saying the session expired unpaid, properly signed.
    let late = json!({"id": "AE_late", "type": "checkout.session.payment_failed", "data": {
        "id": session, "client_reference": id, "checkout_status": "expired",
        "payment_status": "cancelled", "amount": "1500", "currency": "XOF",
        "last_payment_error": {"code": "insufficient-funds", "message": "low"}}});
    let body = serde_json::to_vec(&late).unwrap();
    let header = wave::signature(wave::WEBHOOK_SECRET, wave::now(), &body);
    assert_eq!(fake.send_webhook(body, Some(header)).await, 200);
    let after = payment(&app, &live, &id).await;
    assert_eq!(after["status"], "completed");
    assert_eq!(after["completed_at"], done["completed_at"]);
    assert_eq!(after["failure_code"], Value::Null);
    // The duplicate delivery was the same notification: taken once.
    assert!(
        metric(
            &app.metrics().await,
            "mmc_component_events_total",
            r#"component="collect",event="callback_replayed""#
        ) >= 1.0
    );
}

#[service_test]
async fn wave_errors_at_initiation_leave_the_payment_pending() {
    let fake = FakeWave::start().await;
    fake.callbacks(Callbacks::Lost);
    let app = wave_app(&fake, |c| {
        c.settings.insert("timeout_ms".into(), "400".into());
    })
    .await;
    let live = app.live_key("Shop");

    // A 502 or an unreadable answer says nothing about what Wave did: unknown.
    fake.inject("session_create", Fault::Status(502), 1);
    let p = create(&app, &live, &live_payment("CI", "wave-ci", PHONE)).await;
    assert_eq!(p["status"], "pending", "{p}");
    assert!(p["failure_code"].is_null(), "{p}");

    fake.inject("session_create", Fault::Malformed, 1);
    let p = create(&app, &live, &live_payment("CI", "wave-ci", PHONE)).await;
    assert_eq!(p["status"], "pending", "{p}");
    assert!(p["failure_code"].is_null(), "{p}");

    // Wave opens the session but answers too late: pending, then found by client_reference.
    fake.inject(
        "session_create",
        Fault::Slow(Duration::from_millis(1500)),
        1,
    );
    let p = create(&app, &live, &live_payment("CI", "wave-ci", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(p["status"], "pending", "{p}");
    let session = fake.session_by_reference(id).expect("Wave did open it");
    fake.customer_pays(&session).await;
    wait_for(&app, &live, id, "completed", Duration::from_secs(8)).await;
    let searches = fake.requests("session_search");
    assert!(
        searches
            .iter()
            .any(|r| r.query_param("client_reference").as_deref() == Some(id))
    );
}

#[service_test]
async fn wave_cancel_expires_the_session_unless_already_paid() {
    let fake = FakeWave::start().await;
    fake.callbacks(Callbacks::Lost);
    let app = wave_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let (id, session) = wave_payment(&app, &live).await;
    let (status, p) = app
        .post(
            &live,
            &format!("/api/v1/collect/payments/{id}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["status"], "cancelled");
    assert_eq!(fake.session(&session).unwrap().checkout_status, "expired");

    // Paid meanwhile (webhook lost): Wave refuses to expire, the payment completes instead.
    let (id, session) = wave_payment(&app, &live).await;
    fake.customer_pays(&session).await;
    let (status, err) = app
        .post(
            &live,
            &format!("/api/v1/collect/payments/{id}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error"]["code"], "payment_not_cancellable");
    assert_eq!(payment(&app, &live, &id).await["status"], "completed");
}

#[service_test]
async fn wave_refunds_whole_sessions_and_pays_out_idempotently() {
    let fake = FakeWave::start().await;
    fake.settle_after(Duration::from_millis(100));
    let adapter = Direct::load("wave", fake.component_config());
    let req = initiate_request("wave-ci", "CI", PHONE);
    let id = req.payment_id.clone();
    let Ok(Initiated::Redirect(r)) = adapter.initiate(req).await else {
        panic!("a redirect");
    };
    fake.customer_pays(&r.psp_reference).await; // no webhook URL: nothing sent
    let paid = operation(&id, "wave-ci", Some(r.psp_reference.clone()), PHONE, 1500);
    assert_eq!(
        completed(&adapter.status(paid.clone()).await.unwrap()),
        Some(1500),
    );
    // Found by our id as well.
    let by_id = operation(&id, "wave-ci", None, PHONE, 1500);
    assert_eq!(completed(&adapter.status(by_id).await.unwrap()), Some(1500));

    let refund = |amount| RefundRequest {
        refund_id: uuid::Uuid::new_v4().to_string(),
        payment: paid.clone(),
        amount,
        reason: "duplicate".into(),
    };
    let err = adapter.refund(refund(500)).await.unwrap_err();
    assert!(matches!(err, AdapterError::NotSupported(_)), "{err:?}");
    assert!(fake.requests("session_refund").is_empty());
    let started = adapter.refund(refund(1500)).await.unwrap();
    assert_eq!(
        completed(&started.status),
        Some(1500),
        "synchronous at Wave"
    );
    assert_eq!(started.psp_reference, r.psp_reference);
    assert!(fake.session(&r.psp_reference).unwrap().refunded);
    let err = adapter.refund(refund(1500)).await.unwrap_err();
    assert!(
        matches!(&err, AdapterError::Rejected(m) if m.contains("checkout-refund-failed")),
        "{err:?}"
    );

    // Payouts: our payout id is the idempotency key; a retry gets the same payout.
    let first = adapter
        .payout(payout_request("wave-ci", "po-1", "+2250500000001"))
        .await
        .unwrap();
    assert!(first.psp_reference.starts_with("pt-"));
    assert_eq!(first.status, PspStatus::Pending);
    let retry = adapter
        .payout(payout_request("wave-ci", "po-1", "+2250500000001"))
        .await
        .unwrap();
    assert_eq!(retry.psp_reference, first.psp_reference);
    assert_eq!(fake.payouts().len(), 1, "paid once");
    let sent = &fake.requests("payout_create")[0];
    assert_eq!(sent.header("idempotency-key"), Some("po-1"));
    let body = sent.json().unwrap();
    assert_eq!(body["receive_amount"], "2500");
    assert_eq!(body["mobile"], "+2250500000001");
    assert_eq!(body["client_reference"], "po-1");
    let op = operation(
        "po-1",
        "wave-ci",
        Some(first.psp_reference),
        "+2250500000001",
        2500,
    );
    let status = adapter
        .settled(Duration::from_secs(3), || adapter.payout_status(op.clone()))
        .await;
    assert_eq!(completed(&status), Some(2500));
    let op = operation("po-1", "wave-ci", None, "+2250500000001", 2500);
    assert_eq!(
        completed(&adapter.payout_status(op).await.unwrap()),
        Some(2500),
        "by client_reference"
    );

    fake.set_outcome("+2250500000002", Outcome::Fail("recipient-limit-exceeded"));
    let started = adapter
        .payout(payout_request("wave-ci", "po-2", "+2250500000002"))
        .await
        .unwrap();
    let op = operation(
        "po-2",
        "wave-ci",
        Some(started.psp_reference),
        "+2250500000002",
        2500,
    );
    let status = adapter
        .settled(Duration::from_secs(3), || adapter.payout_status(op.clone()))
        .await;
    assert_eq!(failed(status).code, "limit_reached");
}

#[service_test]
async fn wave_signature_checks_at_adapter_level() {
    let fake = FakeWave::start().await;
    let mut c = fake.component_config();
    c.settings
        .insert("webhook_tolerance_seconds".into(), "30".into());
    let adapter = Direct::load("wave", c);
    let event = json!({"id": "AE_9", "type": "checkout.session.completed", "data": {
        "id": "cos-9", "client_reference": "pay-9", "checkout_status": "complete",
        "payment_status": "succeeded", "amount": "1500", "currency": "XOF"}});
    let body = serde_json::to_vec(&event).unwrap();
    let inbound = |signature: String| Inbound {
        operator: "wave-ci".into(),
        environment: "live".into(),
        method: "POST".into(),
        headers: vec![("wave-signature".into(), signature)],
        body: body.clone(),
    };
    let now = wave::now();
    // During a secret rotation Wave sends several v1: one match is enough.
    let good = wave::signature(wave::WEBHOOK_SECRET, now, &body);
    let rotated = format!(
        "t={now},v1={},{}",
        "0".repeat(64),
        &good[good.find("v1=").unwrap()..]
    );
    let updates = adapter.parse_callback(inbound(rotated)).await.unwrap();
    assert_eq!(
        updates,
        vec![CallbackUpdate {
            kind: SubjectKind::Payment,
            id: Some("pay-9".into()),
            psp_reference: Some("cos-9".into()),
            status: PspStatus::Completed(Settled {
                amount: "1500".into(),
                currency: "XOF".into(),
                party: None,
            }),
        }]
    );
    // 60 s old is beyond a 30 s tolerance.
    let stale = wave::signature(wave::WEBHOOK_SECRET, now - 60, &body);
    let err = adapter.parse_callback(inbound(stale)).await.unwrap_err();
    assert!(matches!(err, AdapterError::Unauthenticated(_)), "{err:?}");
    // Events we do not use are acknowledged and ignored.
    let other = serde_json::to_vec(
        &json!({"id": "AE_10", "type": "merchant.payment_received", "data": {}}),
    )
    .unwrap();
    let mut req = inbound(wave::signature(wave::WEBHOOK_SECRET, now, &other));
    req.body = other;
    assert_eq!(adapter.parse_callback(req).await.unwrap(), vec![]);
    // No webhook_secret configured: nothing is accepted.
    let mut c = fake.component_config();
    c.secrets.remove("webhook_secret");
    let adapter = Direct::load("wave", c);
    let err = adapter
        .parse_callback(inbound(wave::signature(wave::WEBHOOK_SECRET, now, &body)))
        .await
        .unwrap_err();
    assert!(matches!(err, AdapterError::Unauthenticated(_)), "{err:?}");
}

/// Wave's other webhook security strategy: the shared secret sent as a bearer
/// token, accepted only where `webhook_security = shared_secret` says so.
#[service_test]
async fn wave_shared_secret_webhooks_are_checked_by_their_bearer_token() {
    let fake = FakeWave::start().await;
    fake.callbacks(Callbacks::Lost);
    let app = wave_app(&fake, |c| {
        c.settings
            .insert("webhook_security".into(), "shared_secret".into());
    })
    .await;
    let live = app.live_key("Shop");
    let (id, session) = wave_payment(&app, &live).await;
    let event = json!({"id": "AE_shared", "type": "checkout.session.completed", "data": {
        "id": session, "client_reference": id, "checkout_status": "complete",
        "payment_status": "succeeded", "amount": "1500", "currency": "XOF"}});
    let body = serde_json::to_vec(&event).unwrap();
    let signed = wave::signature(wave::WEBHOOK_SECRET, wave::now(), &body);
    for headers in [
        vec![("Authorization", "Bearer wrong-secret")],
        vec![("Wave-Signature", signed.as_str())], // the other strategy: not this webhook's
        vec![],
    ] {
        let (status, answer) = notify(&app, "wave-ci", "POST", &headers, body.clone()).await;
        assert_eq!(status, 401, "{headers:?}: {answer}");
    }
    let bearer = format!("Bearer {}", wave::WEBHOOK_SECRET);
    let (status, answer) =
        notify(&app, "wave-ci", "POST", &[("Authorization", &bearer)], body).await;
    assert_eq!(status, 200, "{answer}");
    assert!(fake.mark_paid(&session), "Wave's side agrees");
    wait_for(&app, &live, &id, "completed", Duration::from_secs(5)).await;
}

/// Refused because of us: Wave's 401, 403, 404 and 429 to the checkout
/// session opened nothing and are not the customer's doing. The payment
/// fails with `operator_error` and Wave's message, and the host counts each
/// as a `rejected` call of `wave`.
#[service_test]
async fn wave_refusals_caused_by_us_are_operator_errors_counted_per_adapter() {
    let fake = FakeWave::start().await;
    let app = wave_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    for (status, says) in REFUSED_BECAUSE_OF_US.into_iter().zip([
        "invalid-auth",
        "api-key-wrong-scope",
        "not-found",
        "rate-limit-exceeded",
    ]) {
        fake.inject("session_create", wave::refusal(status), 1);
        let p = create(&app, &live, &live_payment("CI", "wave-ci", PHONE)).await;
        assert_eq!(p["status"], "failed", "{status}: {p}");
        assert_eq!(p["failure_code"], "operator_error", "{status}: {p}");
        let message = p["failure_message"].as_str().unwrap();
        assert!(
            message.contains(&status.to_string()) && message.contains(says),
            "{status}: Wave's status and message are kept: {message}"
        );
        assert!(
            fake.sessions_for(p["id"].as_str().unwrap()).is_empty(),
            "{status}: no session was opened"
        );
    }
    assert_eq!(fake.requests("session_create").len(), 4);
    assert_eq!(
        metric(
            &app.metrics().await,
            "mmc_adapter_calls_total",
            r#"adapter="wave",operation="initiate",outcome="rejected""#,
        ),
        4.0
    );
}

/// The fake Wave delivers a webhook by its rule (`wave::DELIVERY`): an
/// answer that is not a 2xx, or none within 3 s, is followed by another
/// attempt of the same event, signed anew, up to 3 in all.
#[service_test]
async fn the_fake_wave_tries_a_webhook_again_until_it_is_acknowledged() {
    use crate::support::fakes::{Answer, Receiver};
    let fake = FakeWave::start().await;
    let adapter = Direct::load("wave", fake.component_config());
    let Initiated::Redirect(session) = adapter
        .initiate(initiate_request("wave-ci", "CI", PHONE))
        .await
        .unwrap()
    else {
        panic!("a Wave payment is a redirect")
    };
    let receiver = Receiver::start(
        "checkout.session.completed",
        vec![
            Answer::Status(500),
            Answer::Late(wave::DELIVERY.patience + Duration::from_millis(500)),
            Answer::Status(200),
            Answer::Status(200),
        ],
    )
    .await;
    fake.set_callback_url(&receiver.url());
    assert_eq!(
        fake.customer_pays(&session.psp_reference).await,
        vec![500, 0, 200]
    );
    let got = receiver.received();
    assert_eq!(got.len(), 3, "no attempt after the 200");
    for r in &got {
        assert_eq!(r.body, got[0].body, "the same event each time");
        let header = r.header("Wave-Signature").expect("signed");
        let t: u64 = header
            .strip_prefix("t=")
            .and_then(|h| h.split(',').next())
            .and_then(|t| t.parse().ok())
            .unwrap();
        assert_eq!(header, wave::signature(wave::WEBHOOK_SECRET, t, &r.body));
    }

    // Never acknowledged: 3 attempts, then Wave stops.
    let session = fake_session(&adapter).await;
    let receiver =
        Receiver::start("checkout.session.completed", vec![Answer::Status(503); 5]).await;
    fake.set_callback_url(&receiver.url());
    assert_eq!(fake.customer_pays(&session).await, vec![503; 3]);
    assert_eq!(receiver.received().len(), wave::DELIVERY.attempts);
}

/// A session opened through the adapter; returns its id.
async fn fake_session(adapter: &Direct) -> String {
    match adapter
        .initiate(initiate_request("wave-ci", "CI", PHONE))
        .await
        .unwrap()
    {
        Initiated::Redirect(r) => r.psp_reference,
        other => panic!("{other:?}"),
    }
}

/// `wave` in the registry of adapters: the contract tests and every cell of
/// the fault matrix run over it.
pub const ENTRY: Entry = Entry {
    name: "wave",
    operator: "wave-ci",
    routes: &["wave-ci"],
    country: "CI",
    phone: |n| format!("+22507{:08}", 70_000_000 + n),
    unsupported: &[(Op::ConfirmOtp, "Wave has no OTP step (paid on Wave's page)")],
    otp: None,
    refund_status_query: false,
    keyless_initiate: Some(
        "Wave takes no key for a checkout session: one created late is another session, paid only at its launch URL, which nobody was given",
    ),
    conformance_settings: &[],
    conformance_secrets: &["api_key", "webhook_secret"],
    start: registry::start::<wave::Wave>,
};

/// Wave knows a payment by its session (`client_reference` = our id); the
/// customer pays on Wave's page, here on command.
impl Harness for FakeWave {
    fn plumbing(&self) -> &Plumbing {
        FakeWave::plumbing(self)
    }

    /// The payer's number travels with the session: the fake can then tell
    /// one test's session from another's.
    fn component_config(&self) -> ComponentConfig {
        let mut c = FakeWave::component_config(self);
        c.settings
            .insert("restrict_payer_mobile".into(), "true".into());
        c
    }

    fn endpoint(&self, op: Op) -> &'static str {
        match op {
            Op::Cancel => "session_expire",
            Op::Refund => "session_refund",
            Op::Payout => "payout_create",
            _ => "session_create",
        }
    }

    /// A cancel expires the session, a refund refunds it.
    fn target(&self, op: Op, phone: &str, payment_id: &str, psp_reference: &str) -> String {
        match op {
            Op::Cancel if psp_reference.is_empty() => payment_id.to_string(),
            Op::Cancel | Op::Refund => psp_reference.to_string(),
            _ => phone.to_string(),
        }
    }

    /// Wave's customer pays only when told: nothing to hold back.
    fn customer_waits(&self, _: &str) {}

    fn customer_approves<'a>(&'a self, payment_id: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            let mut paid = false;
            for s in self.sessions_for(payment_id) {
                if self.mark_paid(&s.id) {
                    self.notify("checkout.session.completed", &s.id).await;
                    paid = true;
                }
            }
            paid
        })
    }

    fn payment(&self, payment_id: &str) -> AtOperator {
        let sessions = self.sessions_for(payment_id);
        AtOperator {
            moved: sessions.iter().any(|s| s.paid()),
            // The test pays (or fails to pay) at once: nothing pending.
            settled: true,
            records: sessions.len(),
        }
    }

    fn refund(&self, _: &str, psp_reference: &str) -> AtOperator {
        let refunded = self.session(psp_reference).is_some_and(|s| s.refunded);
        AtOperator {
            moved: refunded,
            settled: true,
            records: usize::from(refunded),
        }
    }

    fn payout(&self, phone: &str) -> AtOperator {
        let payouts: Vec<_> = self
            .payouts()
            .into_iter()
            .filter(|p| p.mobile == phone)
            .collect();
        AtOperator {
            moved: payouts.iter().any(|p| p.succeeded()),
            settled: payouts.iter().all(|p| p.status != "processing"),
            records: payouts.len(),
        }
    }
}
