//! The second factor: enrolled only where the one-time link was opened or
//! with the current factor, and asked again, fresh, before approving a bulk
//! payout in live and before a live refund above `console.refund_code_above`.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use mmc_host::console::totp;
use mmc_host::console::users::Role;

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
