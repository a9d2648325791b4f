//! The money rule end to end against the fake MTN: an operator outcome we do
//! not know is never recorded as final, a cancel or expiry never hides money
//! the operator took, and a late success is never dropped.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::fakes::mtn::FakeMtn;
use crate::support::fakes::{Callbacks, Fault, Outcome};
use crate::support::*;
use crate::*;
use mmc_test_kit::service_test;

const PHONE: &str = "+2290166000001";
const MSISDN: &str = "2290166000001";

/// A request is possibly in flight for 1 s (adapter deadline and MTN's
/// answer window, 500 ms each): "not found" is final for our own rule soon.
const SHORT_WINDOWS: &[(&str, &str)] = &[
    ("adapter_deadline_ms", "500"),
    ("operator_answer_window_ms", "500"),
];

/// MTN routed for `mtn-bj` in live with a 400 ms HTTP timeout, as a new
/// user would set it; `tweak` adjusts the collect component's settings.
async fn mtn_app(fake: &FakeMtn, collect: &[(&str, &str)]) -> TestApp {
    let mut component = fake.component_config();
    component.settings.insert("timeout_ms".into(), "400".into());
    let collect: Vec<(String, String)> = collect
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    app_with_adapter("momo", &["mtn-bj"], component, move |c| {
        let settings = &mut c.components.entry("collect".into()).or_default().settings;
        settings.extend(collect);
    })
    .await
}

fn requests_to_pay_for(fake: &FakeMtn, id: &str) -> usize {
    fake.requests("requesttopay")
        .iter()
        .filter(|r| r.header("X-Reference-Id") == Some(operator_id(id).as_str()))
        .count()
}

/// Money-safety scenario 1: MTN answers the request to pay
/// after 1.5 s, we give up at 400 ms. The cancel asks MTN, which still has
/// the request pending: 409, and the customer's approval completes the payment.
#[service_test]
async fn a_timed_out_request_to_pay_is_not_cancelled_and_completes_when_the_customer_pays() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(2500));
    fake.callbacks(Callbacks::Lost);
    fake.inject("requesttopay", Fault::Slow(Duration::from_millis(1500)), 1);
    let app = mtn_app(&fake, &[]).await;
    let live = app.live_key("Shop");

    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(
        p["status"], "pending",
        "a timeout is an unknown outcome: {p}"
    );
    assert!(p["failure_code"].is_null(), "{p}");

    let (status, body) = app
        .post(
            &live,
            &format!("/api/v1/collect/payments/{id}/cancel"),
            json!({}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    assert_eq!(body["error"]["code"], "payment_not_cancellable");
    assert!(
        !fake.requests("requesttopay_status").is_empty(),
        "the cancel asked MTN by our id"
    );

    let done = wait_for(&app, &live, id, "completed", Duration::from_secs(15)).await;
    // Learnt by asking MTN by our id: the reference is ours, or not yet recorded.
    assert!(done["psp_reference"].is_null() || done["psp_reference"] == operator_id(id));
    assert_eq!(requests_to_pay_for(&fake, id), 1, "sent once, never again");
    assert_eq!(
        fake.transaction(&operator_id(id)).map(|t| t.status),
        Some("SUCCESSFUL".to_string())
    );
}

/// A 5xx on the request to pay leaves the payment in progress; MTN, asked by
/// our id, says it never got it. Not found is not never: once the request
/// can no longer be in flight, it is sent again under the same
/// `X-Reference-Id`, and MTN's answer settles the payment: never failed for
/// MTN not knowing it, one request to pay at MTN.
#[service_test]
async fn a_request_to_pay_mtn_never_got_is_sent_again_under_its_id() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.inject("requesttopay", Fault::Status(503), 1);
    let app = mtn_app(&fake, SHORT_WINDOWS).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(p["status"], "pending", "{p}");
    let done = wait_for(&app, &live, id, "completed", Duration::from_secs(15)).await;
    assert!(done["failure_code"].is_null(), "{done}");
    assert_eq!(
        requests_to_pay_for(&fake, id),
        2,
        "sent again, under its id"
    );
    assert_eq!(
        fake.transaction(&operator_id(id)).map(|t| t.status),
        Some("SUCCESSFUL".to_string())
    );
    let events = app.event_types(&live, id).await;
    assert!(
        !events.iter().any(|t| t == "collect.payment.failed"),
        "{events:?}"
    );
}

