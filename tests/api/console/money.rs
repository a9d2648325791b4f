//! The console's actions are the API's: scopes refused by the server,
//! a refund that is the API's refund, a bulk approval that is its validate.

use mmc_console_kit::users::Role;
use serde_json::{Value, json};

use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

#[service_test]
async fn console_roles_are_refused_what_their_api_scopes_forbid() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Shop");
    let (id, _) = completed_payment(&app, &key).await;
    let refund_path = format!("/console/payments/{id}/refund");
    for (email, role) in [
        ("agent@shop.bj", Role::Support),
        ("dev@shop.bj", Role::Developer),
    ] {
        let who = person(&app, &merchant, email, role).await;
        let page = who.get(&format!("/console/payments/{id}")).await;
        assert_eq!(page.status, 200, "{role:?} reads payments");
        for step in ["review", "confirm"] {
            let key = uuid::Uuid::new_v4().to_string();
            let refused = who
                .submit(
                    &page_path(&id),
                    &refund_path,
                    &[("step", step), ("amount", "100"), ("idempotency_key", &key)],
                )
                .await;
            assert_eq!(refused.status, 403, "{role:?} {step}: {}", refused.body);
            assert!(
                refused.body.contains("does not allow this"),
                "{}",
                refused.body
            );
        }
        let cancel = who
            .submit(
                &page_path(&id),
                &format!("/console/payments/{id}/cancel"),
                &[],
            )
            .await;
        assert_eq!(cancel.status, 403, "{role:?}");
    }
    let (_, refunds) = app
        .get(&key, &format!("/api/v1/collect/payments/{id}/refunds"))
        .await;
    assert_eq!(refunds["data"], json!([]), "nothing refunded");
}

