//! The console's requests and answers: forms, cookies, the page policy,
//! and its errors, mapped to a status and a page in one place.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use hyper::header::HeaderValue;

use crate::html::{self, Lang, t};
use crate::sessions::{COOKIE, Session};
use mmc_http::errors::HttpError;

/// A console request: its head, and its body when it is a form (read
/// whole: a small form). An upload's body is left unread for its handler.
pub struct Req {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub unread: std::sync::Mutex<Option<hyper::body::Incoming>>,
    pub client: Option<String>,
    pub lang: Lang,
    pub request_id: String,
}

impl Req {
    /// The body left unread (an upload's), once.
    pub fn take_unread(&self) -> Option<hyper::body::Incoming> {
        self.unread.lock().ok()?.take()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn cookie(&self, name: &str) -> Option<String> {
        self.headers
            .iter()
            .filter(|(k, _)| k.eq_ignore_ascii_case("cookie"))
            .flat_map(|(_, v)| v.split(';'))
            .filter_map(|kv| kv.trim().split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    }

    /// A query parameter, decoded; blank counts as absent.
    pub fn param(&self, name: &str) -> Option<String> {
        pairs(self.query.as_bytes(), name)
    }

    /// A field of the urlencoded form body; blank counts as absent.
    pub fn field(&self, name: &str) -> Option<String> {
        pairs(&self.body, name)
    }

    /// Every value of a repeated form field (checkboxes), blanks left out.
    pub fn fields(&self, name: &str) -> Vec<String> {
        url::form_urlencoded::parse(&self.body)
            .filter(|(k, v)| k == name && !v.trim().is_empty())
            .map(|(_, v)| v.trim().to_string())
            .collect()
    }
}

fn pairs(raw: &[u8], name: &str) -> Option<String> {
    url::form_urlencoded::parse(raw)
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// Why a console request was not served as asked.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("not signed in")]
    NotSignedIn,
    #[error("CSRF token missing or wrong")]
    Csrf,
    #[error("forbidden: {0}")]
    Forbidden(String),
    #[error("second factor required")]
    SecondFactorRequired,
    #[error("not found")]
    NotFound,
    #[error("rate limited")]
    RateLimited(Duration),
    /// Every password check is taken: nothing was checked, try again soon.
    #[error("password checks busy")]
    Busy,
    /// The request's body was refused unread or could not be read: too
    /// large (413), too slow (408), too many at once (429), malformed (400).
    #[error("{0}")]
    Body(#[from] mmc_http::errors::HttpError),
    /// The API refused the action; its message is shown as it is.
    #[error("{1}")]
    Refused(u16, String),
    #[error("{0}")]
    Unavailable(String),
}

impl From<mmc_db::StorageError> for ConsoleError {
    fn from(e: mmc_db::StorageError) -> Self {
        ConsoleError::Unavailable(e.to_string())
    }
}

impl ConsoleError {
    pub fn status(&self) -> u16 {
        match self {
            ConsoleError::NotSignedIn => 303,
            ConsoleError::Csrf
            | ConsoleError::Forbidden(_)
            | ConsoleError::SecondFactorRequired => 403,
            ConsoleError::NotFound => 404,
            ConsoleError::RateLimited(_) | ConsoleError::Busy => 429,
            ConsoleError::Refused(status, _) => *status,
            ConsoleError::Body(e) => e.status().as_u16(),
            ConsoleError::Unavailable(_) => 503,
        }
    }

    pub fn into_response(self, lang: Lang, session: Option<&Session>) -> Response<Full<Bytes>> {
        if matches!(self, ConsoleError::NotSignedIn) {
            return redirect("/console/sign-in");
        }
        let message = match &self {
            ConsoleError::Csrf => t(lang, "csrf").to_string(),
            ConsoleError::Forbidden(_) => match session {
                Some(s) => crate::html::plain(
                    lang,
                    "forbidden_role",
                    &[crate::html::role_word(lang, s.role)],
                ),
                None => t(lang, "forbidden").to_string(),
            },
            ConsoleError::SecondFactorRequired => t(lang, "totp_needed").to_string(),
            ConsoleError::NotFound => t(lang, "not_found").to_string(),
            ConsoleError::RateLimited(wait) => {
                let minutes = wait.as_secs().div_ceil(60).max(1);
                t(lang, "throttled").replacen("{}", &minutes.to_string(), 1)
            }
            ConsoleError::Busy => t(lang, "busy").to_string(),
            ConsoleError::Body(e) => match e {
                HttpError::PayloadTooLarge(_) | HttpError::HeadersTooLarge => t(lang, "too_large"),
                HttpError::RateLimited(_) => t(lang, "busy"),
                _ => t(lang, "unread"),
            }
            .to_string(),
            ConsoleError::Refused(_, m) => m.clone(),
            ConsoleError::Unavailable(why) => {
                // The cause is for the logs; the reader is told what to do.
                tracing::warn!(error = %why, "console: a page could not be served");
                t(lang, "unavailable").to_string()
            }
            ConsoleError::NotSignedIn => String::new(),
        };
        // Where to go from here: the step that unblocks, else back.
        let (href, next) = match &self {
            ConsoleError::SecondFactorRequired => ("/console/security", "next_second_factor"),
            ConsoleError::Forbidden(_) if session.is_some() => ("/console/team", "next_team"),
            ConsoleError::Csrf => ("/console/overview", "next_reload"),
            _ if session.is_none() => ("/console/sign-in", "sign_in"),
            _ => ("/console/payments", "next_payments"),
        };
        let body = format!(
            "{}<p><a href=\"{href}\">{}</a></p>",
            html::notice(&message, true),
            t(lang, next)
        );
        let mut resp = page_response(
            self.status(),
            html::page(lang, session, t(lang, "error"), &body),
        );
        let retry = match self {
            ConsoleError::RateLimited(wait) => Some(wait),
            ConsoleError::Busy => Some(Duration::from_secs(1)),
            ConsoleError::Body(HttpError::RateLimited(wait)) => Some(wait),
            _ => None,
        };
        if let Some(wait) = retry
            && let Ok(v) = HeaderValue::from_str(&wait.as_secs().max(1).to_string())
        {
            resp.headers_mut().insert("retry-after", v);
        }
        resp
    }
}

/// Nothing loads from anywhere but the service, nothing runs, forms post
/// only to it, and no other site may frame a page.
pub const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

fn secured(mut resp: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    let h = resp.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    // Pages show payments and people: kept out of shared caches and history.
    h.insert("cache-control", HeaderValue::from_static("no-store"));
    resp
}

pub fn page_response(status: u16, html: String) -> Response<Full<Bytes>> {
    body_response(status, "text/html; charset=utf-8", html.into_bytes())
}

pub fn body_response(
    status: u16,
    content_type: &'static str,
    body: Vec<u8>,
) -> Response<Full<Bytes>> {
    secured(
        Response::builder()
            .status(status)
            .header("content-type", content_type)
            .body(Full::new(Bytes::from(body)))
            .expect("valid response parts"),
    )
}

pub fn redirect(to: &str) -> Response<Full<Bytes>> {
    secured(
        Response::builder()
            .status(303)
            .header("location", to)
            .body(Full::new(Bytes::new()))
            .expect("valid response parts"),
    )
}

/// The session cookie: HttpOnly, SameSite=Strict, Secure when the service
/// is reached over TLS (its public base URL is https).
pub fn session_cookie(value: &str, secure: bool, max_age: Option<u64>) -> String {
    cookie(COOKIE, value, secure, max_age)
}

pub fn cookie(name: &str, value: &str, secure: bool, max_age: Option<u64>) -> String {
    let mut c = format!("{name}={value}; Path=/console; HttpOnly; SameSite=Strict");
    if let Some(age) = max_age {
        c.push_str(&format!("; Max-Age={age}"));
    }
    if secure {
        c.push_str("; Secure");
    }
    c
}

pub fn with_cookie(mut resp: Response<Full<Bytes>>, cookie: &str) -> Response<Full<Bytes>> {
    if let Ok(v) = HeaderValue::from_str(cookie) {
        resp.headers_mut().append("set-cookie", v);
    }
    resp
}

/// Compared without an early exit.
pub fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// A state-changing form must carry its session's CSRF token.
pub fn check_csrf(req: &Req, s: &Session) -> Result<(), ConsoleError> {
    match req.field("csrf") {
        Some(token) if same(&token, &s.csrf) => Ok(()),
        _ => Err(ConsoleError::Csrf),
    }
}

/// What an error of the people's store means to the person in the console.
pub fn user_error(e: crate::users::UserError) -> ConsoleError {
    use crate::users::UserError;
    match e {
        UserError::Storage(e) => ConsoleError::Unavailable(e.to_string()),
        UserError::UnknownUser | UserError::UnknownMerchant(_) => ConsoleError::NotFound,
        other => ConsoleError::Refused(400, other.to_string()),
    }
}
