//! The second factor: enrolled only where the one-time link was opened or
//! with the current factor, and asked again, fresh, before approving a bulk
//! payout in live and before a live refund above `console.refund_code_above`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mmc_console_kit::totp;
use mmc_console_kit::users::Role;

use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

/// Unix seconds, at least 5 s before the next 30 s step: codes of the steps
/// either side of it stay valid while the test uses them.
async fn now_within_a_step() -> u64 {
    let secs = || {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    };
    let into = secs() % totp::STEP_SECS;
    if into >= totp::STEP_SECS - 5 {
        tokio::time::sleep(Duration::from_secs(totp::STEP_SECS - into + 1)).await;
    }
    secs()
}

fn user_id(app: &TestApp, merchant: &str, email: &str) -> String {
    app.service
        .site
        .console
        .users
        .list(merchant)
        .unwrap()
        .into_iter()
        .find(|u| u.email == email)
        .unwrap()
        .id
}

/// The authenticator secret the Security page shows while it waits for a code.
fn shown_secret(page: &Page) -> Vec<u8> {
    let marker = "id=\"totp-secret\">";
    let at = page
        .body
        .find(marker)
        .unwrap_or_else(|| panic!("no secret in {}", page.body))
        + marker.len();
    totp::from_base32(page.body[at..].split('<').next().unwrap()).unwrap()
}

async fn security(b: &Browser, form: &[(&str, &str)]) -> Page {
    b.submit("/console/security", "/console/security", form)
        .await
}

#[service_test]
async fn a_second_factor_is_enrolled_where_the_link_was_opened_or_with_the_current_one(
    app: TestApp,
) {
    let merchant = app.new_merchant("Shop");
    let link_session = person(&app, &merchant, "cash@shop.bj", Role::Finance).await;
    let id = user_id(&app, &merchant, "cash@shop.bj");

    // A session opened by the password alone enrols nothing.
    let by_password = Browser::new(&app);
    assert_eq!(
        by_password
            .sign_in("cash@shop.bj", PASSWORD, "")
            .await
            .status,
        303
    );
    let page = by_password.get("/console/security").await;
    assert!(
        page.body
            .contains("session opened by your invitation or reset link")
            && !page.body.contains("value=\"start\""),
        "{}",
        page.body
    );
    let refused = security(&by_password, &[("action", "start")]).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let users = &app.service.site.console.users;
    assert!(
        users.pending_totp(&id).unwrap().is_none(),
        "nothing started"
    );

    // The session the link opened does.
    let now = now_within_a_step().await;
    assert_eq!(
        security(&link_session, &[("action", "start")]).await.status,
        303
    );
    let first = shown_secret(&link_session.get("/console/security").await);
    let earlier = totp::code_at(&first, now - totp::STEP_SECS);
    let on = security(&link_session, &[("action", "confirm"), ("code", &earlier)]).await;
    assert_eq!(on.status, 303, "{}", on.body);

    // Replacing it takes a code of the current one, never used before.
    let with_code = Browser::new(&app);
    let signed = with_code
        .sign_in("cash@shop.bj", PASSWORD, &totp::code_at(&first, now))
        .await;
    assert_eq!(signed.status, 303, "{}", signed.body);
    let wrong = security(&with_code, &[("action", "replace"), ("code", "000000")]).await;
    assert_eq!(wrong.status, 400, "{}", wrong.body);
    let replayed = security(
        &with_code,
        &[("action", "replace"), ("code", &totp::code_at(&first, now))],
    )
    .await;
    assert_eq!(replayed.status, 400, "{}", replayed.body);
    assert!(replayed.body.contains("already used"), "{}", replayed.body);
    let next = totp::code_at(&first, now + totp::STEP_SECS);
    let replace = security(&with_code, &[("action", "replace"), ("code", &next)]).await;
    assert_eq!(replace.status, 303, "{}", replace.body);
    let second = shown_secret(&with_code.get("/console/security").await);
    assert_ne!(first, second);
    let confirmed = security(
        &with_code,
        &[
            ("action", "confirm"),
            ("code", &totp::code_at(&second, now)),
        ],
    )
    .await;
    assert_eq!(confirmed.status, 303, "{}", confirmed.body);
    assert!(
        with_code
            .get("/console/security")
            .await
            .body
            .contains("Two-factor authentication is on.")
    );
}