/// A payment stored before records kept the service's address (here: the
/// address taken out of its record) is sent again all the same, naming the
/// address this node serves at, so MTN's callback still finds us.
#[service_test]
async fn a_request_to_pay_stored_without_the_services_address_is_sent_again_naming_it() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.inject("requesttopay", Fault::Status(503), 1);
    let app = mtn_app(
        &fake,
        &[
            ("adapter_deadline_ms", "500"),
            ("operator_answer_window_ms", "2500"),
        ],
    )
    .await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(p["status"], "pending", "{p}");
    let (k, v) = crate::support::fixtures::payment_record(&app, id);
    let storage = &app.service.site.app.runtime.services.storage;
    let mut tx = storage.begin("collect").unwrap();
    let mut record = mmc_domain::record::decode(&v).unwrap();
    assert!(record.base_url.is_some(), "a new record keeps it");
    record.base_url = None;
    tx.put("payments", &k, &mmc_domain::record::encode(&record))
        .unwrap();
    tx.commit().unwrap();

    wait_for(&app, &live, id, "completed", Duration::from_secs(15)).await;
    assert_eq!(
        requests_to_pay_for(&fake, id),
        2,
        "sent again, under its id"
    );
    let callback = fake
        .transaction(&operator_id(id))
        .and_then(|t| t.callback_url)
        .unwrap_or_default();
    assert!(
        callback.starts_with(&format!("{}/api/v1/psp/", app.base)),
        "{callback}"
    );
}

/// MTN's gateway holds the request to pay past every window we keep: the
/// payment is sent again under its id meanwhile, and the held copy, carried
/// out later, is MTN's repeated id (409). One transaction, one id, and the
/// payment completed, never failed.
#[service_test]
async fn a_request_to_pay_held_in_mtns_gateway_moves_money_once() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.inject(
        "requesttopay",
        Fault::ArrivesLate(Duration::from_secs(6)),
        1,
    );
    let app = mtn_app(&fake, SHORT_WINDOWS).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    wait_for(&app, &live, id, "completed", Duration::from_secs(15)).await;
    assert_eq!(
        requests_to_pay_for(&fake, id),
        2,
        "sent again, under its id"
    );
    // The held copy is carried out 6 s after it came, once the payment completed.
    tokio::time::sleep(Duration::from_secs(7)).await;
    assert_eq!(
        fake.transaction(&operator_id(id)).map(|t| t.status),
        Some("SUCCESSFUL".to_string())
    );
    let again = app
        .get(&live, &format!("/api/v1/collect/payments/{id}?sync=true"))
        .await
        .1;
    assert_eq!(again["status"], "completed", "{again}");
}

/// MTN reports a failure, then changes its mind and says SUCCESSFUL: the
/// money was taken, so the payment completes, with its event and a metric.
#[service_test]
async fn a_late_success_for_a_failed_payment_completes_it() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.set_outcome(MSISDN, Outcome::Fail("INTERNAL_PROCESSING_ERROR"));
    let app = mtn_app(&fake, &[]).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    wait_for(&app, &live, id, "failed", Duration::from_secs(8)).await;

    fake.set_status(&operator_id(id), "SUCCESSFUL", None);
    assert_eq!(fake.send_callback(&operator_id(id)).await, 200);
    let done = wait_for(&app, &live, id, "completed", Duration::from_secs(5)).await;
    assert!(done["completed_at"].is_string(), "{done}");

    let events = app.event_types(&live, id).await;
    let failed_at = events.iter().position(|t| t == "collect.payment.failed");
    let completed_at = events.iter().position(|t| t == "collect.payment.completed");
    assert!(
        matches!((failed_at, completed_at), (Some(f), Some(c)) if f < c),
        "both moves are reported, in order: {events:?}"
    );
    // MTN flips again: a completed payment never moves back.
    fake.set_status(
        &operator_id(id),
        "FAILED",
        Some("INTERNAL_PROCESSING_ERROR"),
    );
    assert_eq!(fake.send_callback(&operator_id(id)).await, 200);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(payment(&app, &live, id).await["status"], "completed");
    let metrics = app.metrics().await;
    assert!(
        metric(
            &metrics,
            "mmc_component_events_total",
            r#"component="collect",event="late_success""#
        ) >= 1.0,
        "{metrics}"
    );
}

/// Scenario 3: MTN records the refund, then answers 500. The refund stays
/// pending with its amount reserved (a second full refund is refused), and
/// polling settles it: the payment is refunded once.
#[service_test]
async fn a_refund_whose_answer_is_lost_is_polled_not_failed_and_never_doubled() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(100));
    let app = mtn_app(&fake, &[]).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", PHONE)).await;
    let id = p["id"].as_str().unwrap();
    wait_for(&app, &live, id, "completed", Duration::from_secs(8)).await;

    // The refund request takes longer than our timeout: MTN does it anyway.
    fake.inject("refund", Fault::Slow(Duration::from_millis(1500)), 1);
    let refunds = format!("/api/v1/collect/payments/{id}/refunds");
    let key = new_key();
    let (status, r) = post_with_key(&app, &live, &refunds, &key, json!({})).await;
    assert_eq!(status, 201, "{r}");
    assert_eq!(r["status"], "pending", "unknown is not failed: {r}");

    // A retry of the same request under its key is the same refund.
    let (status, again) = post_with_key(&app, &live, &refunds, &key, json!({})).await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again["id"], r["id"]);
    assert_eq!(again["idempotent_replay"], true);
    // A new full refund finds nothing left: the amount is still reserved.
    let (status, body) = app.post(&live, &refunds, json!({})).await;
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "refund_amount_exceeds_remaining");

    wait_for(&app, &live, id, "refunded", Duration::from_secs(15)).await;
    assert_eq!(
        fake.requests("refund").len(),
        1,
        "one refund sent, under one id"
    );
}

