//! `fedapay` (FedaPay v1, the route for Celtiis and Coris Money) against the
//! fake FedaPay.

use std::time::Duration;

use mmc_runtime::bindings::adapter_types::*;
use serde_json::{Value, json};

use crate::registry::{self, AtOperator, Entry, Harness, Op};
use crate::support::fakes::fedapay::{self, FakeFedaPay};
use crate::support::fakes::{Callbacks, Fault, Outcome, REFUSED_BECAUSE_OF_US};
use crate::support::fakes::{Plumbing, normal_key};
use crate::support::*;
use crate::*;
use futures::future::BoxFuture;
use mmc_config::ComponentConfig;
use mmc_test_kit::service_test;

const CELTIIS: &str = "+2290140000001";
const CORIS: &str = "+2290122000001";
const SERVED: &[&str] = &["celtiis-bj", "coris-bj"];

pub(crate) async fn fedapay_app(
    fake: &FakeFedaPay,
    tweak: impl FnOnce(&mut mmc_config::ComponentConfig),
) -> TestApp {
    let mut component = fake.component_config();
    tweak(&mut component);
    let app = app_with_adapter("fedapay", SERVED, component, |_| {}).await;
    // One URL in FedaPay's dashboard for every operator it serves.
    fake.set_callback_url(&format!(
        "{}/api/v1/psp/celtiis-bj/callback?environment=live",
        app.base
    ));
    app
}

/// A payment id as the service makes them: a UUIDv7 of now.
fn uuid_v7() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let time = format!("{ms:012x}");
    let rand = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "{}-{}-7{}-8{}-{}",
        &time[..8],
        &time[8..],
        &rand[..3],
        &rand[3..6],
        &rand[6..18]
    )
}

fn is_fedapay_id(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
}

#[service_test]
async fn celtiis_push_completes_by_the_read_a_signed_webhook_brings_with_the_protocol_followed() {
    let fake = FakeFedaPay::start().await;
    fake.settle_after(Duration::from_millis(150));
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "celtiis-bj", CELTIIS)).await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(p["status"], "processing", "{p}");
    assert!(is_fedapay_id(&p["psp_reference"]), "{p}");
    let tx = p["psp_reference"].as_str().unwrap();

    let bearer = format!("Bearer {}", fedapay::SECRET_KEY);
    let created = fake.requests("transaction_create");
    assert_eq!(created.len(), 1);
    assert_eq!(created[0].header("Authorization"), Some(bearer.as_str()));
    let body = created[0].json().unwrap();
    assert_eq!(body["amount"], 1500, "a whole number, not a string");
    assert_eq!(body["currency"], json!({"iso": "XOF"}));
    assert_eq!(body["description"], "Order 42");
    assert_eq!(body["custom_metadata"], json!({"mmc_id": id}));
    assert_eq!(
        body["callback_url"],
        format!("{}/checkout/{id}", app.base),
        "FedaPay's callback_url is where the customer returns"
    );
    assert_eq!(
        body["customer"]["phone_number"],
        json!({"number": CELTIIS, "country": "bj"})
    );
    let tokens = fake.requests("token");
    assert_eq!(tokens.len(), 1);
    assert_eq!(tokens[0].path, format!("/v1/transactions/{tx}/token"));
    let pushes = fake.requests("push");
    assert_eq!(pushes.len(), 1);
    assert_eq!(pushes[0].path, "/v1/sbin", "Celtiis' no-redirect mode");
    assert_eq!(pushes[0].header("Authorization"), Some(bearer.as_str()));
    let push = pushes[0].json().unwrap();
    assert_eq!(push["token"], fake.transaction(tx).unwrap().tokens[0]);
    assert_eq!(
        push["phone_number"],
        json!({"number": CELTIIS, "country": "bj"})
    );

    let done = wait_for(&app, &live, id, "completed", Duration::from_secs(10)).await;
    assert!(done["completed_at"].is_string());
    assert!(fake.transaction(tx).unwrap().paid());
    assert!(
        !fake.requests("transaction_get").is_empty(),
        "the webhook is a hint: the transaction was read back"
    );
    // transaction.created (ignored: says nothing final) and transaction.approved.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let answers: Vec<u16> = fake.callbacks_sent().iter().map(|(_, s)| *s).collect();
    assert_eq!(answers, vec![200, 200], "{answers:?}");
}

#[service_test]
async fn celtiis_push_completes_by_polling_when_the_webhook_is_lost() {
    let fake = FakeFedaPay::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.callbacks(Callbacks::Lost);
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "celtiis-bj", CELTIIS)).await;
    let id = p["id"].as_str().unwrap();
    let tx = p["psp_reference"].as_str().unwrap().to_string();
    wait_for(&app, &live, id, "completed", Duration::from_secs(8)).await;
    let polls = fake.requests("transaction_get");
    assert!(!polls.is_empty());
    assert!(
        polls
            .iter()
            .all(|r| r.path == format!("/v1/transactions/{tx}"))
    );
    assert!(fake.callbacks_sent().is_empty());
}