/// A person of `merchant` with `role` and a second factor, signed in with a
/// code and working in live: (browser, secret, the Unix time its code was for).
async fn live_person(
    app: &TestApp,
    merchant: &str,
    email: &str,
    role: Role,
) -> (Browser, Vec<u8>, u64) {
    person(app, merchant, email, role).await;
    let users = &app.service.site.console.users;
    let id = user_id(app, merchant, email);
    let secret = totp::from_base32(&users.start_totp(&id).unwrap()).unwrap();
    users.enable_totp(&id, 0).unwrap();
    let now = now_within_a_step().await;
    let b = Browser::new(app);
    let signed = b
        .sign_in(email, PASSWORD, &totp::code_at(&secret, now))
        .await;
    assert_eq!(signed.status, 303, "{}", signed.body);
    let live = b
        .submit(
            "/console/payments",
            "/console/environment",
            &[("environment", "live")],
        )
        .await;
    assert_eq!(live.status, 303, "{}", live.body);
    (b, secret, now)
}

async fn app_with_live_simulator(refund_code_above: u64) -> TestApp {
    spawn_app_with(move |c| {
        c.routing.insert(
            "live".into(),
            [("*".to_string(), "simulator".into())].into(),
        );
        c.components
            .entry("simulator".into())
            .or_default()
            .settings
            .insert("completion_delay_ms".into(), "0".into());
        c.console.refund_code_above = refund_code_above;
    })
    .await
}

#[service_test]
async fn approving_a_batch_in_live_asks_for_a_fresh_code() {
    let app = app_with_live_simulator(100_000).await;
    let (merchant, _, live_key) = app.merchant("Payroll");
    let (finance, secret, now) =
        live_person(&app, &merchant, "koffi@payroll.bj", Role::Finance).await;
    let id = &batch_by_key(&app, &live_key, "r-1").await;
    let page = format!("/console/bulk/{id}");
    let shown = finance.get(&format!("{page}/approve")).await;
    assert!(
        shown.body.contains("A new code from your authenticator"),
        "{}",
        shown.body
    );
    let approve = |code: String| {
        let (finance, page) = (&finance, &page);
        async move {
            finance
                .submit(
                    page,
                    &format!("{page}/validate"),
                    &[("action", "approve"), ("code", &code)],
                )
                .await
        }
    };
    let without = approve(String::new()).await;
    assert_eq!(without.status, 403, "{}", without.body);
    assert!(
        without.body.contains("Enter a new code"),
        "{}",
        without.body
    );
    // The code the session signed in with is spent.
    let reused = approve(totp::code_at(&secret, now)).await;
    assert_eq!(reused.status, 403, "{}", reused.body);
    let (_, still) = app
        .get(&live_key, &format!("/api/v1/bulk-payments/{id}/"))
        .await;
    assert_eq!(still["status"], "pending_validation", "{still}");
    // Both refusals are in the audit log, with why.
    let (entries, _) = app
        .service
        .site
        .console
        .audit
        .list(&merchant, &Default::default())
        .unwrap();
    let refused: Vec<_> = entries
        .iter()
        .filter(|e| e.action == "bulk.approve" && e.outcome == "refused")
        .collect();
    assert_eq!(refused.len(), 2, "{entries:?}");
    assert!(
        refused[0]
            .detail
            .as_deref()
            .unwrap_or_default()
            .contains("no fresh second-factor code"),
        "{entries:?}"
    );
    let fresh = approve(totp::code_at(&secret, now + totp::STEP_SECS)).await;
    assert_eq!(fresh.status, 303, "{}", fresh.body);
    let (_, approved) = app
        .get(&live_key, &format!("/api/v1/bulk-payments/{id}/"))
        .await;
    assert_ne!(approved["status"], "pending_validation", "{approved}");
}