#[service_test]
async fn a_console_refund_is_the_apis_refund_and_a_double_submit_is_one_refund() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Shop");
    let (id, reference) = completed_payment(&app, &key).await;
    let finance = person(&app, &merchant, "finance@shop.bj", Role::Finance).await;

    let list = finance.get("/console/payments?status=completed").await;
    assert!(list.body.contains(&reference), "{}", list.body);
    let none = finance.get("/console/payments?status=failed").await;
    assert!(!none.body.contains(&reference));
    assert!(
        finance
            .get(&format!(
                "/console/payments?phone=66000001&reference={reference}"
            ))
            .await
            .body
            .contains(&reference)
    );
    let bad = finance.get("/console/payments?from=yesterday").await;
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("a date as YYYY-MM-DD"), "{}", bad.body);
    let csv = finance.get("/console/payments.csv?status=completed").await;
    assert_eq!(csv.headers["content-type"], "text/csv; charset=utf-8");
    assert!(
        csv.body.starts_with("id,reference,") && csv.body.contains(&reference),
        "{}",
        csv.body
    );

    let too_much = finance
        .submit(
            &page_path(&id),
            &format!("/console/payments/{id}/refund"),
            &[("step", "review"), ("amount", "abc")],
        )
        .await;
    assert_eq!(too_much.status, 400);
    let review = finance
        .submit(
            &page_path(&id),
            &format!("/console/payments/{id}/refund"),
            &[
                ("step", "review"),
                ("amount", "500"),
                ("reason", "duplicate"),
            ],
        )
        .await;
    assert_eq!(review.status, 200, "{}", review.body);
    assert!(review.body.contains("Refund 500 XOF"), "{}", review.body);
    let form: Vec<(String, String)> = ["csrf", "step", "idempotency_key", "amount", "reason"]
        .iter()
        .map(|f| (f.to_string(), review.field(f)))
        .collect();
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let first = finance
        .post(&format!("/console/payments/{id}/refund"), &form)
        .await;
    let second = finance
        .post(&format!("/console/payments/{id}/refund"), &form)
        .await;
    assert_eq!((first.status, second.status), (303, 303), "{}", second.body);
    assert_eq!(first.location(), second.location(), "the same refund");

    let (_, refunds) = app
        .get(&key, &format!("/api/v1/collect/payments/{id}/refunds"))
        .await;
    let data = refunds["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "one refund for a double submit: {refunds}");
    let refund: &Value = &data[0];
    assert_eq!(
        (refund["amount"].as_u64(), refund["reason"].as_str()),
        (Some(500), Some("duplicate"))
    );
    // The API's own refund object, event and all.
    let (status, via_api) = app
        .get(&key, &format!("/api/v1/collect/refunds/{}", id_of(refund)))
        .await;
    assert_eq!((status, &via_api["payment_id"]), (200, &json!(id)));
    let events = app.event_types(&key, &id).await;
    assert!(events.iter().any(|e| e.contains("refund")), "{events:?}");
    // A second refund asks the API too: what remains, nothing more.
    let over = finance
        .submit(
            &page_path(&id),
            &format!("/console/payments/{id}/refund"),
            &[
                ("step", "confirm"),
                ("amount", "1001"),
                ("idempotency_key", &uuid::Uuid::new_v4().to_string()),
            ],
        )
        .await;
    assert_eq!(over.status, 400, "{}", over.body);
    assert!(over.body.contains("remains to refund"), "{}", over.body);
    // A French page says the API's refusal in French, naming the field.
    let over = finance
        .submit(
            &page_path(&id),
            &format!("/console/payments/{id}/refund?lang=fr"),
            &[
                ("step", "confirm"),
                ("amount", "1001"),
                ("idempotency_key", &uuid::Uuid::new_v4().to_string()),
            ],
        )
        .await;
    assert_eq!(over.status, 400, "{}", over.body);
    assert!(
        over.body
            .contains("Ce montant dépasse ce qui reste à rembourser. (champ montant)"),
        "{}",
        over.body
    );

    let page = finance.get(&page_path(&id)).await;
    assert!(page.body.contains("Payé deux fois"), "{}", page.body);
    assert!(
        page.body
            .contains("<strong>collect.payment.completed</strong>"),
        "timeline: {}",
        page.body
    );
    assert!(
        page.body.contains("<strong>collect.refund."),
        "the refund's events too: {}",
        page.body
    );

    // The console's own messages in French too.
    let fr = finance.get("/console/payments?from=hier&lang=fr").await;
    assert_eq!(fr.status, 400);
    assert!(
        fr.body.contains("Du : une date au format AAAA-MM-JJ"),
        "{}",
        fr.body
    );

    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let audit = owner.get("/console/audit?action=payment.refund").await;
    assert_eq!(
        (
            audit.audited("payment.refund", "done"),
            audit.audited("payment.refund", "refused")
        ),
        (1, 2),
        "the double submit one refund, the two over-refunds refused: {}",
        audit.body
    );
    assert!(
        audit.body.contains("400 refund_amount_exceeds_remaining"),
        "{}",
        audit.body
    );
    assert!(audit.body.contains("finance@shop.bj") && audit.body.contains(&id));
}