#[service_test]
async fn declined_push_fails_with_the_mapped_reason_and_refusals_fail_at_once() {
    let fake = FakeFedaPay::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.set_outcome("+2290140000002", Outcome::Fail("INSUFFICIENT_FUND_ERROR"));
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(
        &app,
        &live,
        &live_payment("BJ", "celtiis-bj", "+2290140000002"),
    )
    .await;
    let p = wait_for(
        &app,
        &live,
        p["id"].as_str().unwrap(),
        "failed",
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(p["failure_code"], "insufficient_funds", "{p}");
    assert!(
        p["failure_message"]
            .as_str()
            .unwrap()
            .contains("INSUFFICIENT_FUND_ERROR"),
        "{p}"
    );

    // A mode FedaPay does not list for XOF: closed, refused before anything is sent.
    let fake = FakeFedaPay::start().await;
    let unknown_mode = |c: &mut mmc_config::ComponentConfig| {
        c.settings
            .insert("mode.celtiis-bj".into(), "celtiis_push".into());
    };
    let app = fedapay_app(&fake, unknown_mode).await;
    let live = app.live_key("Shop");
    let (status, err) = app
        .create(
            &live,
            &new_key(),
            &live_payment("BJ", "celtiis-bj", CELTIIS),
        )
        .await;
    assert_eq!(
        (status, err["error"]["code"].as_str()),
        (400, Some("operator_unavailable")),
        "{err}"
    );
    assert!(fake.requests("push").is_empty() && fake.transactions().is_empty());

    // Where FedaPay's list cannot be had (the operator table stands), FedaPay
    // refuses the push itself (400): the payment fails, nothing moved.
    let fake = FakeFedaPay::start().await;
    fake.inject("currencies", Fault::Status(503), 100);
    let app = fedapay_app(&fake, unknown_mode).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "celtiis-bj", CELTIIS)).await;
    assert_eq!(p["status"], "failed", "{p}");
    assert_eq!(p["failure_code"], "operator_refused", "{p}");
    assert!(
        p["failure_message"]
            .as_str()
            .unwrap()
            .contains("Invalid payment method"),
        "{p}"
    );
    assert_eq!(fake.requests("push")[0].path, "/v1/celtiis_push");
    assert!(
        fake.transactions()
            .iter()
            .all(|t| t.pushes == 0 && !t.paid())
    );
}

