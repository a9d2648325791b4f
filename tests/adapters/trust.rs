//! No forged or mismatched message moves money, against every adapter's
//! fake: a callback never chooses which operator transaction a payment
//! follows (whatever id it names, in whatever form, at whatever moment), and
//! a success counts only for the amount and currency asked — one for another
//! amount leaves the payment in progress, flagged for review.

use std::time::Duration;

use serde_json::{Value, json};

use crate::fedapay::fedapay_app;
use crate::momo::mtn_app;
use crate::pawapay::pawapay_app;
use crate::support::fakes::fedapay::FakeFedaPay;
use crate::support::fakes::mtn::FakeMtn;
use crate::support::fakes::pawapay::FakePawapay;
use crate::support::fakes::wave::{self, FakeWave};
use crate::support::fakes::{Callbacks, Fault, Outcome};
use crate::support::*;
use crate::wave::wave_app;
use crate::*;
use mmc_test_kit::service_test;

const MOOV_BJ: &str = "+2290195000001";
const MTN_BJ: &str = "+2290166000001";
const CELTIIS: &str = "+2290140000001";
const WAVE_CI: &str = "+2250700000001";

/// Our operator id for `id` with its version digit replaced: another UUID
/// that only a careless mapping would take for ours.
fn with_version(operator_id: &str, digit: char) -> String {
    let mut s = operator_id.to_string();
    s.replace_range(14..15, &digit.to_string());
    s
}

async fn events_of(app: &TestApp, key: &str, id: &str) -> Vec<String> {
    let (status, list) = app
        .get(key, &format!("/api/v1/events?payment={id}&limit=100"))
        .await;
    assert_eq!(status, 200, "{list}");
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect()
}

async fn under_review(app: &TestApp, key: &str) -> Vec<String> {
    let (status, list) = app
        .get(key, "/api/v1/collect/payments?review=required")
        .await;
    assert_eq!(status, 200, "{list}");
    list["data"].as_array().unwrap().iter().map(id_of).collect()
}

