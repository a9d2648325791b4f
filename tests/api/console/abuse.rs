//! The console under abuse: guesses counted before the password is checked,
//! password checks a few at a time, bodies refused before they are read.

use mmc_console_kit::throttle::{PER_ACCOUNT, PER_CLIENT};
use mmc_console_kit::users::Role;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

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

/// Sends `head` and the first `sent` bytes of a body, and reads the answer
/// without sending the rest: the status line, and the headers' text.
async fn answer_before_the_body(app: &TestApp, head: &str, sent: &[u8]) -> (u16, String) {
    let addr = app.base.trim_start_matches("http://");
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(sent).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    // Until the end of the answer's headers: the rest of the body never comes.
    while !got.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf).await.unwrap();
        assert!(
            n > 0,
            "closed without an answer: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    let text = String::from_utf8_lossy(&got).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {text}"));
    (status, text)
}

fn post_head(path: &str, content_type: &str, length: usize, cookie: &str) -> String {
    format!(
        "POST {path} HTTP/1.1\r\nHost: localhost\r\nContent-Type: {content_type}\r\nContent-Length: {length}\r\nCookie: {cookie}\r\n\r\n"
    )
}

#[service_test]
async fn console_bodies_are_refused_before_they_are_read(app: TestApp) {
    const MIB: usize = 1024 * 1024;
    // A signed-out upload: sent to sign in, its body never read.
    let (status, head) = answer_before_the_body(
        &app,
        &post_head(
            "/console/bulk/upload",
            "multipart/form-data; boundary=x",
            MIB,
            "",
        ),
        b"--x\r\n",
    )
    .await;
    assert_eq!(status, 303, "{head}");
    assert!(head.contains("location: /console/sign-in"), "{head}");

    // A form declared larger than a form may be: 413 on its length alone.
    let (status, _) = answer_before_the_body(
        &app,
        &post_head(
            "/console/sign-in",
            "application/x-www-form-urlencoded",
            MIB,
            "",
        ),
        b"email=",
    )
    .await;
    assert_eq!(status, 413);
    // Larger than the upload limit, signed in or not.
    let (status, _) = answer_before_the_body(
        &app,
        &post_head(
            "/console/bulk/upload",
            "multipart/form-data; boundary=x",
            64 * MIB,
            "",
        ),
        b"",
    )
    .await;
    assert_eq!(status, 413);

    // Signed in, a file ahead of the form's CSRF token, or a wrong token:
    // 403 before the file is read.
    let merchant = app.new_merchant("Payroll");
    let maker = person(&app, &merchant, "awa@payroll.bj", Role::Finance).await;
    let cookie = format!(
        "mmc_console={}",
        maker.cookies.lock().unwrap()["mmc_console"]
    );
    let file_first = b"--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.csv\"\r\nContent-Type: text/csv\r\n\r\nbeneficiary_name,";
    let wrong_token = b"--x\r\nContent-Disposition: form-data; name=\"csrf\"\r\n\r\n0123456789abcdef0123456789abcdef\r\n--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.csv\"\r\n\r\nbeneficiary_name,";
    for sent in [&file_first[..], &wrong_token[..]] {
        let (status, head) = answer_before_the_body(
            &app,
            &post_head(
                "/console/bulk/upload",
                "multipart/form-data; boundary=x",
                MIB,
                &cookie,
            ),
            sent,
        )
        .await;
        assert_eq!(status, 403, "{head}");
    }
    // The person's session is untouched, and a right upload still goes.
    assert_eq!(maker.get("/console/bulk").await.status, 200);
}