#[service_test]
async fn forged_stale_or_unsigned_webhooks_get_401() {
    let fake = FakeFedaPay::start().await;
    fake.set_outcome(CELTIIS, Outcome::Stay);
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "celtiis-bj", CELTIIS)).await;
    let id = p["id"].as_str().unwrap();
    let tx = p["psp_reference"].as_str().unwrap().to_string();

    let now = fedapay::now();
    let name = "transaction.approved";
    assert_eq!(
        fake.notify_signed_with(name, &tx, "wh_live_not_the_secret", now)
            .await,
        401
    );
    assert_eq!(
        fake.notify_signed_with(name, &tx, fedapay::WEBHOOK_SECRET, now - 600)
            .await,
        401,
        "replayed"
    );
    // An event claiming the payment approved: only FedaPay's signature makes it true.
    let mut event: Value = serde_json::from_slice(&fake.event(name, &tx)).unwrap();
    event["entity"]["status"] = json!("approved");
    let body = serde_json::to_vec(&event).unwrap();
    assert_eq!(fake.send_webhook(body.clone(), None).await, 401);
    assert_eq!(
        fake.send_webhook(body.clone(), Some("s=abc".into())).await,
        401
    );
    // Signed over other bytes (re-serialised JSON, say): not the raw body.
    let reserialised =
        serde_json::to_vec_pretty(&serde_json::from_slice::<Value>(&body).unwrap()).unwrap();
    let other = fedapay::signature(fedapay::WEBHOOK_SECRET, now, &reserialised);
    assert_eq!(fake.send_webhook(body.clone(), Some(other)).await, 401);
    // The `v1` scheme is not FedaPay's (`s`).
    let v1 = fedapay::signature(fedapay::WEBHOOK_SECRET, now, &body).replace(",s=", ",v1=");
    assert_eq!(fake.send_webhook(body.clone(), Some(v1)).await, 401);
    let (status, err) = notify(&app, "coris-bj", "POST", &[], b"{}".to_vec()).await;
    assert_eq!(status, 401);
    assert_eq!(err["error"]["code"], "callback_unauthenticated");
    assert_eq!(payment(&app, &live, id).await["status"], "processing");

    // The genuine one passes, as a hint: FedaPay, asked, still says pending.
    let good = fedapay::signature(fedapay::WEBHOOK_SECRET, now, &body);
    let reads = fake.requests("transaction_get").len();
    assert_eq!(fake.send_webhook(body, Some(good)).await, 200);
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while fake.requests("transaction_get").len() == reads {
        assert!(
            std::time::Instant::now() < deadline,
            "FedaPay was never asked"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(payment(&app, &live, id).await["status"], "processing");
    // Approved at FedaPay: the next read records it.
    fake.set_status(&tx, "approved", None);
    wait_for(&app, &live, id, "completed", Duration::from_secs(20)).await;
}

#[service_test]
async fn unknown_push_outcomes_stay_pending_and_polling_finds_the_one_transaction() {
    let fake = FakeFedaPay::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.callbacks(Callbacks::Lost);
    let app = fedapay_app(&fake, |c| {
        c.settings.insert("timeout_ms".into(), "400".into());
    })
    .await;
    let live = app.live_key("Shop");
    let faults = [
        ("+2290140000011", Fault::Slow(Duration::from_millis(1500))),
        ("+2290140000012", Fault::AcceptThenStatus(500)),
        ("+2290140000013", Fault::AcceptThenReset),
        ("+2290140000014", Fault::AcceptThenGarbage),
    ];
    let mut ids = Vec::new();
    for (phone, fault) in &faults {
        fake.inject_for("push", phone, fault.clone(), 1);
        let p = create(&app, &live, &live_payment("BJ", "celtiis-bj", phone)).await;
        // FedaPay may have pushed it: unknown, so in progress, not failed.
        assert_eq!(p["status"], "pending", "{fault:?}: {p}");
        assert!(p["failure_code"].is_null(), "{fault:?}: {p}");
        assert!(p["psp_reference"].is_null(), "{fault:?}: {p}");
        assert_eq!(fake.faults_left("push", phone), 0, "{fault:?} hit");
        ids.push(id_of(&p));
    }
    for (id, (phone, fault)) in ids.iter().zip(&faults) {
        wait_for(&app, &live, id, "completed", Duration::from_secs(12)).await;
        // Found by our id: the one transaction FedaPay made, pushed once.
        let mine = fake.transactions_for(id);
        assert_eq!(mine.len(), 1, "{fault:?}");
        assert!(mine[0].paid() && mine[0].pushes == 1, "{fault:?}");
        assert_eq!(fake.ids_for("push", phone).len(), 1, "{fault:?}");
        assert!(
            fake.requests("transaction_search")
                .iter()
                .any(|r| r.query_param("search").as_deref() == Some(id)),
            "{fault:?}"
        );
    }
}

/// FedaPay does not document how its search matches: when it does not look
/// into `custom_metadata`, the transaction list (newest first, read back to
/// the payment's creation) finds ours.
#[service_test]
async fn a_lost_push_answer_is_found_in_the_list_when_the_search_misses_it() {
    let fake = FakeFedaPay::start().await;
    fake.settle_after(Duration::from_millis(100));
    fake.callbacks(Callbacks::Lost);
    fake.search_ignores_custom_metadata();
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    // Other payments first, so ours is not alone in the list.
    for n in 1..=3 {
        let phone = format!("+229014000005{n}");
        create(&app, &live, &live_payment("BJ", "celtiis-bj", &phone)).await;
    }
    fake.inject_for("push", "+2290140000059", Fault::AcceptThenReset, 1);
    let p = create(
        &app,
        &live,
        &live_payment("BJ", "celtiis-bj", "+2290140000059"),
    )
    .await;
    let id = p["id"].as_str().unwrap();
    assert_eq!(p["status"], "pending", "{p}");
    wait_for(&app, &live, id, "completed", Duration::from_secs(10)).await;
    assert_eq!(fake.transactions_for(id).len(), 1);
    assert!(!fake.requests("transaction_list").is_empty());
}

#[service_test]
async fn failures_before_the_push_are_not_sent_and_fail_the_payment() {
    let fake = FakeFedaPay::start().await;
    let app = fedapay_app(&fake, |c| {
        c.settings.insert("timeout_ms".into(), "400".into());
    })
    .await;
    let live = app.live_key("Shop");
    // Creating or tokenising moves no money: whatever FedaPay did, nobody
    // can pay a transaction that was never pushed nor given to the customer.
    for (endpoint, fault) in [
        ("transaction_create", Fault::Status(503)),
        ("transaction_create", Fault::AcceptThenStatus(500)),
        ("token", Fault::Slow(Duration::from_millis(1500))),
        ("token", Fault::AcceptThenGarbage),
    ] {
        fake.inject(endpoint, fault.clone(), 1);
        let p = create(&app, &live, &live_payment("BJ", "celtiis-bj", CELTIIS)).await;
        assert_eq!(p["status"], "failed", "{endpoint} {fault:?}: {p}");
        assert_eq!(
            p["failure_code"], "operator_error",
            "{endpoint} {fault:?}: {p}"
        );
    }
    assert!(fake.requests("push").is_empty());
    assert!(
        fake.transactions()
            .iter()
            .all(|t| t.pushes == 0 && !t.paid())
    );

    // A wrong secret key is refused because of us, not by the customer.
    let fake = FakeFedaPay::start().await;
    let app = fedapay_app(&fake, |c| {
        c.secrets
            .insert("secret_key".into(), "sk_live_revoked".into());
    })
    .await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "celtiis-bj", CELTIIS)).await;
    assert_eq!(p["status"], "failed", "{p}");
    assert_eq!(p["failure_code"], "operator_error", "{p}");
    assert!(fake.transactions().is_empty());
}

#[service_test]
async fn cancel_of_a_pending_push_is_refused_then_the_payment_completes() {
    let fake = FakeFedaPay::start().await;
    fake.set_outcome(CELTIIS, Outcome::Stay);
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "celtiis-bj", CELTIIS)).await;
    let id = p["id"].as_str().unwrap();
    let tx = p["psp_reference"].as_str().unwrap().to_string();
    let cancel = format!("/api/v1/collect/payments/{id}/cancel");
    let (status, err) = app.post(&live, &cancel, json!({})).await;
    // FedaPay documents no way to withdraw a transaction: it can still be approved.
    assert_eq!(status, 409, "{err}");
    assert_eq!(err["error"]["code"], "payment_not_cancellable");
    assert_eq!(payment(&app, &live, id).await["status"], "processing");
    assert_eq!(fake.customer_pays(&tx).await, vec![200]);
    wait_for(&app, &live, id, "completed", Duration::from_secs(10)).await;

    // Declined at FedaPay meanwhile (webhook lost): the cancel learns it.
    fake.callbacks(Callbacks::Lost);
    let p = create(&app, &live, &live_payment("BJ", "celtiis-bj", CELTIIS)).await;
    let id = p["id"].as_str().unwrap();
    fake.customer_acts(
        p["psp_reference"].as_str().unwrap(),
        Outcome::Fail("DECLINED_BY_CUSTOMER"),
    )
    .await;
    let cancel = format!("/api/v1/collect/payments/{id}/cancel");
    let (status, p) = app.post(&live, &cancel, json!({})).await;
    assert_eq!(status, 200, "{p}");
    assert_eq!(p["status"], "cancelled", "{p}");
}