async fn counted(app: &TestApp, event: &str) -> f64 {
    metric(
        &app.metrics().await,
        "mmc_component_events_total",
        &format!(r#"component="collect",event="{event}""#),
    )
}

/// The operator took another amount than the payment's: the payment keeps
/// its status, says why, is listed under `review=required` and has its own
/// event, once, however many answers repeat it.
async fn assert_flagged(app: &TestApp, key: &str, id: &str, status: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    let p = loop {
        let p = payment(app, key, id).await;
        if !p["review"].is_null() {
            break p;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "payment {id} never flagged: {p}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(p["status"], status, "the success is not believed: {p}");
    assert_eq!(p["review"]["code"], "amount_mismatch", "{p}");
    assert!(p["completed_at"].is_null(), "{p}");
    // Asked again on its schedule: still not believed, still one event.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let p = payment(app, key, id).await;
    assert_eq!(p["status"], status, "{p}");
    assert_eq!(under_review(app, key).await, vec![id.to_string()]);
    let events = events_of(app, key, id).await;
    assert_eq!(
        events
            .iter()
            .filter(|e| *e == "collect.payment.review_required")
            .count(),
        1,
        "{events:?}"
    );
    assert!(!events.iter().any(|e| e == "collect.payment.completed"));
    assert!(counted(app, "settlement_amount_mismatch").await >= 1.0);
}

#[service_test]
async fn a_forged_pawapay_callback_never_hides_the_real_deposit() {
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(2500));
    // The deposit is taken, but its answer is lost: the outcome is unknown.
    fake.inject_for("deposits", MOOV_BJ, Fault::AcceptThenStatus(502), 1);
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let other = create(
        &app,
        &live,
        &live_payment("BJ", "moov-bj", "+2290195000002"),
    )
    .await;
    let p = create(&app, &live, &live_payment("BJ", "moov-bj", MOOV_BJ)).await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(p["status"], "pending", "{p}");
    let ours = operator_id(id);

    // During the call's unknown outcome, anyone who knows the payment id
    // (it is in every checkout link) names it in other forms, and names
    // other deposits, claiming success.
    let forged = [
        with_version(&ours, '5'),
        with_version(&ours, '7'),
        ours.to_uppercase(),
        operator_id(other["id"].as_str().unwrap()),
        uuid::Uuid::new_v4().to_string(),
    ];
    for f in &forged {
        let body = json!({"depositId": f, "status": "COMPLETED", "amount": "1500",
            "currency": "XOF", "payer": {"type": "MMO", "accountDetails":
            {"phoneNumber": "2290195000001", "provider": "MOOV_BEN"}}});
        let answer = fake
            .send_raw_callback(serde_json::to_vec(&body).unwrap())
            .await;
        assert!(matches!(answer, 200 | 400), "{f}: {answer}");
    }
    let during = payment(&app, &live, id).await;
    assert!(
        during["psp_reference"].is_null() || during["psp_reference"] == ours,
        "a callback never records the reference we follow: {during}"
    );
    assert!(
        counted(&app, "callback_invalid").await >= 3.0,
        "the forms not ours were counted"
    );
    assert_ne!(during["status"], "completed", "{during}");

    // The real deposit completes and is recorded, under the id we derived.
    let done = wait_for(&app, &live, id, "completed", Duration::from_secs(20)).await;
    assert!(
        done["psp_reference"].is_null() || done["psp_reference"] == ours,
        "{done}"
    );
    let sent = fake.ids_for("deposits", MOOV_BJ);
    assert_eq!(sent.len(), 1, "one deposit, under our id: {sent:?}");
    for f in &forged {
        assert!(
            fake.requests("deposit_status")
                .iter()
                .all(|r| !r.path.contains(f.as_str())
                    || f == &operator_id(other["id"].as_str().unwrap())),
            "never asked about the forged id {f}"
        );
    }

    // After completion, the forms again: nothing moves.
    for f in &forged[..3] {
        let body = json!({"depositId": f, "status": "FAILED",
            "failureReason": {"failureCode": "PAYER_NOT_FOUND"}});
        fake.send_raw_callback(serde_json::to_vec(&body).unwrap())
            .await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = payment(&app, &live, id).await;
    assert_eq!(after["status"], "completed");
    assert_eq!(after["completed_at"], done["completed_at"]);
    // The other payment was asked about (a hint), never completed by a claim.
    let other_now = payment(&app, &live, other["id"].as_str().unwrap()).await;
    assert!(other_now["review"].is_null(), "{other_now}");
}

#[service_test]
async fn a_pawapay_success_for_another_amount_is_flagged_for_review() {
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(300));
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "moov-bj", MOOV_BJ)).await;
    let id = p["id"].as_str().unwrap();
    fake.set_amount(&operator_id(id), "15");
    assert_flagged(&app, &live, id, "processing").await;
    // A refund or cancel of it is refused: it is not completed.
    let (status, body) = app
        .post(
            &live,
            &format!("/api/v1/collect/payments/{id}/refunds"),
            json!({}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
}

#[service_test]
async fn an_mtn_success_for_another_amount_is_flagged_for_review() {
    let fake = FakeMtn::start().await;
    fake.settle_after(Duration::from_millis(300));
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", MTN_BJ)).await;
    let id = p["id"].as_str().unwrap();
    fake.set_amount(&operator_id(id), "150000");
    assert_flagged(&app, &live, id, "processing").await;
}

#[service_test]
async fn a_wave_success_for_another_amount_is_flagged_for_review() {
    let fake = FakeWave::start().await;
    let app = wave_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("CI", "wave-ci", WAVE_CI)).await;
    let id = p["id"].as_str().unwrap();
    let session = p["psp_reference"].as_str().unwrap();
    fake.set_amount(session, "100");
    fake.customer_pays(session).await;
    assert_flagged(&app, &live, id, "awaiting_payment").await;
}

#[service_test]
async fn a_fedapay_success_for_another_amount_is_flagged_for_review() {
    let fake = FakeFedaPay::start().await;
    fake.set_outcome(CELTIIS, Outcome::Stay);
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "celtiis-bj", CELTIIS)).await;
    let id = p["id"].as_str().unwrap();
    let tx = p["psp_reference"].as_str().unwrap();
    fake.set_amount(tx, 1);
    fake.customer_pays(tx).await;
    assert_flagged(&app, &live, id, "processing").await;
}

