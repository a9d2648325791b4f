//! The hosted checkout page, driven in Debian's headless Chromium (installed
//! with playwright-core by `make browser`, a dependency of `make test`).

use std::process::Command;

use serde_json::{Value, json};

use crate::support::*;
use mmc_test_kit::service_test;

fn pay_in_browser(url: &str, lang: &str, operator: &str, phone: &str, otp: Option<&str>) -> Value {
    let dir = root().join("tests/browser");
    assert!(
        dir.join("node_modules/playwright-core").exists(),
        "run `make browser` (make test does)"
    );
    let shot = target_dir().join(format!("checkout-{lang}-{operator}.png"));
    let mut cmd = Command::new("node");
    cmd.current_dir(&dir)
        .arg("checkout.mjs")
        .arg(url)
        .arg(&shot)
        .args([lang, operator, phone]);
    if let Some(otp) = otp {
        cmd.arg(otp);
    }
    let out = cmd.output().expect("node runs");
    assert!(
        out.status.success(),
        "browser run failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&shot).expect("a screenshot was taken");
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n", "the screenshot is a PNG");
    serde_json::from_slice(out.stdout.trim_ascii()).expect("one JSON line")
}

/// Runs `node <args>` in tests/browser (off the async workers) and parses
/// the one JSON line it prints.
pub(crate) async fn node_json(args: Vec<String>) -> Value {
    tokio::task::spawn_blocking(move || {
        let out = Command::new("node")
            .current_dir(root().join("tests/browser"))
            .args(&args)
            .output()
            .expect("node runs");
        assert!(
            out.status.success(),
            "node {args:?}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<Value>(out.stdout.trim_ascii()).unwrap()
    })
    .await
    .unwrap()
}

/// A hosted payment of 2,500 XOF in Benin with `description`.
async fn hosted_described(app: &TestApp, key: &str, description: &str) -> Value {
    let body = json!({"reference": format!("h-{}", uuid::Uuid::new_v4()), "amount": 2500,
        "currency": "XOF", "country": "BJ", "mode": "hosted", "description": description});
    app.create_ok(key, &body).await.1
}

async fn hosted(app: &TestApp, key: &str, country: &str, amount: u64) -> Value {
    let body = json!({"reference": format!("h-{}", uuid::Uuid::new_v4()), "amount": amount, "currency": "XOF", "country": country, "mode": "hosted"});
    app.create_ok(key, &body).await.1
}

#[service_test]
async fn a_customer_pays_through_the_hosted_page_in_french_and_english() {
    let app = spawn_app_completing_after(1500).await;
    let m = app.accounts.create_merchant("Boutique Awa").unwrap();
    let key = app
        .accounts
        .create_key(&m.id, mmc_accounts::Environment::Test)
        .unwrap()
        .key;

    let p = hosted(&app, &key, "BJ", 2500).await;
    let url = p["checkout_url"].as_str().unwrap().to_string();
    let result = tokio::task::spawn_blocking(move || {
        pay_in_browser(&url, "fr", "mtn-bj", "0166001234", None)
    })
    .await
    .unwrap();
    assert_eq!(result["merchant"], "Boutique Awa");
    assert_eq!(result["htmlLang"], "fr");
    assert!(
        result["amount"]
            .as_str()
            .unwrap()
            .contains("2\u{202f}500 XOF"),
        "{result}"
    );
    assert_eq!(result["status"], "completed");
    assert!(
        result["message"]
            .as_str()
            .unwrap()
            .contains("Paiement effectué"),
        "{result}"
    );
    let (_, after) = app
        .get(&key, &format!("/api/v1/collect/payments/{}", id_of(&p)))
        .await;
    assert_eq!(after["status"], "completed");
    assert_eq!(after["operator"], "mtn-bj");
    assert_eq!(after["customer"]["phone"], "+2290166001234");

    // The OTP operator, in English.
    let p = hosted(&app, &key, "BJ", 1000).await;
    let url = p["checkout_url"].as_str().unwrap().to_string();
    let result = tokio::task::spawn_blocking(move || {
        pay_in_browser(&url, "en", "coris-bj", "+2290166000001", Some("123456"))
    })
    .await
    .unwrap();
    assert_eq!(result["htmlLang"], "en");
    assert_eq!(result["status"], "completed");
    assert!(
        result["message"]
            .as_str()
            .unwrap()
            .contains("Payment completed")
    );
}

#[service_test]
async fn the_page_explains_bad_input_failure_and_expiry(app: TestApp) {
    let key = app.test_key("Shop");
    let p = hosted(&app, &key, "CI", 1000).await;
    let url = p["checkout_url"].as_str().unwrap().to_string();
    let page = app
        .client
        .get(&url)
        .header("Accept-Language", "fr-FR,fr;q=0.9")
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(
        html.contains("<option value=\"orange-ci\"")
            && html.contains("wave-ci")
            && !html.contains("mtn-bj"),
        "the country's operators"
    );
    assert!(html.contains("name=\"viewport\""));
    // A number of another country: the form again, with the reason.
    let resp = app
        .client
        .post(&url)
        .header("Accept-Language", "en")
        .form(&[("operator", "orange-ci"), ("phone", "+22890000001")])
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    assert!(
        resp.text()
            .await
            .unwrap()
            .contains("not a valid mobile number")
    );
    // An operator error (…0005): the page says it failed.
    let resp = app
        .client
        .post(&url)
        .form(&[("operator", "orange-ci"), ("phone", "0700000005")])
        .send()
        .await
        .unwrap();
    let html = resp.text().await.unwrap();
    assert!(html.contains("data-status=\"failed\""), "{html}");
    // The customer reads a reason in their words, never the operator's or
    // the adapter's message (that is the merchant's, in the API).
    assert!(
        html.contains("Try again later or with another operator."),
        "{html}"
    );
    let id = url.rsplit('/').next().unwrap();
    let (_, p) = app
        .get(&key, &format!("/api/v1/collect/payments/{id}"))
        .await;
    let message = p["failure_message"].as_str().unwrap();
    assert!(!html.contains(&esc_like(message)), "{html}");
    // Unknown link.
    let resp = app
        .client
        .get(app.url("/checkout/00000000-0000-4000-8000-000000000000"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
}

/// `text` as the page escapes it.
fn esc_like(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// The page is for hosted payments only (a direct payment's id is no link to
/// its customer's data), shows a number the merchant gave only masked, and
/// uses it when the customer leaves the field empty.
#[service_test]
async fn the_page_serves_hosted_payments_only_and_masks_the_phone(app: TestApp) {
    let key = app.test_key("Shop");
    let direct = json!({"reference": "d-1", "amount": 1000, "currency": "XOF", "country": "BJ",
        "operator": "mtn-bj", "customer": {"phone": "+2290166000004"}});
    let (id, _) = app.create_ok(&key, &direct).await;
    let page = app
        .client
        .get(app.url(&format!("/checkout/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(page.status(), 404);
    assert!(!page.text().await.unwrap().contains("0166000004"));

    let hosted = json!({"reference": "h-1", "amount": 1000, "currency": "XOF", "country": "BJ",
        "mode": "hosted", "customer": {"phone": "+2290166001234"}});
    let (_, p) = app.create(&key, &new_key(), &hosted).await;
    let url = p["checkout_url"].as_str().unwrap().to_string();
    let html = app
        .client
        .get(&url)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!html.contains("0166001234"), "{html}");
    assert!(html.contains("+229••••••••34"), "{html}");
    // Left empty: the merchant's number is used.
    let resp = app
        .client
        .post(&url)
        .form(&[("operator", "mtn-bj"), ("phone", "")])
        .send()
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{}", resp.status());
    let (_, after) = app
        .get(&key, &format!("/api/v1/collect/payments/{}", id_of(&p)))
        .await;
    assert_eq!(after["customer"]["phone"], "+2290166001234", "{after}");
    assert_eq!(after["operator"], "mtn-bj");
}

/// Ten guesses sent at once through the page: the attempt is reserved under
/// the writer before the code goes to the operator, so exactly three reach it.
#[service_test]
async fn parallel_otp_guesses_on_the_page_reach_the_operator_three_times() {
    let app = spawn_app_with(|c| c.admin_token = Some(ADMIN.into())).await;
    let key = app.test_key("Shop");
    let p = hosted(&app, &key, "BJ", 1000).await;
    let url = p["checkout_url"].as_str().unwrap().to_string();
    let id = id_of(&p);
    let resp = app
        .client
        .post(&url)
        .form(&[("operator", "coris-bj"), ("phone", "+2290166000001")])
        .send()
        .await
        .unwrap();
    assert!(resp.text().await.unwrap().contains("one-time-code"));

    let guesses = (0..10).map(|i| {
        let client = app.client.clone();
        let url = format!("{url}/otp");
        async move {
            let resp = client
                .post(&url)
                .form(&[("otp", format!("00000{i}"))])
                .send()
                .await
                .unwrap();
            resp.status().as_u16()
        }
    });
    let statuses = futures::future::join_all(guesses).await;
    assert!(statuses.iter().all(|s| *s < 500), "{statuses:?}");
    // Guesses refused while another was being checked are the customer's to
    // send again: they keep trying until the page says no more.
    for i in 0..10 {
        let resp = app
            .client
            .post(format!("{url}/otp"))
            .form(&[("otp", format!("11111{i}"))])
            .send()
            .await
            .unwrap();
        if resp
            .text()
            .await
            .unwrap()
            .contains("data-status=\"failed\"")
        {
            break;
        }
    }

    let (_, payment) = app
        .get(&key, &format!("/api/v1/collect/payments/{id}"))
        .await;
    assert_eq!(payment["status"], "failed", "{payment}");
    assert_eq!(payment["failure_code"], "otp_attempts_exceeded");
    // The audit trail of adapter calls: three codes went to the operator,
    // and no fourth is listed a moment after the third.
    calls_once_listed(&app, &id, "confirm_otp", 3).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let calls = calls_of(&app, &id).await;
    let tried = calls
        .iter()
        .filter(|c| c["operation"] == "confirm_otp")
        .count();
    assert_eq!(tried, 3, "{calls:?}");
}

/// The page where customers type their phone: it cannot be framed, loads
/// nothing but its own hashed style, leaks no referrer, is never sniffed as
/// another type; it shows what is paid for and the time left, in the
/// customer's language; and `HEAD` is answered as `GET` is, without a body.
#[service_test]
async fn the_page_is_hardened_shows_what_is_paid_and_answers_head(app: TestApp) {
    let key = app.test_key("Boutique Awa");
    let p = hosted_described(&app, &key, "Panier <b>42</b>").await;
    let url = p["checkout_url"].as_str().unwrap().to_string();

    let get = app
        .client
        .get(&url)
        .header("accept-language", "fr-FR,fr;q=0.9,en;q=0.5")
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 200);
    let headers = get.headers().clone();
    let csp = headers["content-security-policy"].to_str().unwrap();
    for part in [
        "default-src 'none'",
        "frame-ancestors 'none'",
        "style-src 'sha256-",
        "form-action 'self'",
    ] {
        assert!(csp.contains(part), "{part} in {csp}");
    }
    assert!(!csp.contains("unsafe-inline"), "{csp}");
    assert_eq!(headers["x-frame-options"], "DENY");
    assert_eq!(headers["referrer-policy"], "no-referrer");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    let html = get.text().await.unwrap();
    assert!(html.contains(r#"<html lang="fr">"#));
    assert!(
        html.contains("Panier &lt;b&gt;42&lt;/b&gt;"),
        "the description, escaped"
    );
    assert!(
        html.contains(r#"id="time-left""#) && html.contains("Temps restant pour payer : 15 min"),
        "{html}"
    );
    // ?lang= wins over the header.
    let en = app
        .client
        .get(format!("{url}?lang=en"))
        .header("accept-language", "fr")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(en.contains("Time left to pay: 15 min"), "{en}");

    // HEAD: the same status and headers, the GET's length, no body.
    let get_len = app
        .client
        .get(&url)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
        .len();
    let head = app.client.head(&url).send().await.unwrap();
    assert_eq!(head.status(), 200);
    assert_eq!(
        head.headers()["content-security-policy"],
        headers["content-security-policy"]
    );
    assert_eq!(
        head.headers()["content-length"].to_str().unwrap(),
        get_len.to_string()
    );
    assert!(head.bytes().await.unwrap().is_empty());
    // Everywhere: the API, the host's own endpoints and the admin listener.
    let api = app
        .client
        .head(app.url(&format!("/api/v1/collect/payments/{}", id_of(&p))))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(api.status(), 200);
    for path in ["/healthz", "/metrics", "/docs", "/docs/errors"] {
        assert_eq!(
            app.client
                .head(app.url(path))
                .send()
                .await
                .unwrap()
                .status(),
            200,
            "{path}"
        );
    }
    assert_eq!(
        app.client
            .head(app.admin_url("/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
}

/// `/docs/errors` is the errors chapter as HTML: in Chromium, the `doc_url`
/// of three error codes scrolls to each one's row, and the page's policy
/// blocks nothing it needs (no CSP violation reported).
#[service_test]
async fn docs_anchors_of_error_codes_scroll_to_their_rows(app: TestApp) {
    let out = node_json(vec![
        "docs.mjs".into(),
        app.url("/docs/errors"),
        "phone_invalid".into(),
        "operator_busy".into(),
        "idempotency_key_reused".into(),
    ])
    .await;
    assert_eq!(out["contentType"], "text/html; charset=utf-8", "{out}");
    assert_eq!(out["violations"], json!([]), "{out}");
    for code in ["phone_invalid", "operator_busy", "idempotency_key_reused"] {
        let a = &out["anchors"][code];
        assert!(a.is_object(), "#{code} exists: {out}");
        let top = a["top"].as_i64().unwrap();
        assert!(
            a["scrollY"].as_i64().unwrap() > 0,
            "scrolled for #{code}: {a}"
        );
        assert!(
            (-5..100).contains(&top),
            "#{code} at the top of the viewport: {a}"
        );
        assert!(a["row"].as_str().unwrap().contains(code), "{a}");
    }
}

/// The checkout page passes an accessibility audit (axe-core) at a phone's
/// width and a desktop's, in both languages, with nothing serious or critical
/// and nothing overflowing the screen sideways.
#[service_test]
async fn the_checkout_page_passes_an_accessibility_audit_on_a_phone_and_a_desktop(app: TestApp) {
    let key = app.test_key("Boutique Awa");
    let p = hosted_described(&app, &key, "Panier 42").await;
    for lang in ["fr", "en"] {
        let url = format!("{}?lang={lang}", p["checkout_url"].as_str().unwrap());
        let shots = target_dir().join(format!("a11y-checkout-{lang}"));
        let out = node_json(vec!["a11y.mjs".into(), url, shots.display().to_string()]).await;
        println!("{lang}: {out}");
        for width in ["phone", "desktop"] {
            assert_eq!(out[width]["serious"], json!([]), "{lang} {width}: {out}");
            assert_eq!(out[width]["overflow"], false, "{lang} {width}: {out}");
        }
    }
}