#[service_test]
async fn coris_goes_through_fedapays_page_and_completes_by_webhook() {
    let fake = FakeFedaPay::start().await;
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "coris-bj", CORIS)).await;
    let id = p["id"].as_str().unwrap();
    // FedaPay documents no push or OTP for Coris Money: its page.
    assert_eq!(p["status"], "awaiting_payment", "{p}");
    assert_eq!(p["next_action"]["type"], "redirect_to_checkout", "{p}");
    let tx = p["psp_reference"].as_str().unwrap().to_string();
    let token = &fake.transaction(&tx).unwrap().tokens[0];
    assert_eq!(
        p["checkout_url"],
        format!("{}{token}", fedapay::PAGE_BASE),
        "{p}"
    );
    assert!(fake.requests("push").is_empty());
    assert_eq!(fake.customer_pays(&tx).await, vec![200]);
    wait_for(&app, &live, id, "completed", Duration::from_secs(10)).await;
}

#[service_test]
async fn fedapay_payouts_refunds_and_signatures_at_adapter_level() {
    let fake = FakeFedaPay::start().await;
    fake.settle_after(Duration::from_millis(100));
    let adapter = Direct::load("fedapay", fake.component_config());
    let ops = adapter.operators();
    let slugs: Vec<&str> = ops.iter().map(|o| o.slug.as_str()).collect();
    assert_eq!(slugs, SERVED);
    assert!(ops.iter().all(|o| o.approval_window_ms == 30 * 60 * 1000));

    let mut req = initiate_request("celtiis-bj", "BJ", CELTIIS);
    req.payment_id = uuid_v7(); // as the service makes them
    let id = req.payment_id.clone();
    let Ok(Initiated::AwaitingCustomer(tx)) = adapter.initiate(req).await else {
        panic!("a push");
    };
    let paid = operation(&id, "celtiis-bj", Some(tx.clone()), CELTIIS, 1500);
    let status = adapter
        .settled(Duration::from_secs(3), || adapter.status(paid.clone()))
        .await;
    assert_eq!(completed(&status), Some(1500));
    let by_id = operation(&id, "celtiis-bj", None, CELTIIS, 1500);
    assert_eq!(completed(&adapter.status(by_id).await.unwrap()), Some(1500));
    let nobody = operation(&new_key(), "celtiis-bj", None, CELTIIS, 1500);
    assert_eq!(adapter.status(nobody).await.unwrap(), PspStatus::NotFound);
    // A payment id (UUIDv7) the search misses: not found once the list was
    // read back past its creation, never before.
    fake.search_ignores_custom_metadata();
    let by_id = operation(&id, "celtiis-bj", None, CELTIIS, 1500);
    assert_eq!(completed(&adapter.status(by_id).await.unwrap()), Some(1500));
    let nobody = operation(&uuid_v7(), "celtiis-bj", None, CELTIIS, 1500);
    assert_eq!(adapter.status(nobody).await.unwrap(), PspStatus::NotFound);
    let lists = fake.requests("transaction_list");
    assert_eq!(
        lists.last().unwrap().query_param("page").as_deref(),
        Some("2"),
        "read to the end of the list"
    );
    fake.inject("transaction_list", Fault::Status(503), 1);
    let nobody = operation(&uuid_v7(), "celtiis-bj", None, CELTIIS, 1500);
    let err = adapter.status(nobody).await.unwrap_err();
    assert!(matches!(err, AdapterError::Unavailable(_)), "{err:?}");

    // No refund API is documented.
    let err = adapter
        .refund(RefundRequest {
            refund_id: new_key(),
            payment: paid.clone(),
            amount: 1500,
            reason: "duplicate".into(),
        })
        .await
        .unwrap_err();
    assert!(matches!(err, AdapterError::NotSupported(_)), "{err:?}");

    // Payouts: created (nothing sent), then started; found by our id too.
    let started = adapter
        .payout(payout_request("celtiis-bj", "po-1", "+2290140000031"))
        .await
        .unwrap();
    assert_eq!(started.status, PspStatus::Pending);
    let created = fake.requests("payout_create");
    let body = created[0].json().unwrap();
    assert_eq!(body["amount"], 2500);
    assert_eq!(body["mode"], "sbin");
    assert_eq!(body["currency"], json!({"iso": "XOF"}));
    assert_eq!(body["custom_metadata"], json!({"mmc_id": "po-1"}));
    assert_eq!(body["customer"]["firstname"], "Awa");
    assert_eq!(body["customer"]["lastname"], "Koné");
    assert_eq!(
        body["customer"]["phone_number"],
        json!({"number": "+2290140000031", "country": "bj"})
    );
    let start = fake.requests("payout_start")[0].json().unwrap();
    assert_eq!(
        start,
        json!({"payouts": [{"id": started.psp_reference.parse::<u64>().unwrap(), "send_now": true}]})
    );
    let op = operation(
        "po-1",
        "celtiis-bj",
        Some(started.psp_reference.clone()),
        "+2290140000031",
        2500,
    );
    let status = adapter
        .settled(Duration::from_secs(3), || adapter.payout_status(op.clone()))
        .await;
    assert_eq!(completed(&status), Some(2500));
    let op = operation("po-1", "celtiis-bj", None, "+2290140000031", 2500);
    assert_eq!(
        completed(&adapter.payout_status(op).await.unwrap()),
        Some(2500),
    );
    assert!(fake.payout(&started.psp_reference).unwrap().sent());
    // The search misses it (see above): FedaPay's payout list, read to its end, has it.
    assert!(!fake.requests("payout_list").is_empty());

    fake.set_outcome("+2290140000032", Outcome::Fail("ACCOUNT_NOT_FOUND"));
    let started = adapter
        .payout(payout_request("celtiis-bj", "po-2", "+2290140000032"))
        .await
        .unwrap();
    let op = operation(
        "po-2",
        "celtiis-bj",
        Some(started.psp_reference),
        "+2290140000032",
        2500,
    );
    let status = adapter
        .settled(Duration::from_secs(3), || adapter.payout_status(op.clone()))
        .await;
    assert_eq!(failed(status).code, "recipient_not_found");

    // A start whose answer is lost: pending under FedaPay's id, which is
    // then followed; found by our id too.
    fake.inject_for("payout_start", "+2290140000033", Fault::AcceptThenReset, 1);
    let lost = adapter
        .payout(payout_request("celtiis-bj", "po-3", "+2290140000033"))
        .await
        .unwrap();
    assert_eq!(lost.status, PspStatus::Pending);
    for reference in [Some(lost.psp_reference.clone()), None] {
        let op = operation("po-3", "celtiis-bj", reference, "+2290140000033", 2500);
        let status = adapter
            .settled(Duration::from_secs(3), || adapter.payout_status(op.clone()))
            .await;
        assert_eq!(completed(&status), Some(2500));
    }
    // A create that failed sent nothing.
    fake.inject("payout_create", Fault::AcceptThenStatus(502), 1);
    let err = adapter
        .payout(payout_request("celtiis-bj", "po-4", "+2290140000034"))
        .await
        .unwrap_err();
    assert!(matches!(err, AdapterError::NotSent(_)), "{err:?}");
    assert!(
        fake.payouts()
            .iter()
            .all(|p| p.phone != "2290140000034" || p.status == "pending")
    );
    // FedaPay refuses a fourth payout to one number within 24 hours.
    for n in ["po-5", "po-6"] {
        adapter
            .payout(payout_request("celtiis-bj", n, "+2290140000031"))
            .await
            .unwrap();
    }
    let refused = adapter
        .payout(payout_request("celtiis-bj", "po-7", "+2290140000031"))
        .await
        .unwrap();
    assert_eq!(failed(refused.status).code, "operator_refused");
    // Coris goes through FedaPay's page: no payout mode unless configured.
    let err = adapter
        .payout(payout_request("coris-bj", "po-8", CORIS))
        .await
        .unwrap_err();
    assert!(matches!(err, AdapterError::NotSupported(_)), "{err:?}");

    // Webhooks: a final state is reported with our id; a pending event and
    // other objects are acknowledged and ignored; only the `s` signature counts.
    let inbound = |body: Vec<u8>, signature: String| Inbound {
        operator: "coris-bj".into(),
        environment: "live".into(),
        method: "POST".into(),
        headers: vec![("x-fedapay-signature".into(), signature)],
        body,
    };
    let now = fedapay::now();
    let body = fake.event("transaction.approved", &tx);
    let good = fedapay::signature(fedapay::WEBHOOK_SECRET, now, &body);
    let rotated = format!(
        "t={now},s={},{}",
        "0".repeat(64),
        &good[good.find("s=").unwrap()..]
    );
    let updates = adapter
        .parse_callback(inbound(body.clone(), rotated))
        .await
        .unwrap();
    assert_eq!(
        updates,
        vec![CallbackUpdate {
            kind: SubjectKind::Payment,
            id: Some(id.clone()),
            psp_reference: Some(tx.clone()),
            status: PspStatus::Completed(Settled {
                amount: fake.transaction(&tx).unwrap().amount.to_string(),
                currency: "XOF".into(),
                party: None,
            }),
        }]
    );
    let pending = serde_json::to_vec(&json!({"id": 1, "name": "transaction.created",
        "entity": {"id": 5, "status": "pending", "custom_metadata": {"mmc_id": "x"}}}))
    .unwrap();
    let header = fedapay::signature(fedapay::WEBHOOK_SECRET, now, &pending);
    assert_eq!(
        adapter
            .parse_callback(inbound(pending, header))
            .await
            .unwrap(),
        vec![]
    );
    let customer = serde_json::to_vec(&json!({"id": 2, "name": "customer.created",
        "entity": {"id": 9, "email": "a@b.c"}}))
    .unwrap();
    let header = fedapay::signature(fedapay::WEBHOOK_SECRET, now, &customer);
    assert_eq!(
        adapter
            .parse_callback(inbound(customer, header))
            .await
            .unwrap(),
        vec![]
    );
    let stale = fedapay::signature(fedapay::WEBHOOK_SECRET, now - 400, &body);
    let err = adapter
        .parse_callback(inbound(body.clone(), stale))
        .await
        .unwrap_err();
    assert!(matches!(err, AdapterError::Unauthenticated(_)), "{err:?}");
    let mut c = fake.component_config();
    c.secrets.remove("webhook_secret");
    let unconfigured = Direct::load("fedapay", c);
    let err = unconfigured
        .parse_callback(inbound(body.clone(), good))
        .await
        .unwrap_err();
    assert!(matches!(err, AdapterError::Unauthenticated(_)), "{err:?}");

    // The operators setting picks among the operators FedaPay documents.
    let mut c = fake.component_config();
    c.settings
        .insert("operators".into(), "wave-ci, moov-tg, celtiis-bj".into());
    c.settings
        .insert("approval_window_ms".into(), "600000".into());
    let other = Direct::load("fedapay", c);
    let ops = other.operators();
    let slugs: Vec<&str> = ops.iter().map(|o| o.slug.as_str()).collect();
    assert_eq!(slugs, vec!["celtiis-bj", "moov-tg", "wave-ci"]);
    assert!(ops.iter().all(|o| o.approval_window_ms == 600_000));
    let Ok(Initiated::Redirect(r)) = other
        .initiate(initiate_request("wave-ci", "CI", "+2250700000001"))
        .await
    else {
        panic!("Wave through FedaPay is its page");
    };
    assert!(r.url.starts_with(fedapay::PAGE_BASE));
    let Ok(Initiated::AwaitingCustomer(_)) = other
        .initiate(initiate_request("moov-tg", "TG", "+22899000001"))
        .await
    else {
        panic!("Moov Togo is pushed");
    };
    assert_eq!(fake.requests("push").last().unwrap().path, "/v1/moov_tg");
    let mut no_phone = initiate_request("moov-tg", "TG", "+22899000001");
    no_phone.phone = None;
    let Ok(Initiated::Refused(f)) = other.initiate(no_phone).await else {
        panic!("a push needs a phone");
    };
    assert_eq!(f.code, "phone_required");
}