#[service_test]
async fn a_live_refund_above_the_configured_amount_asks_for_a_fresh_code() {
    let app = app_with_live_simulator(500).await;
    let (merchant, _, live_key) = app.merchant("Shop");
    let (id, _) = completed_payment(&app, &live_key).await;
    let (finance, secret, now) = live_person(&app, &merchant, "cash@shop.bj", Role::Finance).await;
    let refund = |amount: &'static str, code: Option<String>| {
        let (finance, id) = (&finance, &id);
        async move {
            let review = finance
                .submit(
                    &page_path(id),
                    &format!("/console/payments/{id}/refund"),
                    &[("step", "review"), ("amount", amount)],
                )
                .await;
            assert_eq!(review.status, 200, "{}", review.body);
            let asks = review.body.contains("name=\"code\"");
            let mut form: Vec<(String, String)> =
                ["csrf", "step", "idempotency_key", "amount", "reason"]
                    .iter()
                    .map(|f| (f.to_string(), review.field(f)))
                    .collect();
            if let Some(code) = code {
                form.push(("code".into(), code));
            }
            let pairs: Vec<(&str, &str)> =
                form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            let done = finance
                .post(&format!("/console/payments/{id}/refund"), &pairs)
                .await;
            (asks, done, form)
        }
    };
    // Up to the amount: no code asked.
    let (asks, small, _) = refund("100", None).await;
    assert!(!asks);
    assert_eq!(small.status, 303, "{}", small.body);
    // Above it: refused without a fresh code, done with one.
    let (asks, refused, _) = refund("600", None).await;
    assert!(asks);
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(
        refused.body.contains("Enter a new code"),
        "{}",
        refused.body
    );
    let (_, done, form) = refund("600", Some(totp::code_at(&secret, now + totp::STEP_SECS))).await;
    assert_eq!(done.status, 303, "{}", done.body);
    // Submitted twice, with its code: the same refund, not a refusal.
    let pairs: Vec<(&str, &str)> = form.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let again = finance
        .post(&format!("/console/payments/{id}/refund"), &pairs)
        .await;
    assert_eq!(
        (again.status, again.location()),
        (303, done.location()),
        "{}",
        again.body
    );
    // The code serves that refund only.
    let (_, other, _) = refund("50", None).await;
    assert_eq!(other.status, 303, "under the amount: {}", other.body);
    let mut reused = form.clone();
    let key = reused
        .iter_mut()
        .find(|(k, _)| k == "idempotency_key")
        .unwrap();
    key.1 = uuid::Uuid::new_v4().to_string();
    let pairs: Vec<(&str, &str)> = reused
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let refused = finance
        .post(&format!("/console/payments/{id}/refund"), &pairs)
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let (_, refunds) = app
        .get(&live_key, &format!("/api/v1/collect/payments/{id}/refunds"))
        .await;
    let mut amounts: Vec<u64> = refunds["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["amount"].as_u64())
        .collect();
    amounts.sort_unstable();
    assert_eq!(amounts, vec![50, 100, 600], "{refunds}");
}

/// The recovery codes a page shows (none when it shows none).
fn shown_codes(page: &Page) -> Vec<String> {
    let Some(at) = page.body.find("<ol id=\"recovery-codes\"") else {
        return Vec::new();
    };
    let list = page.body[at..].split("</ol>").next().unwrap();
    list.split("<code>")
        .skip(1)
        .map(|c| c.split('<').next().unwrap().to_string())
        .collect()
}

/// The text between `start` and the next `end` on the page.
fn between<'a>(page: &'a Page, start: &str, end: &str) -> &'a str {
    let at = page
        .body
        .find(start)
        .unwrap_or_else(|| panic!("no {start} in {}", page.body))
        + start.len();
    page.body[at..].split(end).next().unwrap()
}

/// The recovery codes stored for `user_id`: (hash, used at).
fn stored_codes(app: &TestApp, user_id: &str) -> Vec<(String, Option<i64>)> {
    app.service
        .site
        .console
        .tallies
        .read(|c| {
            c.query(
                "SELECT code_hash, used_ms FROM console_recovery_codes WHERE user_id = ?1",
                &[user_id.into()],
            )?
            .iter()
            .map(|r| Ok((r.text(0)?, r.opt_int(1)?)))
            .collect()
        })
        .unwrap()
}

