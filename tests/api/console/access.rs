//! Who gets in and for how long: sign-in, its limit, CSRF, sessions, the second factor.

use mmc_accounts::Environment;
use mmc_console_kit::totp;
use mmc_console_kit::users::Role;

use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

#[service_test]
async fn console_sign_in_succeeds_fails_clearly_and_is_rate_limited(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    let owner = person(&app, &merchant, "Owner@Shop.bj", Role::Owner).await;
    let page = owner.get("/console/payments").await;
    assert_eq!(page.status, 200, "{}", page.body);
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && !csp.contains("http"),
        "{csp}"
    );

    let browser = Browser::new(&app);
    assert_eq!(
        browser.get("/console/payments").await.location(),
        "/console/sign-in"
    );
    let signed = browser.sign_in("owner@shop.bj", PASSWORD, "").await;
    assert_eq!(
        (signed.status, signed.location()),
        (303, "/console/payments")
    );
    let cookie = signed.headers["set-cookie"].to_str().unwrap();
    assert!(
        cookie.starts_with("mmc_console=")
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict")
            && !cookie.contains("Secure"),
        "{cookie}"
    );
    assert_eq!(browser.get("/console/payments").await.status, 200);

    let stranger = Browser::new(&app);
    let wrong = stranger
        .sign_in("owner@shop.bj", "not the password!", "")
        .await;
    assert_eq!(wrong.status, 401);
    assert!(
        wrong.body.contains("Wrong email, password or code."),
        "{}",
        wrong.body
    );
    let fr = stranger.get("/console/sign-in?lang=fr").await;
    assert!(fr.body.contains("Se connecter") && fr.body.contains("lang=\"fr\""));
    for _ in 0..4 {
        assert_eq!(
            stranger
                .sign_in("owner@shop.bj", "still not it!!", "")
                .await
                .status,
            401
        );
    }
    // Five failures: the account is refused for a while, the right password
    // too, in the language the browser chose.
    let limited = stranger.sign_in("owner@shop.bj", PASSWORD, "").await;
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert!(
        limited
            .body
            .contains("Trop de tentatives de connexion. Réessayez dans 15 minutes."),
        "{}",
        limited.body
    );
    assert!(limited.headers.contains_key("retry-after"));
    let limited = Browser::new(&app)
        .sign_in("owner@shop.bj", PASSWORD, "")
        .await;
    assert_eq!(limited.status, 429);
    assert!(
        limited
            .body
            .contains("Too many sign-in attempts. Try again in 15 minutes."),
        "{}",
        limited.body
    );
    // The session opened before is not affected.
    assert_eq!(browser.get("/console/payments").await.status, 200);
}

#[service_test]
async fn console_forms_without_their_csrf_token_are_refused(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    for form in [vec![], vec![("csrf", "0123456789abcdef0123456789abcdef")]] {
        let refused = owner.post("/console/sign-out", &form).await;
        assert_eq!(refused.status, 403, "{}", refused.body);
        assert!(
            refused
                .body
                .contains("This form expired or came from another site")
        );
        let invite = owner
            .post(
                "/console/team/invite",
                &[&form[..], &[("email", "x@shop.bj"), ("role", "owner")]].concat(),
            )
            .await;
        assert_eq!(invite.status, 403);
    }
    assert_eq!(
        owner.get("/console/payments").await.status,
        200,
        "still signed in"
    );
    assert!(
        !owner.get("/console/team").await.body.contains("x@shop.bj"),
        "nobody invited"
    );
    // The sign-in form is tied to the browser that loaded it.
    let other = Browser::new(&app);
    let forged = other
        .post(
            "/console/sign-in",
            &[
                ("pre", "abc"),
                ("email", "owner@shop.bj"),
                ("password", PASSWORD),
            ],
        )
        .await;
    assert_eq!(forged.status, 403);
}