/// Refused because of us: FedaPay's 401, 403, 404 and 429 to the push (the
/// call that asks the customer) performed nothing and are not the
/// customer's doing. The payment fails with `operator_error` and FedaPay's
/// message, and the host counts each as a `rejected` call of `fedapay`.
#[service_test]
async fn fedapay_push_refusals_caused_by_us_are_operator_errors_counted_per_adapter() {
    let fake = FakeFedaPay::start().await;
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    for (status, says) in REFUSED_BECAUSE_OF_US.into_iter().zip([
        "Unauthenticated",
        "unauthorized",
        "Not Found",
        "Too Many Attempts",
    ]) {
        fake.inject("push", fedapay::refusal(status), 1);
        let p = create(&app, &live, &live_payment("BJ", "celtiis-bj", CELTIIS)).await;
        assert_eq!(p["status"], "failed", "{status}: {p}");
        assert_eq!(p["failure_code"], "operator_error", "{status}: {p}");
        let message = p["failure_message"].as_str().unwrap();
        assert!(
            message.contains(&status.to_string()) && message.contains(says),
            "{status}: FedaPay's status and message are kept: {message}"
        );
        let ours = fake.transactions_for(p["id"].as_str().unwrap());
        assert_eq!(ours.len(), 1, "{status}: created (no money moves there)");
        assert!(
            ours.iter().all(|t| t.pushes == 0 && !t.paid()),
            "{status}: nothing was asked of the customer"
        );
    }
    assert_eq!(fake.requests("push").len(), 4);
    assert_eq!(
        metric(
            &app.metrics().await,
            "mmc_adapter_calls_total",
            r#"adapter="fedapay",operation="initiate",outcome="rejected""#,
        ),
        4.0
    );
}

