//! The merchant console over real HTTP with cookies: people sign in, the
//! console holds them to their role's API scopes, and its actions are the API's.

mod abuse;
mod access;
mod audit;
mod browser;
mod bulk;
mod developers;
mod finance;
mod french;
mod links;
mod money;
mod overview;
mod reading;
mod second_factor;

use std::collections::HashMap;
use std::sync::Mutex;

use mmc_console_kit::users::Role;

use crate::support::*;

pub const PASSWORD: &str = "a long enough password";

/// A browser: its own cookies, no redirects followed (the tests read them).
pub struct Browser {
    base: String,
    client: reqwest::Client,
    pub cookies: Mutex<HashMap<String, String>>,
}

pub struct Page {
    pub status: u16,
    /// The page's HTML, its cells' `data-label`s (a phone's layout, checked
    /// in the browser) left out, so that a test reads a table as written.
    pub body: String,
    /// The page's HTML as served.
    pub raw: String,
    pub headers: reqwest::header::HeaderMap,
}

impl Page {
    pub fn location(&self) -> &str {
        self.headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// The audit log's rows of `action` that ended as `outcome` (`done`,
    /// `refused`…), as the page shows them.
    pub fn audited(&self, action: &str, outcome: &str) -> usize {
        let (action, outcome) = (
            format!("<strong>{action}</strong>"),
            format!(">{outcome}</td>"),
        );
        self.body
            .split("<tr>")
            .filter(|row| row.contains(&action) && row.contains(&outcome))
            .count()
    }

    /// The value of the form field `name` on the page.
    pub fn field(&self, name: &str) -> String {
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
    pub fn new(app: &TestApp) -> Browser {
        Browser::at(&app.base)
    }

    /// A browser of the service at `base` (a fleet's node, say).
    pub fn at(base: &str) -> Browser {
        Browser {
            base: base.to_string(),
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
        let status = resp.status().as_u16();
        let raw = resp.text().await.unwrap();
        Page {
            status,
            body: without_cell_labels(&raw),
            raw,
            headers,
        }
    }

    pub async fn get(&self, path: &str) -> Page {
        self.send(self.client.get(format!("{}{path}", self.base)))
            .await
    }

    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> Page {
        self.send(self.client.post(format!("{}{path}", self.base)).form(form))
            .await
    }

    /// Posts `fields` and a file as multipart/form-data, as a browser's upload form does.
    pub async fn upload(&self, path: &str, fields: &[(&str, &str)], file: (&str, &[u8])) -> Page {
        let boundary = "----consoleTestBoundary7MA4YWxk";
        let mut body = Vec::new();
        for (name, value) in fields {
            body.extend_from_slice(
                format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                    .as_bytes(),
            );
        }
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"{}\"\r\nContent-Type: text/csv\r\n\r\n",
                file.0
            )
            .as_bytes(),
        );
        body.extend_from_slice(file.1);
        body.extend_from_slice(format!("\r\n--{boundary}--\r\n").as_bytes());
        self.send(
            self.client
                .post(format!("{}{path}", self.base))
                .header(
                    "content-type",
                    format!("multipart/form-data; boundary={boundary}"),
                )
                .body(body),
        )
        .await
    }

    /// Posts a form of the page at `from`, with its CSRF token.
    pub async fn submit(&self, from: &str, path: &str, form: &[(&str, &str)]) -> Page {
        let csrf = self.get(from).await.field("csrf");
        let mut form = form.to_vec();
        form.push(("csrf", &csrf));
        self.post(path, &form).await
    }

    /// Opens the confirmation page at `path` and confirms it (its form
    /// posts to `path` with the page's CSRF token and one-time form key);
    /// the page itself when it offers no confirmation (refused, not found).
    pub async fn confirm(&self, path: &str) -> Page {
        let page = self.get(path).await;
        if page.status != 200 {
            return page;
        }
        let (csrf, key) = (page.field("csrf"), page.field("form_key"));
        self.post(path, &[("csrf", &csrf), ("form_key", &key)])
            .await
    }

    /// Opens the one-time sign-in link at `path` and chooses `password`,
    /// which must be accepted: the browser is then signed in.
    pub async fn accept(&self, path: &str, password: &str) {
        let page = self.get(path).await;
        assert_eq!(page.status, 200, "{}", page.body);
        let pre = page.field("pre");
        let done = self
            .post(
                path,
                &[
                    ("pre", &pre),
                    ("password", password),
                    ("password2", password),
                ],
            )
            .await;
        assert_eq!((done.status, done.location()), (303, "/console/payments"));
    }

    pub async fn sign_in(&self, email: &str, password: &str, code: &str) -> Page {
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

/// `html` without its ` data-label="…"` attributes.
pub fn without_cell_labels(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(at) = rest.find(" data-label=\"") {
        out.push_str(&rest[..at]);
        let after = &rest[at + " data-label=\"".len()..];
        rest = after.split_once('"').map_or("", |(_, r)| r);
    }
    out.push_str(rest);
    out
}

/// A user of `merchant` with `role` who accepted their invitation; their browser is signed in.
pub async fn person(app: &TestApp, merchant: &str, email: &str, role: Role) -> Browser {
    let invitation = app
        .service
        .site
        .console
        .users
        .invite(merchant, email, role)
        .unwrap();
    let browser = Browser::new(app);
    browser.accept(&invitation.path, PASSWORD).await;
    // The link is spent.
    assert_eq!(Browser::new(app).get(&invitation.path).await.status, 404);
    browser
}

/// A completed payment of the merchant whose test key is `key`: its id.
pub async fn completed_payment(app: &TestApp, key: &str) -> (String, String) {
    let body = direct_payment("+2290166000001");
    let (id, _) = app.create_ok(key, &body).await;
    let (_, synced) = app
        .get(key, &format!("/api/v1/collect/payments/{id}?sync=1"))
        .await;
    assert_eq!(synced["status"], "completed", "{synced}");
    (id, body["reference"].as_str().unwrap().to_string())
}

pub fn page_path(id: &str) -> String {
    format!("/console/payments/{id}")
}

/// A one-line batch created through the API with `key`: its id.
pub(crate) async fn batch_by_key(app: &TestApp, key: &str, reference: &str) -> String {
    let resp = app
        .client
        .post(app.url("/api/v1/bulk-payments/"))
        .bearer_auth(key)
        .header("Idempotency-Key", new_key())
        .json(&serde_json::json!({"name": "Payroll", "items": [{
            "beneficiary_name": "Awa Koné", "phone": "+2290166001001",
            "amount": 1000, "currency": "XOF", "reference": reference,
        }]}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let b: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(b["status"], "pending_validation", "{b}");
    b["id"].as_str().unwrap().to_string()
}