#[service_test]
async fn console_sessions_end_at_sign_out_and_when_the_user_is_removed(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let support = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    assert_eq!(support.get("/console/payments").await.status, 200);
    // Support cannot remove anyone, nor read the audit log.
    let owner_id = app.service.site.console.users.list(&merchant).unwrap()[0]
        .id
        .clone();
    let refused = support
        .confirm(&format!("/console/team/{owner_id}/remove"))
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(support.get("/console/audit").await.status, 403);

    let agent_id = app.service.site.console.users.list(&merchant).unwrap()[1]
        .id
        .clone();
    let removed = owner
        .confirm(&format!("/console/team/{agent_id}/remove"))
        .await;
    assert_eq!(removed.status, 303, "{}", removed.body);
    assert!(
        removed
            .location()
            .starts_with("/console/team?done=removed&who=")
    );
    // Removed: the session ends at once, and the password signs in no more.
    assert_eq!(
        support.get("/console/payments").await.location(),
        "/console/sign-in"
    );
    assert_eq!(
        Browser::new(&app)
            .sign_in("agent@shop.bj", PASSWORD, "")
            .await
            .status,
        401
    );

    let audit = owner.get("/console/audit?action=user.remove").await;
    assert_eq!(audit.status, 200);
    assert!(
        audit.body.contains("agent@shop.bj") && audit.body.contains("owner@shop.bj"),
        "{}",
        audit.body
    );
    assert!(
        audit.body.contains("127.0.0.1"),
        "from where: {}",
        audit.body
    );

    let kept = owner.cookies.lock().unwrap().clone();
    let out = owner
        .submit("/console/payments", "/console/sign-out", &[])
        .await;
    assert_eq!((out.status, out.location()), (303, "/console/sign-in"));
    assert_eq!(
        owner.get("/console/payments").await.location(),
        "/console/sign-in"
    );
    // The old cookie, replayed, names no session.
    *owner.cookies.lock().unwrap() = kept;
    assert_eq!(
        owner.get("/console/payments").await.location(),
        "/console/sign-in"
    );
}

#[service_test]
async fn a_person_changes_their_password_and_their_other_sessions_end(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    let desk = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    let other = Browser::new(&app);
    assert_eq!(
        other.sign_in("agent@shop.bj", PASSWORD, "").await.status,
        303
    );
    let new = "another long password";
    let change = |current: &'static str, new: &'static str, again: &'static str| {
        let desk = &desk;
        async move {
            desk.submit(
                "/console/security",
                "/console/security",
                &[
                    ("action", "password"),
                    ("password", current),
                    ("new_password", new),
                    ("new_password2", again),
                ],
            )
            .await
        }
    };
    // Each bad form says why, on the page, and changes nothing.
    let wrong = change("not the password!", new, new).await;
    assert_eq!(wrong.status, 400);
    assert!(
        wrong.body.contains("The current password is wrong."),
        "{}",
        wrong.body
    );
    let differ = change(PASSWORD, new, "another long passwore").await;
    assert_eq!(differ.status, 400);
    assert!(
        differ.body.contains("The two passwords differ."),
        "{}",
        differ.body
    );
    let short = change(PASSWORD, "too short", "too short").await;
    assert_eq!(short.status, 400);
    assert!(
        short.body.contains("12 to 256 characters"),
        "{}",
        short.body
    );
    assert_eq!(other.get("/console/payments").await.status, 200);

    let done = change(PASSWORD, new, new).await;
    assert_eq!(
        (done.status, done.location()),
        (303, "/console/security?done=password")
    );
    let page = desk.get("/console/security?done=password").await;
    assert!(page.body.contains("Password changed."), "{}", page.body);
    // The session that asked goes on; the other one ended at once.
    assert_eq!(desk.get("/console/payments").await.status, 200);
    assert_eq!(
        other.get("/console/payments").await.location(),
        "/console/sign-in"
    );
    let old = Browser::new(&app)
        .sign_in("agent@shop.bj", PASSWORD, "")
        .await;
    assert_eq!(old.status, 401);
    let fresh = Browser::new(&app).sign_in("agent@shop.bj", new, "").await;
    assert_eq!(fresh.status, 303);

    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let audit = owner
        .get("/console/audit?action=user.password_changed")
        .await;
    assert!(audit.body.contains("agent@shop.bj"), "{}", audit.body);
}