/// The fake FedaPay delivers a webhook by its rule (`fedapay::DELIVERY`):
/// an answer that is not a 2xx, or none within 3 s, is followed by another
/// attempt of the same event, signed anew, up to 3 in all.
#[service_test]
async fn the_fake_fedapay_tries_a_webhook_again_until_it_is_acknowledged() {
    use crate::support::fakes::{Answer, Receiver};
    let fake = FakeFedaPay::start().await;
    fake.set_outcome(CELTIIS, Outcome::Stay);
    let receiver = Receiver::start(
        "transaction.approved",
        vec![
            Answer::Late(fedapay::DELIVERY.patience + Duration::from_millis(500)),
            Answer::Status(500),
            Answer::Status(200),
        ],
    )
    .await;
    fake.set_callback_url(&receiver.url());
    let adapter = Direct::load("fedapay", fake.component_config());
    let Initiated::AwaitingCustomer(tx) = adapter
        .initiate(initiate_request("celtiis-bj", "BJ", CELTIIS))
        .await
        .unwrap()
    else {
        panic!("a Celtiis payment is a push")
    };
    assert_eq!(fake.customer_pays(&tx).await, vec![0, 500, 200]);
    let got = receiver.received();
    assert_eq!(got.len(), 3);
    for r in &got {
        assert_eq!(r.body, got[0].body, "the same event each time");
        assert!(r.header("X-FEDAPAY-SIGNATURE").is_some());
    }
}