#[service_test]
async fn console_bulk_approval_is_the_apis_validate_under_the_approvers_role(app: TestApp) {
    let merchant = app.new_merchant("Payroll");
    let maker = app
        .accounts
        .create_key_with(
            &merchant,
            mmc_accounts::Environment::Test,
            Some(mmc_accounts::scopes::Scopes::parse("bulk:create").unwrap()),
        )
        .unwrap();
    let resp = app
        .client
        .post(app.url("/api/v1/bulk-payments/"))
        .bearer_auth(&maker.key)
        .header("Idempotency-Key", new_key())
        .json(&json!({"name": "May payroll", "items": [{
            "beneficiary_name": "Awa Koné", "phone": "+2290166000001", "amount": 1000,
            "currency": "XOF", "reference": "may-1"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 201);
    let batch: Value = resp.json().await.unwrap();
    let id = id_of(&batch);
    assert_eq!(batch["status"], "pending_validation", "{batch}");
    let page = format!("/console/bulk/{id}");
    let validate = format!("/console/bulk/{id}/validate");
    for (email, role) in [
        ("dev@shop.bj", Role::Developer),
        ("agent@shop.bj", Role::Support),
    ] {
        let who = person(&app, &merchant, email, role).await;
        let refused = who
            .submit("/console/payments", &validate, &[("action", "approve")])
            .await;
        assert_eq!(refused.status, 403, "{role:?}: {}", refused.body);
        assert!(
            refused.body.contains("does not allow this"),
            "{}",
            refused.body
        );
    }
    let finance = person(&app, &merchant, "finance@shop.bj", Role::Finance).await;
    let shown = finance.get(&page).await;
    assert!(
        shown.body.contains("May payroll") && shown.body.contains("/approve\">Approve</a>"),
        "{}",
        shown.body
    );
    let approved = finance
        .submit(&page, &validate, &[("action", "approve")])
        .await;
    assert_eq!(
        (approved.status, approved.location()),
        (303, format!("{page}?done=approve").as_str()),
        "{}",
        approved.body
    );
    let (_, after) = app
        .get(&maker.key, &format!("/api/v1/bulk-payments/{id}"))
        .await;
    assert_ne!(after["status"], "pending_validation", "{after}");
    let approver = after["validated_by_key_id"].as_str().unwrap();
    assert!(
        approver.starts_with("user_"),
        "the person is the approver: {after}"
    );
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let audit = owner.get("/console/audit?action=bulk.approve").await;
    assert!(
        audit.body.contains("finance@shop.bj") && audit.body.contains(&id),
        "{}",
        audit.body
    );
}

#[service_test]
async fn support_resends_an_events_webhooks_and_finance_is_refused() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Shop");
    let (id, _) = completed_payment(&app, &key).await;
    let (status, endpoint) = app
        .post(
            &key,
            "/api/v1/webhook-endpoints",
            json!({"url": "http://127.0.0.1:9/hook", "enabled_events": ["collect.payment.completed"]}),
        )
        .await;
    assert_eq!(status, 201, "{endpoint}");
    let (_, events) = app
        .get(
            &key,
            &format!("/api/v1/events?payment={id}&type=collect.payment.completed"),
        )
        .await;
    let event = id_of(&events["data"][0]);
    let resend = format!("/console/events/{event}/resend");

    let finance = person(&app, &merchant, "cfo@shop.bj", Role::Finance).await;
    assert!(
        !finance.get(&page_path(&id)).await.body.contains(&resend),
        "no button"
    );
    let refused = finance
        .submit(&page_path(&id), &resend, &[("payment", &id)])
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.body.contains("does not allow this"),
        "{}",
        refused.body
    );

    let support = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    assert!(support.get(&page_path(&id)).await.body.contains(&resend));
    let done = support
        .submit(&page_path(&id), &resend, &[("payment", &id)])
        .await;
    assert_eq!(done.status, 303, "{}", done.body);
    assert_eq!(
        done.location(),
        format!("/console/payments/{id}?done=resend")
    );
    let (_, after) = app.get(&key, &format!("/api/v1/events/{event}")).await;
    let deliveries = after["deliveries"].as_array().unwrap();
    assert!(
        deliveries
            .iter()
            .any(|d| d["url"] == "http://127.0.0.1:9/hook"),
        "queued to the endpoint: {after}"
    );
    // Deliveries (where they went, what was answered) show to those who may
    // read them through the API: a developer, not support.
    let developer = person(&app, &merchant, "dev@shop.bj", Role::Developer).await;
    assert!(developer.get(&page_path(&id)).await.body.contains(&resend));
    assert!(
        developer
            .get(&page_path(&id))
            .await
            .body
            .contains("http://127.0.0.1:9/hook")
    );
    assert!(
        !support
            .get(&page_path(&id))
            .await
            .body
            .contains("127.0.0.1:9")
    );
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let audit = owner.get("/console/audit?action=event.resend").await;
    assert!(
        audit.body.contains("agent@shop.bj") && audit.body.contains(&event),
        "{}",
        audit.body
    );
}

#[service_test]
async fn the_payments_list_pages_newest_first_and_its_csv_holds_the_filtered_list(app: TestApp) {
    let (merchant, key, _) = app.merchant("Shop");
    let mut references = Vec::new();
    for i in 0..55 {
        let mut body = direct_payment(&format!("+22901660{:05}", 100 + i));
        body["reference"] = json!(format!("order-{i:03}"));
        app.create_ok(&key, &body).await;
        references.push(format!("order-{i:03}"));
    }
    let support = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    let first = support.get("/console/payments").await;
    let rows = |html: &str| html.matches("<tr><td>").count();
    assert_eq!(rows(&first.body), 50, "{}", first.body);
    // Newest first.
    let (newest, oldest_shown) = (
        first.body.find("order-054").unwrap(),
        first.body.find("order-005").unwrap(),
    );
    assert!(newest < oldest_shown);
    assert!(!first.body.contains("order-004"));
    let marker = "rel=\"next\" href=\"";
    let at = first.body.find(marker).unwrap() + marker.len();
    let next = first.body[at..]
        .split('"')
        .next()
        .unwrap()
        .replace("&amp;", "&");
    let second = support.get(&next).await;
    assert_eq!(rows(&second.body), 5, "{}", second.body);
    assert!(second.body.contains("order-000") && !second.body.contains("rel=\"next\""));

    // By phone, across pages of the API: the last digits are enough.
    let by_phone = support.get("/console/payments?phone=000100").await;
    assert_eq!(rows(&by_phone.body), 1, "{}", by_phone.body);
    assert!(by_phone.body.contains("order-000"));

    let csv = support.get("/console/payments.csv").await;
    assert_eq!(csv.status, 200);
    assert_eq!(csv.body.lines().count(), 56, "a header and every payment");
    for r in &references {
        assert!(csv.body.contains(r.as_str()), "{r}");
    }
    let narrowed = support
        .get("/console/payments.csv?reference=order-007")
        .await;
    assert_eq!(narrowed.body.lines().count(), 2, "{}", narrowed.body);
}

#[service_test]
async fn a_console_cancel_is_confirmed_then_the_apis_and_a_second_one_is_refused_clearly() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Shop");
    let body = direct_payment("+2290166000004");
    let (id, _) = app.create_ok(&key, &body).await;
    let finance = person(&app, &merchant, "finance@shop.bj", Role::Finance).await;
    let cancel = format!("/console/payments/{id}/cancel");
    let confirm = finance.get(&cancel).await;
    assert_eq!(confirm.status, 200);
    let reference = body["reference"].as_str().unwrap();
    assert!(
        confirm
            .body
            .contains(&format!("Cancel payment {reference}?")),
        "{}",
        confirm.body
    );
    let done = finance.submit(&cancel, &cancel, &[]).await;
    assert_eq!(
        (done.status, done.location()),
        (
            303,
            format!("/console/payments/{id}?done=cancelled").as_str()
        ),
        "{}",
        done.body
    );
    let (_, after) = app
        .get(&key, &format!("/api/v1/collect/payments/{id}"))
        .await;
    assert_eq!(after["status"], "cancelled");
    let again = finance.submit(&page_path(&id), &cancel, &[]).await;
    assert_eq!(again.status, 409, "{}", again.body);
    assert!(
        again.body.contains("can no longer be cancelled"),
        "{}",
        again.body
    );
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let audit = owner.get("/console/audit?action=payment.cancel").await;
    assert_eq!(
        (
            audit.audited("payment.cancel", "done"),
            audit.audited("payment.cancel", "refused")
        ),
        (1, 1),
        "the cancel done, the second one refused: {}",
        audit.body
    );
    assert!(
        audit.body.contains("409 payment_not_cancellable"),
        "{}",
        audit.body
    );
}