/// A signed Wave webhook that names our payment (its `client_reference`)
/// but another checkout session is not the session we follow: it changes
/// nothing, while the real session's payment still completes the payment.
#[service_test]
async fn a_wave_webhook_for_another_session_changes_nothing() {
    let fake = FakeWave::start().await;
    let app = wave_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("CI", "wave-ci", WAVE_CI)).await;
    let id = p["id"].as_str().unwrap();
    let session = p["psp_reference"].as_str().unwrap();
    let event = json!({"id": "AE_forged", "type": "checkout.session.completed", "data": {
        "id": "cos-someone-else", "client_reference": id, "checkout_status": "complete",
        "payment_status": "succeeded", "amount": "1500", "currency": "XOF"}});
    let body = serde_json::to_vec(&event).unwrap();
    let signature = wave::signature(wave::WEBHOOK_SECRET, wave::now(), &body);
    let (status, answer) = notify(
        &app,
        "wave-ci",
        "POST",
        &[("wave-signature", signature.as_str())],
        body,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["applied"], 0, "{answer}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let now = payment(&app, &live, id).await;
    assert_eq!(now["status"], "awaiting_payment", "{now}");
    assert_eq!(now["psp_reference"], session);
    assert!(counted(&app, "callback_reference_mismatch").await >= 1.0);

    fake.customer_pays(session).await;
    wait_for(&app, &live, id, "completed", Duration::from_secs(10)).await;
}

/// MTN's callbacks are unsigned: one naming our payment in another letter
/// case, or another payment, claims nothing for ours; the request to pay we
/// sent still decides.
#[service_test]
async fn forged_mtn_callbacks_claim_nothing_for_the_payment() {
    let fake = FakeMtn::start().await;
    fake.set_outcome(MTN_BJ, Outcome::Stay);
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", MTN_BJ)).await;
    let id = p["id"].as_str().unwrap();
    for external_id in [id.to_uppercase(), uuid::Uuid::new_v4().to_string()] {
        let body = json!({"financialTransactionId": "363440463", "externalId": external_id,
            "amount": "1500", "currency": "XOF", "payer": {"partyIdType": "MSISDN",
            "partyId": "2290166000001"}, "status": "SUCCESSFUL"});
        let (status, answer) = notify(
            &app,
            "mtn-bj",
            "PUT",
            &[],
            serde_json::to_vec(&body).unwrap(),
        )
        .await;
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["applied"], 0, "{external_id}: {answer}");
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(payment(&app, &live, id).await["status"], "processing");
    fake.customer_acts(&operator_id(id), Outcome::Succeed).await;
    wait_for(&app, &live, id, "completed", Duration::from_secs(10)).await;
}