/// FedaPay lists the modes an account can use per currency
/// (`GET /v1/currencies`): an operator whose push mode it does not list for
/// XOF is `closed` in the catalogue and a payment to it is refused before
/// anything is sent; the page-paid operator stays open (the page offers what
/// is listed). With the mode listed, it is open.
#[service_test]
async fn an_operator_whose_mode_fedapay_does_not_list_is_closed_and_refused_before_sending() {
    let fake = FakeFedaPay::start().await;
    fake.set_xof_modes(&["mtn_open", "moov"]); // no `sbin`: Celtiis is off on this account
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let (status, body) = app
        .get(&live, "/api/v1/collect/payments/operators/?country=BJ")
        .await;
    assert_eq!(status, 200, "{body}");
    let status_of = |slug: &str| {
        body["data"][0]["operators"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["slug"] == slug)
            .map(|o| o["status"].clone())
    };
    assert_eq!(status_of("celtiis-bj"), Some(json!("closed")), "{body}");
    assert_eq!(status_of("coris-bj"), Some(json!("operational")), "{body}");
    assert!(!fake.requests("currencies").is_empty(), "asked FedaPay");
    let (status, err) = app
        .create(
            &live,
            &new_key(),
            &live_payment("BJ", "celtiis-bj", CELTIIS),
        )
        .await;
    assert_eq!(status, 400, "{err}");
    assert_eq!(err["error"]["code"], "operator_unavailable", "{err}");
    assert!(
        fake.requests("transaction_create").is_empty(),
        "nothing sent"
    );

    // Another account lists `sbin`: open, and paid.
    let fake = FakeFedaPay::start().await;
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "celtiis-bj", CELTIIS)).await;
    assert_eq!(p["status"], "processing", "{p}");
}

/// FedaPay takes no idempotency key for payouts: a second request under
/// the same payout id (the first one's answer lost) finds the first payout
/// by our id and reports it, or starts it if it was only created; it never
/// creates another.
#[service_test]
async fn a_repeated_payout_finds_the_first_one_and_never_creates_another() {
    let fake = FakeFedaPay::start().await;
    let adapter = Direct::load("fedapay", fake.component_config());
    let phone = "+2290140000041";
    // The start's answer is lost: the payout was created and started
    // anyway. Its outcome is unknown, but FedaPay's id is known: it is
    // followed by that id from now on, never looked for again by ours.
    fake.inject("payout_start", Fault::AcceptThenStatus(502), 1);
    let lost = adapter
        .payout(payout_request("celtiis-bj", "po-41", phone))
        .await
        .unwrap();
    assert!(matches!(lost.status, PspStatus::Pending), "{lost:?}");
    let again = adapter
        .payout(payout_request("celtiis-bj", "po-41", phone))
        .await
        .unwrap();
    assert_eq!(
        fake.requests("payout_create").len(),
        1,
        "never created twice"
    );
    assert_eq!(
        fake.requests("payout_start").len(),
        1,
        "never started twice"
    );
    let first = fake.payouts().into_iter().next().unwrap();
    assert_eq!(lost.psp_reference, first.id.to_string());
    assert_eq!(again.psp_reference, first.id.to_string());

    // Created, its start refused before any work (a 503 cannot say so:
    // pending, unknown): a repeated payout starts that one.
    fake.inject("payout_start", Fault::Status(503), 1);
    let phone = "+2290140000042";
    let unknown = adapter
        .payout(payout_request("celtiis-bj", "po-42", phone))
        .await
        .unwrap();
    assert_eq!(unknown.status, PspStatus::Pending);
    let again = adapter
        .payout(payout_request("celtiis-bj", "po-42", phone))
        .await
        .unwrap();
    let made: Vec<_> = fake
        .payouts()
        .into_iter()
        .filter(|p| p.our_id().as_deref() == Some("po-42"))
        .collect();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(again.psp_reference, made[0].id.to_string());
    assert_eq!(fake.requests("payout_start").len(), 3);
    assert!(
        made[0].started_at.is_some(),
        "the created payout was started"
    );
}