#[service_test]
async fn setup_shows_a_qr_code_and_ten_recovery_codes_once_stored_only_hashed(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    let owner = person(&app, &merchant, "awa@shop.bj", Role::Owner).await;
    let id = user_id(&app, &merchant, "awa@shop.bj");
    assert_eq!(security(&owner, &[("action", "start")]).await.status, 303);

    // The QR code beside the key holds the authenticator's URI.
    let setup = owner.get("/console/security").await;
    let secret = shown_secret(&setup);
    let svg = between(&setup, "<figure class=\"qr\" id=\"totp-qr\">", "</figure>");
    assert_eq!(
        super::links::decode_qr(svg),
        totp::otpauth_uri("Shop", "awa@shop.bj", &totp::base32(&secret))
    );

    // The first code confirmed: ten codes, on the page the form redirects to.
    let now = now_within_a_step().await;
    let on = security(
        &owner,
        &[
            ("action", "confirm"),
            ("code", &totp::code_at(&secret, now)),
        ],
    )
    .await;
    assert_eq!(
        (on.status, on.location()),
        (303, "/console/security?done=codes"),
        "{}",
        on.body
    );
    assert!(shown_codes(&on).is_empty());
    let shown = owner.get(on.location()).await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    let codes = shown_codes(&shown);
    assert_eq!(codes.len(), 10, "{}", shown.body);
    let distinct: std::collections::HashSet<_> = codes.iter().collect();
    assert_eq!(distinct.len(), 10);
    for code in &codes {
        // xxxx-xxxx-xxxx in lowercase base32: 60 random bits.
        let bare = code.replace('-', "");
        assert!(code.len() == 14 && bare.len() == 12, "{code}");
        assert!(
            bare.bytes()
                .all(|b| b.is_ascii_lowercase() || (b'2'..=b'7').contains(&b)),
            "{code}"
        );
    }
    assert!(
        shown.body.contains("Save these ten recovery codes now"),
        "{}",
        shown.body
    );

    // A reload shows none, and makes none.
    let reloaded = owner.get(on.location()).await;
    assert!(shown_codes(&reloaded).is_empty(), "{}", reloaded.body);
    assert!(codes.iter().all(|c| !reloaded.body.contains(c.as_str())));
    assert!(
        reloaded.body.contains("shown once and are not shown again")
            && reloaded.body.contains("10 of 10 recovery codes left."),
        "{}",
        reloaded.body
    );

    // Stored as hashes only: in the table, and nowhere in the file.
    let stored = stored_codes(&app, &id);
    assert_eq!(stored.len(), 10);
    for (hash, used) in &stored {
        assert!(hash.len() == 64 && hash.bytes().all(|b| b.is_ascii_hexdigit()));
        assert!(used.is_none());
    }
    if !on_postgres() {
        let mut bytes = Vec::new();
        for file in ["mmc.db", "mmc.db-wal"] {
            if let Ok(b) = std::fs::read(app.data_dir.path().join(file)) {
                bytes.extend(b);
            }
        }
        assert!(bytes.len() > 10_000, "the store was read");
        let text = String::from_utf8_lossy(&bytes).to_lowercase();
        for code in &codes {
            assert!(!text.contains(code.as_str()), "{code} in clear");
            assert!(!text.contains(&code.replace('-', "")), "{code} in clear");
        }
    }
}

/// A person of `merchant` with a second factor: (their id, secret, codes).
fn with_factor(app: &TestApp, merchant: &str, email: &str) -> (String, Vec<u8>, Vec<String>) {
    let users = &app.service.site.console.users;
    let id = user_id(app, merchant, email);
    let secret = totp::from_base32(&users.start_totp(&id).unwrap()).unwrap();
    let codes = users.enable_totp(&id, 0).unwrap();
    (id, secret, codes)
}

