//! The audit log: every attempt, allowed or refused with the API's code,
//! every sign-in and sign-out, named by the payment's reference and the
//! person, and narrowed by person, action and outcome.

use mmc_console_kit::format::money;
use mmc_console_kit::html::Lang;
use mmc_console_kit::users::Role;

use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

/// The rows of the log's table (the header's left out).
fn rows(page: &Page) -> Vec<&str> {
    page.body
        .split("<tbody>")
        .nth(1)
        .unwrap_or_default()
        .split("<tr>")
        .skip(1)
        .collect()
}

#[service_test]
async fn refused_attempts_are_logged_with_the_apis_status_and_code_and_name_the_payment() {
    let app = spawn_app_completing_after(0).await;
    let (merchant, key, _) = app.merchant("Shop");
    let (id, reference) = completed_payment(&app, &key).await;
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let support = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    let refund = format!("/console/payments/{id}/refund");
    for step in ["review", "review", "confirm"] {
        let key = uuid::Uuid::new_v4().to_string();
        let form = [("step", step), ("amount", "100"), ("idempotency_key", &key)];
        let refused = support.submit(&page_path(&id), &refund, &form).await;
        assert_eq!(refused.status, 403, "{}", refused.body);
    }
    let cancel = format!("/console/payments/{id}/cancel");
    let refused = support.submit(&page_path(&id), &cancel, &[]).await;
    assert_eq!(refused.status, 403, "{}", refused.body);

    let log = owner.get("/console/audit?action=payment.refund").await;
    assert_eq!(log.status, 200, "{}", log.body);
    assert_eq!(
        log.audited("payment.refund", "refused"),
        3,
        "three attempts, three entries: {}",
        log.body
    );
    for row in rows(&log) {
        assert!(
            row.contains("agent@shop.bj")
                && row.contains("403 insufficient_scope")
                && row.contains(&format!(">{reference}</a>"))
                && row.contains(&money(Lang::En, 1500, "XOF")),
            "the person, the API's status and code, the payment's reference and amount: {row}"
        );
    }
    let log = owner.get("/console/audit?action=payment.cancel").await;
    assert_eq!(log.audited("payment.cancel", "refused"), 1, "{}", log.body);
    assert!(log.body.contains("403 insufficient_scope"), "{}", log.body);
    assert!(
        !log.body.contains("it may have been done"),
        "a refusal is not a lost answer: {}",
        log.body
    );

    // An accepted refund names its payment the same way.
    let finance = person(&app, &merchant, "finance@shop.bj", Role::Finance).await;
    let review = finance
        .submit(
            &page_path(&id),
            &refund,
            &[("step", "review"), ("amount", "400")],
        )
        .await;
    assert_eq!(review.status, 200, "{}", review.body);
    let confirm = [
        ("step", "confirm"),
        ("amount", "400"),
        ("idempotency_key", &review.field("idempotency_key")),
        ("csrf", &review.field("csrf")),
    ];
    let done = finance.post(&refund, &confirm).await;
    assert_eq!(done.status, 303, "{}", done.body);
    let log = owner
        .get("/console/audit?action=payment.refund&outcome=done")
        .await;
    let done = rows(&log);
    assert_eq!(done.len(), 1, "{}", log.body);
    assert!(
        done[0].contains("finance@shop.bj")
            && done[0].contains(&format!(
                "<a href=\"/console/payments/{id}\">{reference}</a>"
            )),
        "{}",
        done[0]
    );
    // In French, the words and the amount as French writes it.
    let fr = owner
        .get("/console/audit?action=payment.refund&outcome=done&lang=fr")
        .await;
    assert!(
        fr.body.contains("Remboursement") && fr.body.contains(&money(Lang::Fr, 1500, "XOF")),
        "{}",
        fr.body
    );
}