#[service_test]
async fn console_owner_and_finance_need_a_second_factor_in_live(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let live = [("environment", "live")];
    let refused = owner
        .submit("/console/payments", "/console/environment", &live)
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("two-factor"), "{}", refused.body);
    let finance = person(&app, &merchant, "finance@shop.bj", Role::Finance).await;
    let refused = finance
        .submit("/console/payments", "/console/environment", &live)
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    // Support works in live without one.
    let support = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    let switched = support
        .submit("/console/payments", "/console/environment", &live)
        .await;
    assert_eq!(switched.status, 303);
    assert!(
        support
            .get("/console/payments")
            .await
            .body
            .contains("<option value=\"live\" selected>")
    );

    let start = owner
        .submit(
            "/console/security",
            "/console/security",
            &[("action", "start")],
        )
        .await;
    assert_eq!(start.status, 303);
    let page = owner.get("/console/security").await;
    let at = page.body.find("id=\"totp-secret\">").unwrap() + "id=\"totp-secret\">".len();
    let secret = totp::from_base32(page.body[at..].split('<').next().unwrap()).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let wrong = owner
        .submit(
            "/console/security",
            "/console/security",
            &[("action", "confirm"), ("code", "000000")],
        )
        .await;
    assert_eq!(wrong.status, 400);
    let code = totp::code_at(&secret, now);
    let on = owner
        .submit(
            "/console/security",
            "/console/security",
            &[("action", "confirm"), ("code", &code)],
        )
        .await;
    assert_eq!(on.status, 303);
    assert!(
        owner
            .get("/console/security")
            .await
            .body
            .contains("Two-factor authentication is on.")
    );
    assert_eq!(
        owner
            .submit("/console/payments", "/console/environment", &live)
            .await
            .status,
        303
    );
    assert_eq!(owner.get("/console/payments").await.status, 200);

    // Signing in now takes a code; one already used is refused.
    let fresh = Browser::new(&app);
    assert_eq!(
        fresh.sign_in("owner@shop.bj", PASSWORD, "").await.status,
        401
    );
    assert_eq!(
        fresh.sign_in("owner@shop.bj", PASSWORD, &code).await.status,
        401,
        "replayed"
    );
    let next = totp::code_at(&secret, now + totp::STEP_SECS);
    let signed = fresh.sign_in("owner@shop.bj", PASSWORD, &next).await;
    assert_eq!(signed.status, 303);
    assert_eq!(
        fresh
            .submit("/console/payments", "/console/environment", &live)
            .await
            .status,
        303
    );
}

#[service_test]
async fn mmc_users_create_and_reset_print_a_one_time_sign_in_link(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    let dir = app.data_dir.path().to_str().unwrap().to_string();
    let created = crate::cli::mmc(&[
        "users",
        "create",
        "--merchant",
        &merchant,
        "--email",
        "boss@shop.bj",
        "--role",
        "owner",
        "--data-dir",
        &dir,
    ]);
    assert_eq!(
        (created["role"].as_str(), created["email"].as_str()),
        (Some("owner"), Some("boss@shop.bj"))
    );
    let link = created["sign_in_link"].as_str().unwrap();
    let path = &link[link.find("/console/invite/").unwrap()..];
    let browser = Browser::new(&app);
    let page = browser.get(path).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let pre = page.field("pre");
    let short = browser
        .post(
            path,
            &[("pre", &pre), ("password", "short"), ("password2", "short")],
        )
        .await;
    assert_eq!(short.status, 400);
    assert!(
        short.body.contains("the password must be 12"),
        "{}",
        short.body
    );
    let done = browser
        .post(
            path,
            &[
                ("pre", &pre),
                ("password", PASSWORD),
                ("password2", PASSWORD),
            ],
        )
        .await;
    assert_eq!(done.status, 303);
    assert_eq!(browser.get("/console/team").await.status, 200);

    // Lost password: a reset ends the sessions and signs in once more by a new link.
    let reset = crate::cli::mmc(&[
        "users",
        "reset",
        "--email",
        "boss@shop.bj",
        "--data-dir",
        &dir,
    ]);
    assert_eq!(reset["id"], created["id"]);
    assert!(created["approvals_held_until_ms"].is_null(), "{created}");
    let held = reset["approvals_held_until_ms"].as_u64().unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(held > now + 23 * 3600 * 1000, "{reset}");
    assert_eq!(
        browser.get("/console/team").await.location(),
        "/console/sign-in"
    );
    assert_eq!(
        Browser::new(&app)
            .sign_in("boss@shop.bj", PASSWORD, "")
            .await
            .status,
        401
    );
    let link = reset["sign_in_link"].as_str().unwrap();
    let path = &link[link.find("/console/invite/").unwrap()..];
    let again = Browser::new(&app);
    let pre = again.get(path).await.field("pre");
    let renewed = "another long password";
    let done = again
        .post(
            path,
            &[("pre", &pre), ("password", renewed), ("password2", renewed)],
        )
        .await;
    assert_eq!(done.status, 303);
    assert_eq!(
        Browser::new(&app)
            .sign_in("boss@shop.bj", renewed, "")
            .await
            .status,
        303
    );
}