/// A pawaPay callback during the call itself (the deposit not answered yet)
/// is only a hint: the deposit's real answer is what the payment follows.
#[service_test]
async fn a_pawapay_callback_during_the_call_is_only_a_hint() {
    let fake = FakePawapay::start().await;
    fake.callbacks(Callbacks::Lost);
    fake.settle_after(Duration::from_millis(200));
    fake.inject("deposits", Fault::Slow(Duration::from_millis(1200)), 1);
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let forge = async {
        // Arrives while the deposit is still being answered.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while fake.requests("deposits").is_empty() {
            assert!(std::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let sent: Value = fake.requests("deposits")[0].json().unwrap();
        let ours = sent["depositId"].as_str().unwrap().to_string();
        for f in [with_version(&ours, '5'), ours.to_uppercase()] {
            let body = json!({"depositId": f, "status": "FAILED",
                "failureReason": {"failureCode": "PAYER_NOT_FOUND"}});
            fake.send_raw_callback(serde_json::to_vec(&body).unwrap())
                .await;
        }
        ours
    };
    let body = live_payment("BJ", "moov-bj", MOOV_BJ);
    let (p, ours) = tokio::join!(create(&app, &live, &body), forge);
    let id = p["id"].as_str().unwrap();
    assert_eq!(operator_id(id), ours);
    let done = wait_for(&app, &live, id, "completed", Duration::from_secs(15)).await;
    assert!(done["failure_code"].is_null(), "{done}");
}

/// A payout the operator reports for another amount is not believed: the
/// item stays processing, under review, and the batch does not end.
#[service_test]
async fn a_payout_success_for_another_amount_keeps_the_item_under_review() {
    let fake = FakePawapay::start().await;
    let phone = "+2290195000077";
    fake.set_outcome(phone, Outcome::Stay);
    let app = pawapay_app(&fake, |_| {}).await;
    let (key, approver) = app.maker_and_checker("Payroll");
    let batch = json!({"name": "June", "items": [{"beneficiary_name": "Awa Koné",
        "phone": phone, "amount": 2500, "currency": "XOF", "reference": "salary-june"}]});
    let resp = app
        .client
        .post(app.url("/api/v1/bulk-payments/"))
        .bearer_auth(&key)
        .header("Idempotency-Key", new_key())
        .json(&batch)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let b: Value = resp.json().await.unwrap();
    let id = b["id"].as_str().unwrap();
    let (status, v) = app
        .post(
            &approver,
            &format!("/api/v1/bulk-payments/{id}/validate/"),
            json!({}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let payout = loop {
        if let Some(r) = fake
            .records()
            .into_iter()
            .find(|r| r.phone == "2290195000077")
        {
            break r;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no payout reached pawaPay"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    fake.set_amount(&payout.id, "25000");
    fake.customer_acts(&payout.id, Outcome::Succeed).await;
    let items = format!("/api/v1/bulk-payments/{id}/items/");
    let item = loop {
        let (_, page) = app.get(&key, &items).await;
        let item = page["results"][0].clone();
        if !item["review"].is_null() {
            break item;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never flagged: {item}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(item["status"], "processing", "{item}");
    assert_eq!(item["review"]["code"], "amount_mismatch", "{item}");
    assert_eq!(item["attempts"], 1, "never sent again: {item}");
    let (_, b) = app.get(&key, &format!("/api/v1/bulk-payments/{id}/")).await;
    assert_eq!(b["status"], "processing", "{b}");
    assert!(
        metric(
            &app.metrics().await,
            "mmc_component_events_total",
            r#"component="bulk",event="settlement_amount_mismatch""#
        ) >= 1.0
    );
}

/// MTN's callbacks are unsigned and name our payment by `externalId`: forged
/// ones (our id in another case, another payment's id, a made-up id, our
/// own id claiming a success) during the request to pay, after its answer
/// was lost and after completion never decide anything; the request to pay
/// we sent, asked about by the id we derived, does.
#[service_test]
async fn forged_mtn_callbacks_at_every_moment_never_decide() {
    let fake = FakeMtn::start().await;
    fake.callbacks(crate::support::fakes::Callbacks::Lost);
    fake.set_outcome(MTN_BJ, Outcome::Stay);
    // The request to pay is taken, its answer lost: the outcome is unknown.
    fake.inject_for("requesttopay", MTN_BJ, Fault::AcceptThenStatus(500), 1);
    let app = mtn_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let other = create(&app, &live, &live_payment("BJ", "mtn-bj", "+2290166000002")).await;
    let p = create(&app, &live, &live_payment("BJ", "mtn-bj", MTN_BJ)).await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(p["status"], "pending", "{p}");
    let forge = |external_id: String, status: &str| {
        serde_json::to_vec(&json!({"financialTransactionId": "363440463",
            "externalId": external_id, "amount": "1500", "currency": "XOF",
            "payer": {"partyIdType": "MSISDN", "partyId": "2290166000001"},
            "status": status}))
        .unwrap()
    };
    let forged = [
        id.to_uppercase(),
        id_of(&other),
        uuid::Uuid::new_v4().to_string(),
        id.to_string(),
    ];
    for f in &forged {
        let (status, answer) =
            notify(&app, "mtn-bj", "PUT", &[], forge(f.clone(), "SUCCESSFUL")).await;
        assert_eq!(status, 200, "{answer}");
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let during = payment(&app, &live, id).await;
    assert!(
        matches!(during["status"].as_str(), Some("pending" | "processing")),
        "{during}"
    );
    assert!(during["completed_at"].is_null(), "{during}");
    let other_now = payment(&app, &live, other["id"].as_str().unwrap()).await;
    assert_ne!(other_now["status"], "failed", "{other_now}");

    fake.customer_acts(&operator_id(id), Outcome::Succeed).await;
    let done = wait_for(&app, &live, id, "completed", Duration::from_secs(15)).await;
    assert!(
        done["psp_reference"].is_null() || done["psp_reference"] == operator_id(id),
        "{done}"
    );
    for f in &forged {
        notify(&app, "mtn-bj", "PUT", &[], forge(f.clone(), "FAILED")).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let after = payment(&app, &live, id).await;
    assert_eq!(after["status"], "completed", "{after}");
    assert_eq!(after["completed_at"], done["completed_at"]);
    assert_eq!(fake.ids_for("requesttopay", MTN_BJ).len(), 1, "sent once");
}

/// Wave's webhooks are signed: one with a made-up signature is refused, and
/// a signed one about another session for our payment, while our session's
/// creation answer was lost, only brings the query forward; the session we
/// find by our id decides.
#[service_test]
async fn wave_webhooks_after_a_lost_answer_never_choose_the_session() {
    let fake = FakeWave::start().await;
    fake.inject("session_create", Fault::AcceptThenStatus(502), 1);
    let app = wave_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("CI", "wave-ci", WAVE_CI)).await;
    let id = p["id"].as_str().unwrap();
    assert!(p["psp_reference"].is_null(), "{p}");
    let event = |session: &str, amount: &str| {
        serde_json::to_vec(
            &json!({"id": "AE_forged", "type": "checkout.session.completed",
            "data": {"id": session, "client_reference": id, "checkout_status": "complete",
            "payment_status": "succeeded", "amount": amount, "currency": "XOF"}}),
        )
        .unwrap()
    };
    let body = event("cos-forged", "1");
    let (status, _) = notify(
        &app,
        "wave-ci",
        "POST",
        &[("wave-signature", "t=1,v1=00")],
        body.clone(),
    )
    .await;
    assert_eq!(status, 401, "a made-up signature");
    let signature = wave::signature(wave::WEBHOOK_SECRET, wave::now(), &body);
    let (status, answer) = notify(
        &app,
        "wave-ci",
        "POST",
        &[("wave-signature", signature.as_str())],
        body,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let now = payment(&app, &live, id).await;
    assert!(now["completed_at"].is_null(), "{now}");
    assert!(
        now["review"].is_null(),
        "the claim was not believed, nor taken for news: {now}"
    );
    assert!(counted(&app, "callback_reference_unverified").await >= 1.0);

    let session = fake
        .session_by_reference(id)
        .expect("our session, found by our id");
    fake.customer_pays(&session).await;
    wait_for(&app, &live, id, "completed", Duration::from_secs(15)).await;
}

/// A refund the operator reports for another amount is not believed: the
/// refund stays pending under review, the payment is not refunded, and the
/// event says so once.
#[service_test]
async fn a_refund_success_for_another_amount_is_flagged_for_review() {
    let fake = FakePawapay::start().await;
    fake.settle_after(Duration::from_millis(200));
    let app = pawapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "moov-bj", MOOV_BJ)).await;
    let id = p["id"].as_str().unwrap();
    wait_for(&app, &live, id, "completed", Duration::from_secs(10)).await;
    // The refund is taken, then pawaPay's records say another amount.
    fake.settle_after(Duration::from_millis(1500));
    let (status, r) = app
        .post(
            &live,
            &format!("/api/v1/collect/payments/{id}/refunds"),
            json!({"amount": 1000}),
        )
        .await;
    assert!(matches!(status, 200 | 201), "{r}");
    let refund_id = id_of(&r);
    let record = fake
        .records()
        .into_iter()
        .find(|r| r.kind == crate::support::fakes::pawapay::Kind::Refund)
        .expect("the refund reached pawaPay");
    fake.set_amount(&record.id, "1500");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let events = events_of(&app, &live, id).await;
        if events.iter().any(|e| e == "collect.refund.review_required") {
            assert!(
                !events.iter().any(|e| e == "collect.refund.completed"),
                "{events:?}"
            );
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never flagged: {events:?}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (_, refund) = app
        .get(&live, &format!("/api/v1/collect/refunds/{refund_id}"))
        .await;
    assert_eq!(refund["status"], "pending", "{refund}");
    assert_eq!(refund["review"]["code"], "amount_mismatch", "{refund}");
    let paid = payment(&app, &live, id).await;
    assert_eq!(paid["status"], "completed", "not refunded: {paid}");
    assert!(counted(&app, "settlement_amount_mismatch").await >= 1.0);
}