#[service_test]
async fn sign_ins_through_an_invitation_or_a_reset_sign_outs_and_refused_sign_ins_are_logged(
    app: TestApp,
) {
    let merchant = app.new_merchant("Shop");
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let agent = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    let out = agent
        .submit("/console/payments", "/console/sign-out", &[])
        .await;
    assert_eq!(out.location(), "/console/sign-in");
    let wrong = Browser::new(&app)
        .sign_in("agent@shop.bj", "a wrong password!", "")
        .await;
    assert_eq!(wrong.status, 401);
    // An address nobody has belongs to no merchant's log.
    let nobody = Browser::new(&app)
        .sign_in("nobody@shop.bj", "a wrong password!", "")
        .await;
    assert_eq!(nobody.status, 401);
    let again = Browser::new(&app)
        .sign_in("agent@shop.bj", PASSWORD, "")
        .await;
    assert_eq!(again.status, 303);

    let log = owner
        .get("/console/audit?email=agent%40shop.bj&action=session.sign_in")
        .await;
    assert_eq!(
        (
            log.audited("session.sign_in", "done"),
            log.audited("session.sign_in", "refused")
        ),
        (2, 1),
        "the invitation's first sign-in, the refused one, the later one: {}",
        log.body
    );
    assert!(
        log.body.contains("first password, from an invitation")
            && log.body.contains("wrong password")
            && log.body.contains("with a password"),
        "{}",
        log.body
    );
    assert!(
        !log.body.contains("a wrong password!") && !log.body.contains("nobody@shop.bj"),
        "never the password tried, nor an address of no one here: {}",
        log.body
    );
    let accepted = owner
        .get("/console/audit?action=user.invite_accepted")
        .await;
    assert_eq!(
        accepted.audited("user.invite_accepted", "done"),
        2,
        "{}",
        accepted.body
    );
    let out = owner.get("/console/audit?action=session.sign_out").await;
    assert_eq!(out.audited("session.sign_out", "done"), 1, "{}", out.body);
    assert!(out.body.contains("agent@shop.bj"), "{}", out.body);

    // A reset's link: its first password is the reset's, not an invitation's.
    let agent_id = app
        .service
        .site
        .console
        .users
        .list(&merchant)
        .unwrap()
        .into_iter()
        .find(|u| u.email == "agent@shop.bj")
        .unwrap()
        .id;
    let reset = owner
        .confirm(&format!("/console/team/{agent_id}/reset"))
        .await;
    assert_eq!(reset.status, 201, "{}", reset.body);
    let link = reset.body.split("/console/invite/").nth(1).unwrap();
    let path = format!("/console/invite/{}", link.split('<').next().unwrap());
    Browser::new(&app).accept(&path, PASSWORD).await;
    let log = owner.get("/console/audit?action=user.reset_accepted").await;
    assert_eq!(
        log.audited("user.reset_accepted", "done"),
        1,
        "{}",
        log.body
    );
    let sign_ins = owner.get("/console/audit?action=session.sign_in").await;
    assert!(
        sign_ins.body.contains("first password after a reset"),
        "{}",
        sign_ins.body
    );

    // An owner ends someone's session: the log names whose it was.
    let other = Browser::new(&app);
    assert_eq!(
        other.sign_in("agent@shop.bj", PASSWORD, "").await.status,
        303
    );
    let team = owner.get("/console/team").await;
    let hash = team
        .body
        .split("/console/team/sessions/")
        .nth(1)
        .unwrap()
        .split('/')
        .next()
        .unwrap()
        .to_string();
    let ended = owner
        .submit(
            "/console/team",
            &format!("/console/team/sessions/{hash}/end"),
            &[],
        )
        .await;
    assert_eq!(ended.status, 303, "{}", ended.body);
    let log = owner.get("/console/audit?action=session.end").await;
    let ended = rows(&log);
    assert_eq!(ended.len(), 1, "{}", log.body);
    assert!(
        ended[0].contains("owner@shop.bj") && ended[0].contains("agent@shop.bj"),
        "{}",
        ended[0]
    );
}

#[service_test]
async fn the_log_narrows_by_person_action_and_outcome_in_either_language(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let _agent = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    for _ in 0..2 {
        let wrong = Browser::new(&app)
            .sign_in("agent@shop.bj", "a wrong password!", "")
            .await;
        assert_eq!(wrong.status, 401);
    }

    let all = owner.get("/console/audit").await;
    // Two invitations accepted, each with its sign-in, and two refused sign-ins.
    assert_eq!(rows(&all).len(), 6, "{}", all.body);
    // The choices: the team's people, the actions, the outcomes.
    for choice in [
        "<option value=\"agent@shop.bj\">agent@shop.bj</option>",
        "<option value=\"owner@shop.bj\">owner@shop.bj</option>",
        "<option value=\"payment.refund\">Refund</option>",
        "<option value=\"refused\">refused</option>",
    ] {
        assert!(all.body.contains(choice), "{choice}: {}", all.body);
    }
    let mine = owner.get("/console/audit?email=owner%40shop.bj").await;
    assert_eq!(rows(&mine).len(), 2, "{}", mine.body);
    assert!(
        !mine.body.contains("<td>agent@shop.bj</td>"),
        "{}",
        mine.body
    );
    assert!(
        mine.body
            .contains("<option value=\"owner@shop.bj\" selected>"),
        "the choice is kept: {}",
        mine.body
    );
    let refused = owner.get("/console/audit?outcome=refused").await;
    assert_eq!(refused.audited("session.sign_in", "refused"), 2);
    assert_eq!(rows(&refused).len(), 2, "{}", refused.body);
    let accepted = owner
        .get("/console/audit?action=user.invite_accepted&email=agent%40shop.bj")
        .await;
    assert_eq!(rows(&accepted).len(), 1, "{}", accepted.body);
    let none = owner
        .get("/console/audit?action=payment.refund&outcome=done")
        .await;
    assert!(rows(&none).is_empty());
    assert!(
        none.body.contains("No entry matches these filters."),
        "{}",
        none.body
    );

    let fr = owner.get("/console/audit?outcome=refused&lang=fr").await;
    assert!(
        fr.body
            .contains("<option value=\"refused\" selected>refusé</option>")
            && fr.body.contains("Connexion")
            && fr.body.contains("Tout le monde"),
        "{}",
        fr.body
    );
}