#[service_test]
async fn console_owners_invite_people_and_no_one_else_can(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let finance = person(&app, &merchant, "finance@shop.bj", Role::Finance).await;
    let invite = [("email", "New@Shop.bj"), ("role", "support")];
    let refused = finance
        .submit("/console/team", "/console/team/invite", &invite)
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);

    let bad = owner
        .submit(
            "/console/team",
            "/console/team/invite",
            &[("email", "not an email"), ("role", "support")],
        )
        .await;
    assert_eq!(bad.status, 400);
    assert!(bad.body.contains("email must look like"), "{}", bad.body);
    let shown = owner
        .submit("/console/team", "/console/team/invite", &invite)
        .await;
    assert_eq!(shown.status, 201, "{}", shown.body);
    let at = shown.body.find("id=\"invite-link\">").unwrap() + "id=\"invite-link\">".len();
    let link = shown.body[at..].split('<').next().unwrap();
    assert!(link.starts_with(&app.base), "{link}");
    let again = owner
        .submit("/console/team", "/console/team/invite", &invite)
        .await;
    assert_eq!(again.status, 400, "one account per email");

    let newcomer = Browser::new(&app);
    let path = &link[app.base.len()..];
    let pre = newcomer.get(path).await.field("pre");
    let done = newcomer
        .post(
            path,
            &[
                ("pre", &pre),
                ("password", PASSWORD),
                ("password2", PASSWORD),
            ],
        )
        .await;
    assert_eq!(done.status, 303);
    let team = newcomer.get("/console/team").await;
    assert!(
        team.body.contains("new@shop.bj") && team.body.contains("Support"),
        "{}",
        team.body
    );
    assert!(
        !team.body.contains("/remove"),
        "support removes no one: {}",
        team.body
    );
    let audit = owner.get("/console/audit?action=user.invite").await;
    assert!(
        audit.body.contains("new@shop.bj as support"),
        "{}",
        audit.body
    );
}

#[service_test]
async fn an_owner_sees_the_teams_sessions_and_ends_one(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let support = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    let team = owner.get("/console/team").await;
    assert!(
        team.body.contains("agent@shop.bj") && team.body.contains("127.0.0.1"),
        "{}",
        team.body
    );
    let marker = "action=\"/console/team/sessions/";
    let at = team.body.find(marker).unwrap() + marker.len();
    let hash = team.body[at..].split('/').next().unwrap().to_string();
    // Not the support's to see, nor to end.
    assert!(!support.get("/console/team").await.body.contains(marker));
    let end = format!("/console/team/sessions/{hash}/end");
    assert_eq!(support.submit("/console/team", &end, &[]).await.status, 403);
    let ended = owner.submit("/console/team", &end, &[]).await;
    assert_eq!(ended.status, 303, "{}", ended.body);
    assert_eq!(
        support.get("/console/payments").await.location(),
        "/console/sign-in"
    );
    assert_eq!(owner.get("/console/payments").await.status, 200);
    assert_eq!(
        owner.submit("/console/team", &end, &[]).await.status,
        404,
        "already ended"
    );
}