/// A signed FedaPay webhook about another transaction carrying our id in
/// its metadata is not the transaction we follow: nothing changes, and the
/// real one's approval still completes the payment.
#[service_test]
async fn a_webhook_for_another_transaction_with_our_id_changes_nothing() {
    let fake = FakeFedaPay::start().await;
    fake.set_outcome(CELTIIS, Outcome::Stay);
    let app = fedapay_app(&fake, |_| {}).await;
    let live = app.live_key("Shop");
    let p = create(&app, &live, &live_payment("BJ", "celtiis-bj", CELTIIS)).await;
    let id = p["id"].as_str().unwrap();
    let ours = p["psp_reference"].as_str().unwrap().to_string();
    // Another transaction on the account naming our payment.
    let other: Value = reqwest::Client::new()
        .post(format!("{}/v1/transactions", fake.base_url()))
        .bearer_auth(fedapay::SECRET_KEY)
        .json(
            &json!({"description": "x", "amount": 1500, "currency": {"iso": "XOF"},
                      "custom_metadata": {"mmc_id": id}}),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let other_id = other["v1/transaction"]["id"].as_u64().unwrap().to_string();
    fake.set_status(&other_id, "approved", None);
    let body = fake.event("transaction.approved", &other_id);
    let signature = fedapay::signature(fedapay::WEBHOOK_SECRET, fedapay::now(), &body);
    let (status, answer) = notify(
        &app,
        "celtiis-bj",
        "POST",
        &[("x-fedapay-signature", signature.as_str())],
        body,
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["applied"], 0, "{answer}");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let now = payment(&app, &live, id).await;
    assert_eq!(now["status"], "processing", "{now}");
    assert_eq!(now["psp_reference"], ours.as_str());

    fake.customer_pays(&ours).await;
    wait_for(&app, &live, id, "completed", Duration::from_secs(10)).await;
}

/// `fedapay` in the registry of adapters: the contract tests and every cell
/// of the fault matrix run over it.
pub const ENTRY: Entry = Entry {
    name: "fedapay",
    operator: "celtiis-bj",
    routes: &["celtiis-bj"],
    country: "BJ",
    phone: |n| format!("+2290140{:06}", 700_000 + n),
    unsupported: &[
        (
            Op::ConfirmOtp,
            "FedaPay has no OTP step (approved on the phone or its page)",
        ),
        (Op::Refund, "FedaPay documents no refund API"),
    ],
    otp: None,
    refund_status_query: false,
    keyless_initiate: None,
    conformance_settings: &[],
    conformance_secrets: &["secret_key", "webhook_secret"],
    start: registry::start::<fedapay::FedaPay>,
};

/// FedaPay knows our payment by `custom_metadata` (our id itself). A cancel
/// asks where the transaction stands (FedaPay documents no withdrawal); the
/// push and the payout's start move money.
impl Harness for FakeFedaPay {
    fn plumbing(&self) -> &Plumbing {
        FakeFedaPay::plumbing(self)
    }

    fn component_config(&self) -> ComponentConfig {
        FakeFedaPay::component_config(self)
    }

    fn endpoint(&self, op: Op) -> &'static str {
        match op {
            Op::Cancel => "transaction_get",
            Op::Payout => "payout_start",
            _ => "push",
        }
    }

    fn target(&self, op: Op, phone: &str, payment_id: &str, _: &str) -> String {
        match op {
            Op::Cancel | Op::Refund => payment_id.to_string(),
            _ => phone.to_string(),
        }
    }

    /// The pushed transaction made for our id (pending until the customer acts).
    fn customer_approves<'a>(&'a self, payment_id: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            for t in self.transactions_for(payment_id) {
                if t.status == "pending" && t.pushes > 0 {
                    self.customer_pays(&t.id.to_string()).await;
                }
            }
            self.transactions_for(payment_id).iter().any(|t| t.paid())
        })
    }

    fn payment(&self, payment_id: &str) -> AtOperator {
        let transactions = self.transactions_for(payment_id);
        AtOperator {
            moved: transactions.iter().any(|t| t.paid()),
            // Never pushed: nothing can happen to it on its own.
            settled: transactions
                .iter()
                .all(|t| t.status != "pending" || t.pushes == 0),
            records: transactions.len(),
        }
    }

    fn refund(&self, _: &str, _: &str) -> AtOperator {
        AtOperator::nothing()
    }

    fn fund_payouts(&self) {
        self.top_up(1_000_000);
    }

    /// A created payout moves nothing until started; every one made for the
    /// number counts (a second one would be a second payout).
    fn payout(&self, phone: &str) -> AtOperator {
        let digits = normal_key(phone);
        let payouts: Vec<_> = self
            .payouts()
            .into_iter()
            .filter(|p| p.phone == digits)
            .collect();
        AtOperator {
            moved: payouts.iter().any(|p| p.sent()),
            settled: payouts.iter().all(|p| p.status != "started"),
            records: payouts.len(),
        }
    }
}

/// A busy account: hundreds of payouts made after ours, and a search that
/// does not look into `custom_metadata`. The look-up by our id reads
/// FedaPay's list back to our payout's creation (its id is a UUIDv7), not a
/// fixed few pages, so it ends with ours found.
#[service_test]
async fn a_payout_is_found_by_our_id_behind_hundreds_of_newer_ones() {
    let fake = FakeFedaPay::start().await;
    let adapter = Direct::load("fedapay", fake.component_config());
    let phone = "+2290140000043";
    let ours = uuid_v7();
    let started = adapter
        .payout(payout_request("celtiis-bj", &ours, phone))
        .await
        .unwrap();
    fake.search_ignores_custom_metadata();
    let client = reqwest::Client::new();
    for n in 0..700 {
        let body = json!({"amount": 1000, "currency": {"iso": "XOF"}, "mode": "sbin",
            "customer": {"firstname": "Kofi", "lastname": "Mensah",
                         "phone_number": {"number": format!("+229014000{n:04}"), "country": "bj"}},
            "custom_metadata": {"mmc_id": format!("other-{n}")}});
        let resp = client
            .post(format!("{}/v1/payouts", fake.base_url()))
            .bearer_auth(fedapay::SECRET_KEY)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(resp.status().is_success(), "{}", resp.status());
    }
    assert!(fake.payouts().len() > 700);
    let status = adapter
        .payout_status(OperationRef {
            id: ours.clone(),
            operator: "celtiis-bj".into(),
            environment: "live".into(),
            psp_reference: None,
            phone: Some(phone.into()),
            amount: 2500,
            currency: "XOF".into(),
        })
        .await;
    assert!(
        matches!(status, Ok(PspStatus::Pending | PspStatus::Completed(_))),
        "{status:?}"
    );
    assert!(
        fake.requests("payout_list").len() > 5,
        "read past the first five pages"
    );
    assert_eq!(started.status, PspStatus::Pending);
}
