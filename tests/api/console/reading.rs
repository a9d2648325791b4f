//! What a person reads and may do on the console: outcomes in words with
//! the reason and the next step, amounts and times as their merchant writes
//! them, only the actions their role and the payment's state allow, and
//! harmful actions confirmed first and never repeated by a reload.

use mmc_console_kit::users::Role;

use super::french::member_id;
use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

#[service_test]
async fn a_failed_payment_says_why_and_what_to_do_next_in_both_languages() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Boutique Awa");
    let (failed, _) = app.create_ok(&key, &direct_payment("+2290166000002")).await;
    let (_, synced) = app
        .get(&key, &format!("/api/v1/collect/payments/{failed}?sync=1"))
        .await;
    assert_eq!(synced["failure_code"], "insufficient_funds", "{synced}");
    let desk = person(&app, &merchant, "desk@awa.bj", Role::Support).await;

    let list = desk.get("/console/payments?status=failed").await;
    assert!(
        list.body
            .contains(">Failed</span><br><small>The customer&#39;s balance is too low.</small>"),
        "{}",
        list.body
    );
    assert!(list.body.contains("1,500 XOF"), "{}", list.body);
    let page = desk.get(&page_path(&failed)).await;
    assert!(
        page.body.contains("The customer&#39;s balance is too low.")
            && page.body.contains(
                "What to do next: Ask the customer to top up, then create a new payment."
            ),
        "{}",
        page.body
    );
    let page = desk.get(&format!("{}?lang=fr", page_path(&failed))).await;
    assert!(
        page.body.contains(">Échoué</span>")
            && page.body.contains("Le solde du client est insuffisant.")
            && page.body.contains("1\u{202f}500\u{a0}FCFA"),
        "{}",
        page.body
    );
}

#[service_test]
async fn nobody_is_offered_what_they_may_not_do_and_the_server_refuses_it_all_the_same() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Boutique Awa");
    let (paid, _) = completed_payment(&app, &key).await;
    let desk = person(&app, &merchant, "desk@awa.bj", Role::Support).await;
    let finance = person(&app, &merchant, "money@awa.bj", Role::Finance).await;

    // Support reads the payment but is offered neither refund nor cancel.
    let page = desk.get(&page_path(&paid)).await;
    assert_eq!(page.status, 200);
    assert!(!page.body.contains("/refund\""), "{}", page.body);
    assert!(!page.body.contains("/cancel\""), "{}", page.body);
    let refused = desk
        .submit(
            &page_path(&paid),
            &format!("/console/payments/{paid}/refund"),
            &[("step", "review"), ("amount", "100")],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused
            .body
            .contains("Your role (Support) does not allow this.")
            && refused.body.contains("href=\"/console/team\""),
        "{}",
        refused.body
    );

    // Finance: a completed payment is refunded, never cancelled.
    let page = finance.get(&page_path(&paid)).await;
    assert!(
        page.body
            .contains(&format!("/console/payments/{paid}/refund\""))
    );
    assert!(!page.body.contains("/cancel\""), "{}", page.body);
    let cancel = finance
        .get(&format!("/console/payments/{paid}/cancel"))
        .await;
    assert_eq!(cancel.status, 409, "{}", cancel.body);
    assert!(
        cancel
            .body
            .contains("Only a payment still in progress can be cancelled; this one is: Completed. Refund it instead."),
        "{}",
        cancel.body
    );
}

#[service_test]
async fn a_refund_shows_what_remains_and_is_checked_before_its_confirmation() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Boutique Awa");
    let (paid, _) = completed_payment(&app, &key).await;
    let finance = person(&app, &merchant, "money@awa.bj", Role::Finance).await;
    let refund = format!("/console/payments/{paid}/refund");

    // Typed as people type it, grouped: one refund of 1,000.
    let review = finance
        .submit(&refund, &refund, &[("step", "review"), ("amount", "1 000")])
        .await;
    assert_eq!(review.status, 200, "{}", review.body);
    assert!(
        review.body.contains("Refund 1,000 XOF of payment"),
        "{}",
        review.body
    );
    let confirm: Vec<(String, String)> = ["csrf", "step", "idempotency_key", "amount", "reason"]
        .iter()
        .map(|f| (f.to_string(), review.field(f)))
        .collect();
    let confirm: Vec<(&str, &str)> = confirm
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let done = finance.post(&refund, &confirm).await;
    assert_eq!(done.status, 303, "{}", done.body);
    let (_, refunds) = app
        .get(&key, &format!("/api/v1/collect/payments/{paid}/refunds"))
        .await;
    assert_eq!(refunds["data"][0]["amount"], 1000, "{refunds}");

    // The form offers what remains, and says what was refunded.
    let form = finance.get(&refund).await;
    assert_eq!(form.field("amount"), "500", "{}", form.body);
    assert!(
        form.body.contains("Amount (at most 500 XOF)"),
        "{}",
        form.body
    );
    assert!(
        form.body.contains("<dt>Refunded</dt><dd>1,000 XOF</dd>")
            || form
                .body
                .contains("<dt>Refund in progress</dt><dd>1,000 XOF</dd>"),
        "{}",
        form.body
    );
    // More than remains is refused at the review, not after the confirmation.
    let over = finance
        .submit(&refund, &refund, &[("step", "review"), ("amount", "600")])
        .await;
    assert_eq!(over.status, 400, "{}", over.body);
    assert!(
        over.body
            .contains("600 XOF is more than can still be refunded (500 XOF)."),
        "{}",
        over.body
    );
    assert!(!over.body.contains("name=\"step\" value=\"confirm\""));
    // A reason is a word, not a code.
    let page = finance.get(&page_path(&paid)).await;
    assert!(page.body.contains("Asked by the customer"), "{}", page.body);
}