#[service_test]
async fn console_cookies_are_secure_when_the_service_is_reached_over_tls() {
    let app = spawn_app_with(|c| c.public_base_url = Some("https://pay.example.bj".into())).await;
    let merchant = app.new_merchant("Shop");
    let _owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let signed = Browser::new(&app)
        .sign_in("owner@shop.bj", PASSWORD, "")
        .await;
    assert_eq!(signed.status, 303);
    let cookie = signed.headers["set-cookie"].to_str().unwrap();
    assert!(
        cookie.contains("; Secure")
            && cookie.contains("HttpOnly")
            && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
}

#[service_test]
async fn an_owner_resets_a_members_lost_password_or_authenticator_with_a_one_time_link(
    app: TestApp,
) {
    let merchant = app.new_merchant("Shop");
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let member = person(&app, &merchant, "cash@shop.bj", Role::Finance).await;
    let users = &app.service.site.console.users;
    let id_of_user = |email: &str| {
        users
            .list(&merchant)
            .unwrap()
            .into_iter()
            .find(|u| u.email == email)
            .unwrap()
            .id
    };
    let member_id = id_of_user("cash@shop.bj");
    users.start_totp(&member_id).unwrap();
    users.enable_totp(&member_id, 1).unwrap();
    let reset_path = format!("/console/team/{member_id}/reset");

    // Neither another merchant's owner nor a support agent may.
    let other = app.new_merchant("Other");
    let stranger = person(&app, &other, "owner@other.bj", Role::Owner).await;
    let refused = stranger.confirm(&reset_path).await;
    assert_eq!(refused.status, 404, "{}", refused.body);
    let agent = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    let refused = agent.confirm(&reset_path).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(member.get("/console/payments").await.status, 200);

    let reset = owner.confirm(&reset_path).await;
    assert_eq!(reset.status, 201, "{}", reset.body);
    // Without a mail relay the owner hands the link over; the member
    // approves no payout for a day, as the page and the Team page say.
    assert!(
        reset
            .body
            .contains("cash@shop.bj cannot approve payouts until"),
        "{}",
        reset.body
    );
    let team = owner.get("/console/team").await;
    assert!(
        team.body.contains("Approves no payout until"),
        "{}",
        team.body
    );
    let at = reset.body.find("id=\"invite-link\">").unwrap();
    let link = reset.body[at..].split(['>', '<']).nth(1).unwrap();
    let path = &link[link.find("/console/invite/").unwrap()..];
    // The member's session ends at once, and the old password signs in no more.
    assert_eq!(
        member.get("/console/payments").await.location(),
        "/console/sign-in"
    );
    assert_eq!(
        Browser::new(&app)
            .sign_in("cash@shop.bj", PASSWORD, "")
            .await
            .status,
        401
    );
    // The link sets a new password; the lost authenticator is gone with the old one.
    let new_password = "another long enough password";
    Browser::new(&app).accept(path, new_password).await;
    let signed = Browser::new(&app)
        .sign_in("cash@shop.bj", new_password, "")
        .await;
    assert_eq!(signed.status, 303, "{}", signed.body);

    let audit = owner.get("/console/audit?action=user.reset").await;
    assert!(
        audit
            .body
            .contains("cash@shop.bj; link shown to owner@shop.bj; approvals held until"),
        "{}",
        audit.body
    );
    // An owner's own access is changed on the Security page, not reset.
    let own = owner
        .confirm(&format!(
            "/console/team/{}/reset",
            id_of_user("owner@shop.bj")
        ))
        .await;
    assert_eq!(own.status, 400);
    assert!(own.body.contains("Security page"), "{}", own.body);
}

/// A service that mails through a local SMTP sink, and the sink.
async fn app_with_mail_relay() -> (crate::support::smtp::SmtpSink, TestApp) {
    let relay = crate::support::smtp::SmtpSink::start().await;
    let smtp = relay.config();
    (relay, spawn_app_with(move |c| c.smtp = Some(smtp)).await)
}

#[service_test]
async fn a_reset_link_is_mailed_to_the_member_and_they_approve_nothing_for_a_day() {
    let (relay, app) = app_with_mail_relay().await;
    let (merchant, key, _) = app.merchant("Shop");
    app.accounts
        .set_require_second_approver(&merchant, Environment::Test, true)
        .unwrap();
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let _before = person(&app, &merchant, "cash@shop.bj", Role::Finance).await;
    let member_id = app
        .service
        .site
        .console
        .users
        .list(&merchant)
        .unwrap()
        .into_iter()
        .find(|u| u.email == "cash@shop.bj")
        .unwrap()
        .id;

    let reset = owner
        .confirm(&format!("/console/team/{member_id}/reset"))
        .await;
    assert_eq!(reset.status, 200, "{}", reset.body);
    assert!(
        !reset.body.contains("/console/invite/"),
        "the owner never sees the link: {}",
        reset.body
    );
    assert!(
        reset.body.contains("was mailed to them")
            && reset
                .body
                .contains("cash@shop.bj cannot approve payouts until"),
        "{}",
        reset.body
    );

    // The member receives it, from the configured sender.
    let mails = relay.mails();
    assert_eq!(mails.len(), 1, "{mails:?}");
    assert_eq!(mails[0].to, vec!["cash@shop.bj".to_string()]);
    assert_eq!(mails[0].from, "no-reply@pay.example.bj");
    assert_eq!(
        mails[0].header("subject").as_deref(),
        Some("Your new sign-in link for Shop")
    );
    let text = mails[0].text();
    let link = mails[0].link("/console/invite/");
    assert!(link.starts_with(&app.base), "{link}");
    assert!(text.contains("You cannot approve payouts until"), "{text}");
    let member = Browser::new(&app);
    member
        .accept(&link[app.base.len()..], "a brand new long password")
        .await;

    // A batch waits for approval: the member may not approve it yet, in the
    // console or otherwise; another person may.
    let batch = batch_by_key(&app, &key, "r-1").await;
    let page = format!("/console/bulk/{batch}");
    let refused = member
        .submit(&page, &format!("{page}/validate"), &[("action", "approve")])
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.body.contains("console access was reset"),
        "{}",
        refused.body
    );
    let team = owner.get("/console/team").await;
    assert!(
        team.body.contains("Approves no payout until"),
        "{}",
        team.body
    );
    let audit = owner.get("/console/audit?action=user.reset").await;
    assert!(
        audit
            .body
            .contains("cash@shop.bj; link mailed to cash@shop.bj; approvals held until"),
        "{}",
        audit.body
    );
    let held = owner.get("/console/audit?action=bulk.approve").await;
    assert_eq!(held.audited("bulk.approve", "refused"), 1, "{}", held.body);
    let other = person(&app, &merchant, "koffi@shop.bj", Role::Finance).await;
    let approved = other
        .submit(&page, &format!("{page}/validate"), &[("action", "approve")])
        .await;
    assert_eq!(approved.status, 303, "{}", approved.body);
}

