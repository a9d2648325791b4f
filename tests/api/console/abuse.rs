//! The console under abuse: guesses counted before the password is checked,
//! password checks a few at a time.

use mmc_host::console::throttle::{PER_ACCOUNT, PER_CLIENT};
use mmc_host::console::users::Role;

use super::*;
use crate::support::*;
use mmc_test_kit::service_test;

const CHECKS: &str = "mmc_console_password_checks_total";
const REFUSED: &str = "mmc_console_sign_ins_refused_total";

async fn checks(app: &TestApp) -> f64 {
    counter(&app.metrics().await, CHECKS, "")
}

/// A wrong sign-in for `email` from `browser`, whose sign-in form `pre` is.
async fn guess(browser: &Browser, pre: &str, email: &str, i: usize) -> Page {
    let password = format!("wrong guess number {i}");
    browser
        .post(
            "/console/sign-in",
            &[("pre", pre), ("email", email), ("password", &password)],
        )
        .await
}

#[service_test]
async fn simultaneous_guesses_for_one_account_reach_the_password_check_at_most_its_limit(
    app: TestApp,
) {
    let merchant = app.new_merchant("Shop");
    let _owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let before = checks(&app).await;
    let browser = Browser::new(&app);
    let pre = browser.get("/console/sign-in").await.field("pre");
    let answers =
        futures::future::join_all((0..50).map(|i| guess(&browser, &pre, "owner@shop.bj", i))).await;
    let wrong = answers.iter().filter(|p| p.status == 401).count();
    let refused: Vec<_> = answers.iter().filter(|p| p.status == 429).collect();
    assert_eq!(
        wrong + refused.len(),
        50,
        "{:?}",
        answers.iter().map(|p| p.status).collect::<Vec<_>>()
    );
    assert!(
        refused
            .iter()
            .all(|p| p.headers.contains_key("retry-after"))
    );
    let checked = checks(&app).await - before;
    assert_eq!(checked, wrong as f64, "every check answered 401, no other");
    assert!(
        (1..=PER_ACCOUNT as usize).contains(&wrong),
        "{wrong} guesses reached the password check"
    );
    // A guess refused as busy was not counted: one at a time, the account
    // has what is left of its limit, and not one more.
    for i in wrong..PER_ACCOUNT as usize {
        assert_eq!(guess(&browser, &pre, "owner@shop.bj", i).await.status, 401);
    }
    let limited = Browser::new(&app)
        .sign_in("owner@shop.bj", PASSWORD, "")
        .await;
    assert_eq!(limited.status, 429, "{}", limited.body);
    assert_eq!(checks(&app).await - before, PER_ACCOUNT as f64);
    assert!(counter(&app.metrics().await, REFUSED, "reason=\"throttled\"") >= 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_checks_run_a_few_at_a_time_and_the_rest_are_answered_busy_unhashed() {
    let app = spawn_app_with(|c| c.console.password_checks_at_once = 2).await;
    let merchant = app.new_merchant("Shop");
    let _owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let browser = Browser::new(&app);
    let pre = browser.get("/console/sign-in").await.field("pre");

    // Every place taken: a sign-in is answered 429 at once, unhashed, and
    // its attempt is not counted against the account.
    let checks_gate = &app.service.site.console.password_checks;
    let held = [
        checks_gate.permit().await.unwrap(),
        checks_gate.permit().await.unwrap(),
    ];
    let before = checks(&app).await;
    for i in 0..2 * PER_ACCOUNT as usize {
        let busy = guess(&browser, &pre, "owner@shop.bj", i).await;
        assert_eq!(busy.status, 429, "{}", busy.body);
        assert_eq!(busy.headers["retry-after"], "1");
        assert!(
            busy.body
                .contains("The console is busy. Try again in a few seconds."),
            "{}",
            busy.body
        );
    }
    let metrics = app.metrics().await;
    assert_eq!(counter(&metrics, CHECKS, ""), before, "nothing hashed");
    assert_eq!(
        counter(&metrics, REFUSED, "reason=\"busy\""),
        2.0 * PER_ACCOUNT as f64
    );
    drop(held);
    for i in 0..PER_ACCOUNT as usize {
        assert_eq!(guess(&browser, &pre, "owner@shop.bj", i).await.status, 401);
    }
    assert_eq!(
        guess(&browser, &pre, "owner@shop.bj", 99).await.status,
        429,
        "the account's limit, counted from the checked guesses only"
    );

    // Many accounts at once, under the client's limit: each is checked or
    // answered busy, never both, never neither.
    let before = checks(&app).await;
    let many = (PER_CLIENT - PER_ACCOUNT) as usize;
    let emails: Vec<String> = (0..many).map(|i| format!("someone{i}@shop.bj")).collect();
    let answers = futures::future::join_all(
        emails
            .iter()
            .enumerate()
            .map(|(i, e)| guess(&browser, &pre, e, i)),
    )
    .await;
    let wrong = answers.iter().filter(|p| p.status == 401).count();
    let busy = answers
        .iter()
        .filter(|p| p.status == 429 && p.body.contains("The console is busy"))
        .count();
    assert_eq!(wrong + busy, many);
    assert_eq!(checks(&app).await - before, wrong as f64);
}