async fn post_with_key(
    app: &TestApp,
    key: &str,
    path: &str,
    idempotency_key: &str,
    body: Value,
) -> (u16, Value) {
    let resp = app
        .client
        .post(app.url(path))
        .bearer_auth(key)
        .header("Idempotency-Key", idempotency_key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// Moves a stored payment's deadline to `expires_at_ms` (index and record),
/// through the server's own storage, instead of waiting five minutes.
fn move_deadline(app: &TestApp, id: &str, expires_at_ms: u64) {
    let storage = &app.service.site.app.runtime.services.storage;
    let entries = storage.scan("collect", "expiry", "", "~", 1000).unwrap();
    let (old_key, _) = entries
        .iter()
        .find(|(k, _)| k.ends_with(id))
        .expect("the payment is in the expiry index");
    let record_key = old_key[14..].to_string(); // after "<13 digits>/"
    let mut tx = storage.begin("collect").unwrap();
    let stored = tx.get("payments", &record_key).unwrap().unwrap();
    let mut record = mmc_domain::record::decode(&stored).unwrap();
    record.expires_at_ms = expires_at_ms;
    tx.put(
        "payments",
        &record_key,
        &mmc_domain::record::encode(&record),
    )
    .unwrap();
    tx.delete("expiry", old_key).unwrap();
    tx.put("expiry", &format!("{expires_at_ms:013}/{record_key}"), b"")
        .unwrap();
    tx.commit().unwrap();
}

/// Expiry asks MTN, which cannot withdraw a request to pay. While MTN says
/// pending and its approval window is open, the payment stays in progress
/// (the customer's approval then completes it); once the window has closed
/// with MTN still saying pending, the payment expires.
#[service_test]
async fn expiry_waits_for_the_operators_approval_window() {
    let fake = FakeMtn::start().await;
    fake.callbacks(Callbacks::Lost);
    let (late_payer, never) = ("+2290166000011", "+2290166000012");
    fake.set_outcome(late_payer, Outcome::Stay);
    fake.set_outcome(never, Outcome::Stay);
    let mut component = fake.component_config();
    component
        .settings
        .insert("approval_window_ms".into(), "60000".into());
    let app = app_with_adapter("momo", &["mtn-bj"], component, |_| {}).await;
    let live = app.live_key("Shop");
    let a = create(&app, &live, &live_payment("BJ", "mtn-bj", late_payer)).await;
    let b = create(&app, &live, &live_payment("BJ", "mtn-bj", never)).await;
    let (a, b) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());

    let now = mmc_common::clock::system_now_ms();
    move_deadline(&app, a, now - 1_000); // past expires_at, inside MTN's window
    move_deadline(&app, b, now - 120_000); // past expires_at and the window
    wait_for(&app, &live, b, "expired", Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(1500)).await; // expiry has run for `a` too
    let held = payment(&app, &live, a).await;
    assert_eq!(
        held["status"], "processing",
        "MTN may still take it: {held}"
    );

    // The customer approves on the phone after our deadline: the money is recorded.
    fake.set_status(&operator_id(a), "SUCCESSFUL", None);
    wait_for(&app, &live, a, "completed", Duration::from_secs(10)).await;
    let metrics = app.metrics().await;
    assert!(
        metric(
            &metrics,
            "mmc_component_events_total",
            r#"component="collect",event="expiry_held_open""#
        ) >= 1.0,
        "{metrics}"
    );
}

/// A checkout submit whose request to pay timed out: the page shows the
/// payment as on its way (no second form that could push again, maybe to
/// another operator), a second submit sends nothing, and the payment is
/// polled like any other until MTN says the customer paid.
#[service_test]
async fn a_checkout_submit_with_an_unknown_outcome_is_polled_and_never_offered_again() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(2500));
    fake.callbacks(Callbacks::Lost);
    fake.inject("requesttopay", Fault::Slow(Duration::from_millis(1500)), 1);
    let app = mtn_app(&fake, &[]).await;
    let live = app.live_key("Shop");
    let mut body = live_payment("BJ", "mtn-bj", PHONE);
    body["mode"] = json!("hosted");
    body.as_object_mut().unwrap().remove("operator");
    let p = create(&app, &live, &body).await;
    let id = p["id"].as_str().unwrap();
    let page = app.url(&format!("/checkout/{id}"));
    let no_redirects = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let submit = || async {
        no_redirects
            .post(&page)
            .form(&[("operator", "mtn-bj"), ("phone", PHONE)])
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(submit().await, 303);
    let html = app
        .client
        .get(&page)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!html.contains(r#"id="pay""#), "no second form: {html}");
    assert!(html.contains(r#"data-status="processing""#), "{html}");
    assert_eq!(submit().await, 303, "a second submit only shows the status");
    wait_for(&app, &live, id, "completed", Duration::from_secs(15)).await;
    assert_eq!(requests_to_pay_for(&fake, id), 1, "one push, never two");
}