#[service_test]
async fn a_recovery_code_signs_its_own_person_in_once_and_a_new_set_replaces_the_old(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    person(&app, &merchant, "awa@shop.bj", Role::Owner).await;
    person(&app, &merchant, "koffi@shop.bj", Role::Finance).await;
    let (awa, _, codes) = with_factor(&app, &merchant, "awa@shop.bj");
    let (_, koffi_secret, koffi_codes) = with_factor(&app, &merchant, "koffi@shop.bj");

    // Another person's code is no code of hers.
    let theirs = Browser::new(&app)
        .sign_in("awa@shop.bj", PASSWORD, &koffi_codes[0])
        .await;
    assert_eq!(theirs.status, 401, "{}", theirs.body);
    assert_eq!(stored_codes(&app, &awa).len(), 10);

    // Hers, typed in capitals with spaces, signs her in with a second factor.
    let b = Browser::new(&app);
    let typed = format!(" {} ", codes[0].to_uppercase().replace('-', " "));
    let signed = b.sign_in("awa@shop.bj", PASSWORD, &typed).await;
    assert_eq!(signed.status, 303, "{}", signed.body);
    let live = b
        .submit(
            "/console/payments",
            "/console/environment",
            &[("environment", "live")],
        )
        .await;
    assert_eq!(
        live.status, 303,
        "a session with a second factor: {}",
        live.body
    );
    let used: Vec<_> = stored_codes(&app, &awa)
        .into_iter()
        .filter_map(|(_, at)| at)
        .collect();
    assert_eq!(used.len(), 1, "marked used");
    let now_ms = std::time::SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    assert!((now_ms - used[0]).abs() < 60_000, "when: {}", used[0]);

    // Once only.
    let again = Browser::new(&app)
        .sign_in("awa@shop.bj", PASSWORD, &codes[0])
        .await;
    assert_eq!(again.status, 401, "{}", again.body);
    let page = b.get("/console/security").await;
    assert!(
        page.body.contains("9 of 10 recovery codes left."),
        "{}",
        page.body
    );

    // A new set asks the current password (or a code) and replaces the old.
    let wrong = security(
        &b,
        &[("action", "recovery"), ("password", "not the password")],
    )
    .await;
    assert_eq!(wrong.status, 400, "{}", wrong.body);
    assert!(shown_codes(&wrong).is_empty());
    let renewed = security(&b, &[("action", "recovery"), ("password", PASSWORD)]).await;
    assert_eq!(
        (renewed.status, renewed.location()),
        (303, "/console/security?done=codes"),
        "{}",
        renewed.body
    );
    let fresh = shown_codes(&b.get(renewed.location()).await);
    assert_eq!(fresh.len(), 10);
    assert!(fresh.iter().all(|c| !codes.contains(c)));
    let old = Browser::new(&app)
        .sign_in("awa@shop.bj", PASSWORD, &codes[1])
        .await;
    assert_eq!(old.status, 401, "the old set is gone");
    let new = Browser::new(&app)
        .sign_in("awa@shop.bj", PASSWORD, &fresh[0])
        .await;
    assert_eq!(new.status, 303, "{}", new.body);

    // Koffi asks a new set with a code of his authenticator.
    let k = Browser::new(&app);
    let now = now_within_a_step().await;
    let signed = k
        .sign_in(
            "koffi@shop.bj",
            PASSWORD,
            &totp::code_at(&koffi_secret, now),
        )
        .await;
    assert_eq!(signed.status, 303, "{}", signed.body);
    let next = totp::code_at(&koffi_secret, now + totp::STEP_SECS);
    let renewed = security(&k, &[("action", "recovery"), ("code", &next)]).await;
    assert_eq!(renewed.status, 303, "{}", renewed.body);
    assert_eq!(shown_codes(&k.get(renewed.location()).await).len(), 10);

    // An access reset clears them.
    let users = &app.service.site.console.users;
    users.reset_member(&merchant, &awa).unwrap();
    assert!(stored_codes(&app, &awa).is_empty());
    assert_eq!(users.recovery_codes_left(&awa).unwrap(), 0);
}

#[service_test]
async fn a_recovery_code_stands_in_for_the_fresh_code_of_a_live_approval_once() {
    let app = app_with_live_simulator(100_000).await;
    let (merchant, _, live_key) = app.merchant("Payroll");
    let (finance, _, _) = live_person(&app, &merchant, "koffi@payroll.bj", Role::Finance).await;
    let id = user_id(&app, &merchant, "koffi@payroll.bj");
    let codes = app
        .service
        .site
        .console
        .users
        .renew_recovery_codes(&id)
        .unwrap();
    let approve = |batch: String, code: String| {
        let finance = &finance;
        async move {
            let page = format!("/console/bulk/{batch}");
            finance
                .submit(
                    &page,
                    &format!("{page}/validate"),
                    &[("action", "approve"), ("code", &code)],
                )
                .await
        }
    };
    let first = batch_by_key(&app, &live_key, "r-1").await;
    let done = approve(first.clone(), codes[0].clone()).await;
    assert_eq!(done.status, 303, "{}", done.body);
    let (_, approved) = app
        .get(&live_key, &format!("/api/v1/bulk-payments/{first}/"))
        .await;
    assert_ne!(approved["status"], "pending_validation", "{approved}");
    // Used: it approves no other batch.
    let second = batch_by_key(&app, &live_key, "r-2").await;
    let refused = approve(second.clone(), codes[0].clone()).await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    let (_, still) = app
        .get(&live_key, &format!("/api/v1/bulk-payments/{second}/"))
        .await;
    assert_eq!(still["status"], "pending_validation", "{still}");
}

#[service_test]
async fn an_invitation_offers_the_least_role_first(app: TestApp) {
    let merchant = app.new_merchant("Shop");
    let owner = person(&app, &merchant, "awa@shop.bj", Role::Owner).await;
    let team = owner.get("/console/team").await;
    let select = between(&team, "<select name=\"role\">", "</select>");
    assert_eq!(select.matches(" selected").count(), 1, "{select}");
    assert!(
        select.contains("<option value=\"support\" selected>Support</option>"),
        "{select}"
    );
}