#[service_test]
async fn removing_a_member_is_confirmed_said_and_never_repeated_by_a_reload() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, _, _) = app.merchant("Boutique Awa");
    let owner = person(&app, &merchant, "owner@awa.bj", Role::Owner).await;
    person(&app, &merchant, "desk@awa.bj", Role::Support).await;
    person(&app, &merchant, "dev@awa.bj", Role::Developer).await;
    let team = owner.get("/console/team").await;
    // Roles are words; removing is a link to a confirmation, not a button.
    assert!(team.body.contains("<td>Support</td>"), "{}", team.body);
    assert!(!team.body.contains("/remove\" class"), "{}", team.body);
    let desk = member_id(&team.body, "desk@awa.bj");

    let confirm = owner.get(&format!("/console/team/{desk}/remove")).await;
    assert_eq!(confirm.status, 200);
    assert!(
        confirm
            .body
            .contains("Remove desk@awa.bj (Support) from the team?"),
        "{}",
        confirm.body
    );
    let form = [
        ("csrf", confirm.field("csrf")),
        ("form_key", confirm.field("form_key")),
    ];
    let form: Vec<(&str, &str)> = form.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let removed = owner
        .post(&format!("/console/team/{desk}/remove"), &form)
        .await;
    assert_eq!(removed.status, 303, "{}", removed.body);
    let said = owner.get(removed.location()).await;
    assert!(
        said.body
            .contains("desk@awa.bj was removed from the team; their sessions have ended."),
        "{}",
        said.body
    );
    // The same form again (a reload): nothing repeated, and said so.
    let again = owner
        .post(&format!("/console/team/{desk}/remove"), &form)
        .await;
    assert_eq!(again.status, 409, "{}", again.body);
    assert!(
        again.body.contains("This was already done"),
        "{}",
        again.body
    );
    // Without the form's key nothing is done.
    let dev = member_id(&owner.get("/console/team").await.body, "dev@awa.bj");
    let bare = owner
        .submit("/console/team", &format!("/console/team/{dev}/remove"), &[])
        .await;
    assert_eq!(bare.status, 400, "{}", bare.body);
    assert!(owner.get("/console/team").await.body.contains("dev@awa.bj"));
}

#[service_test]
async fn times_are_shown_in_the_zone_the_owner_chose_and_test_data_says_so() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Boutique Awa");
    let (paid, _) = completed_payment(&app, &key).await;
    let owner = person(&app, &merchant, "owner@awa.bj", Role::Owner).await;
    let page = owner.get(&page_path(&paid)).await;
    assert!(page.body.contains("class=\"test-banner\""), "{}", page.body);
    assert!(page.body.contains(" UTC</dd>"), "{}", page.body);

    let bad = owner
        .submit(
            "/console/team",
            "/console/team/zone",
            &[("zone", "Europe/Paris")],
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.body);
    let set = owner
        .submit(
            "/console/team",
            "/console/team/zone",
            &[("zone", "Africa/Porto-Novo")],
        )
        .await;
    assert_eq!(
        (set.status, set.location()),
        (303, "/console/team?done=zone")
    );
    let page = owner.get(&page_path(&paid)).await;
    assert!(page.body.contains(" UTC+1</dd>"), "{}", page.body);
    let audit = owner.get("/console/audit").await;
    assert!(audit.body.contains("merchant.time_zone"), "{}", audit.body);
    // A support person reads the same zone but may not change it.
    let desk = person(&app, &merchant, "desk@awa.bj", Role::Support).await;
    assert!(
        desk.get(&page_path(&paid))
            .await
            .body
            .contains(" UTC+1</dd>")
    );
    let refused = desk
        .submit(
            "/console/payments",
            "/console/team/zone",
            &[("zone", "UTC")],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
}
