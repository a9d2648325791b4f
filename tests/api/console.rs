//! The merchant console over real HTTP with cookies: people sign in, the
//! console holds them to their role's API scopes, and its refund is the API's.

use std::collections::HashMap;
use std::sync::Mutex;

use mmc_host::console::totp;
use mmc_host::console::users::Role;
use serde_json::{Value, json};

use crate::support::*;

const PASSWORD: &str = "a long enough password";

/// A browser: its own cookies, no redirects followed (the tests read them).
struct Browser {
    base: String,
    client: reqwest::Client,
    cookies: Mutex<HashMap<String, String>>,
}

struct Page {
    status: u16,
    body: String,
    headers: reqwest::header::HeaderMap,
}

impl Page {
    fn location(&self) -> &str {
        self.headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The value of the form field `name` on the page.
    fn field(&self, name: &str) -> String {
        let marker = format!("name=\"{name}\" value=\"");
        let at = self
            .body
            .find(&marker)
            .unwrap_or_else(|| panic!("no field {name} in {}", self.body))
            + marker.len();
        self.body[at..].split('"').next().unwrap().to_string()
    }
}

impl Browser {
    fn new(app: &TestApp) -> Browser {
        Browser {
            base: app.base.clone(),
            client: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(std::time::Duration::from_secs(60))
                .build()
                .unwrap(),
            cookies: Mutex::default(),
        }
    }