/// With a mail relay, an invitation's link goes to the new member only:
/// an owner who could open it would be a second person of their own.
#[service_test]
async fn an_invitation_is_mailed_to_the_new_member_and_never_shown_to_the_owner() {
    let (relay, app) = app_with_mail_relay().await;
    let merchant = app.new_merchant("Shop");
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;

    let invited = owner
        .submit(
            "/console/team",
            "/console/team/invite",
            &[("email", "cash@shop.bj"), ("role", "finance")],
        )
        .await;
    assert_eq!(invited.status, 201, "{}", invited.body);
    assert!(
        !invited.body.contains("/console/invite/"),
        "the owner never sees the link: {}",
        invited.body
    );
    assert!(
        invited.body.contains("was mailed to them"),
        "{}",
        invited.body
    );

    let mails = relay.mails();
    assert_eq!(mails.len(), 1, "{mails:?}");
    assert_eq!(mails[0].to, vec!["cash@shop.bj".to_string()]);
    assert_eq!(
        mails[0].header("subject").as_deref(),
        Some("Your invitation to the payments console of Shop")
    );
    let text = mails[0].text();
    assert!(text.contains("as Finance"), "{text}");
    let link = mails[0].link("/console/invite/");
    let member = Browser::new(&app);
    member
        .accept(&link[app.base.len()..], "a brand new long password")
        .await;
    assert_eq!(member.get("/console/payments").await.status, 200);

    let audit = owner.get("/console/audit?action=user.invite").await;
    assert!(
        audit
            .body
            .contains("cash@shop.bj as finance; link mailed to cash@shop.bj"),
        "{}",
        audit.body
    );
}