    fn cookie_header(&self) -> String {
        let cookies = self.cookies.lock().unwrap();
        cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> Page {
        let resp = req
            .header("cookie", self.cookie_header())
            .send()
            .await
            .unwrap();
        let headers = resp.headers().clone();
        for set in headers.get_all("set-cookie") {
            let set = set.to_str().unwrap();
            let (name, value) = set.split(';').next().unwrap().split_once('=').unwrap();
            let mut cookies = self.cookies.lock().unwrap();
            if value.is_empty() || set.contains("Max-Age=0") {
                cookies.remove(name);
            } else {
                cookies.insert(name.to_string(), value.to_string());
            }
        }
        Page {
            status: resp.status().as_u16(),
            body: resp.text().await.unwrap(),
            headers,
        }
    }

    async fn get(&self, path: &str) -> Page {
        self.send(self.client.get(format!("{}{path}", self.base)))
            .await
    }

    async fn post(&self, path: &str, form: &[(&str, &str)]) -> Page {
        self.send(self.client.post(format!("{}{path}", self.base)).form(form))
            .await
    }

    /// Posts a form of the page at `from`, with its CSRF token.
    async fn submit(&self, from: &str, path: &str, form: &[(&str, &str)]) -> Page {
        let csrf = self.get(from).await.field("csrf");
        let mut form = form.to_vec();
        form.push(("csrf", &csrf));
        self.post(path, &form).await
    }

    async fn sign_in(&self, email: &str, password: &str, code: &str) -> Page {
        let pre = self.get("/console/sign-in").await.field("pre");
        self.post(
            "/console/sign-in",
            &[
                ("pre", &pre),
                ("email", email),
                ("password", password),
                ("code", code),
            ],
        )
        .await
    }
}

/// A user of `merchant` with `role` who accepted their invitation; their browser is signed in.
async fn person(app: &TestApp, merchant: &str, email: &str, role: Role) -> Browser {
    let invitation = app
        .service
        .app
        .console
        .users
        .invite(merchant, email, role)
        .unwrap();
    let browser = Browser::new(app);
    let page = browser.get(&invitation.path).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let pre = page.field("pre");
    let done = browser
        .post(
            &invitation.path,
            &[
                ("pre", &pre),
                ("password", PASSWORD),
                ("password2", PASSWORD),
            ],
        )
        .await;
    assert_eq!((done.status, done.location()), (303, "/console/payments"));
    // The link is spent.
    assert_eq!(Browser::new(app).get(&invitation.path).await.status, 404);
    browser
}

/// A completed payment of the merchant whose test key is `key`: its id.
async fn completed_payment(app: &TestApp, key: &str) -> (String, String) {
    let body = direct_payment("+2290166000001");
    let (status, p) = app.create(key, &new_key(), &body).await;
    assert_eq!(status, 201, "{p}");
    let id = p["id"].as_str().unwrap().to_string();
    let (_, synced) = app
        .get(key, &format!("/api/v1/collect/payments/{id}?sync=1"))
        .await;
    assert_eq!(synced["status"], "completed", "{synced}");
    (id, body["reference"].as_str().unwrap().to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_sign_in_succeeds_fails_clearly_and_is_rate_limited() {
    let app = spawn_app().await;
    let (merchant, _, _) = app.merchant("Shop");
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
            && cookie.contains("SameSite=Strict"),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_forms_without_their_csrf_token_are_refused() {
    let app = spawn_app().await;
    let (merchant, _, _) = app.merchant("Shop");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_sessions_end_at_sign_out_and_when_the_user_is_removed() {
    let app = spawn_app().await;
    let (merchant, _, _) = app.merchant("Shop");
    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let support = person(&app, &merchant, "agent@shop.bj", Role::Support).await;
    assert_eq!(support.get("/console/payments").await.status, 200);
    // Support cannot remove anyone, nor read the audit log.
    let owner_id = app.service.app.console.users.list(&merchant).unwrap()[0]
        .id
        .clone();
    let refused = support
        .submit(
            "/console/team",
            &format!("/console/team/{owner_id}/remove"),
            &[],
        )
        .await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert_eq!(support.get("/console/audit").await.status, 403);

    let agent_id = app.service.app.console.users.list(&merchant).unwrap()[1]
        .id
        .clone();
    let removed = owner
        .submit(
            "/console/team",
            &format!("/console/team/{agent_id}/remove"),
            &[],
        )
        .await;
    assert_eq!((removed.status, removed.location()), (303, "/console/team"));
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_owner_and_finance_need_a_second_factor_in_live() {
    let app = spawn_app().await;
    let (merchant, _, _) = app.merchant("Shop");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
            assert!(refused.body.contains("payments:write"), "{}", refused.body);
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

fn page_path(id: &str) -> String {
    format!("/console/payments/{id}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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
        .get(
            &key,
            &format!("/api/v1/collect/refunds/{}", refund["id"].as_str().unwrap()),
        )
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

    let page = finance.get(&page_path(&id)).await;
    assert!(
        page.body.contains(refund["id"].as_str().unwrap()),
        "{}",
        page.body
    );
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

    let owner = person(&app, &merchant, "owner@shop.bj", Role::Owner).await;
    let audit = owner.get("/console/audit?action=payment.refund").await;
    assert_eq!(
        audit
            .body
            .matches("<strong>payment.refund</strong>")
            .count(),
        1,
        "{}",
        audit.body
    );
    assert!(audit.body.contains("finance@shop.bj") && audit.body.contains(&id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mmc_users_create_prints_a_one_time_sign_in_link() {
    let app = spawn_app().await;
    let (merchant, _, _) = app.merchant("Shop");
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
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_bulk_approval_is_the_apis_validate_under_the_approvers_role() {
    let app = spawn_app().await;
    let (merchant, _, _) = app.merchant("Payroll");
    let maker = app
        .accounts
        .create_key_with(
            &merchant,
            mmc_host::accounts::Environment::Test,
            Some(mmc_host::scopes::Scopes::parse("bulk:create").unwrap()),
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
    let id = batch["id"].as_str().unwrap();
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
        assert!(refused.body.contains("bulk:approve"), "{}", refused.body);
    }
    let finance = person(&app, &merchant, "finance@shop.bj", Role::Finance).await;
    let shown = finance.get(&page).await;
    assert!(
        shown.body.contains("May payroll") && shown.body.contains("value=\"approve\""),
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
        audit.body.contains("finance@shop.bj") && audit.body.contains(id),
        "{}",
        audit.body
    );
}
