//! The merchant console at `/console/`: the people who run a merchant's
//! payments (owner, developer, finance, support) sign in, find payments,
//! refund or cancel them, and manage their team. Server-rendered HTML in
//! French and English, no script, a strict CSP, assets served here.
//!
//! This crate holds the money's pages (payments, refunds, payouts, links,
//! the overview, finance) and the router of every page; the frame they
//! stand on is `mmc-console-kit`, the account's pages (sign-in, team,
//! developers, audit) are `mmc-console-account`.

pub mod bulk;
pub mod bulk_upload;
pub mod charts;
pub mod finance;
pub mod links;
pub mod multipart;
pub mod overview;
pub mod payment;
pub mod payments;
pub mod refunds;
pub mod words;

use std::sync::Arc;

use hyper::Request;
use hyper::body::Incoming;

use mmc_console_account::{audit, auth, hooks, keys, team};
use mmc_console_kit::html::{self, Lang};
use mmc_console_kit::sessions::{COOKIE, Session};
use mmc_console_kit::web::{self, ConsoleError, Req};
use mmc_console_kit::{Console, api, blocking};
use mmc_http::{App, ClientAddr};

/// Largest console form accepted.
const MAX_FORM_BYTES: usize = 64 * 1024;

type Resp = mmc_console_kit::Page;

/// The console's pages, as the server takes them ([`mmc_console_kit::Pages`]).
pub struct Pages;

impl mmc_console_kit::Pages for Pages {
    fn words(&self) -> &'static [mmc_console_kit::words::Table] {
        words::TABLES
    }

    fn handle<'a>(
        &'a self,
        app: &'a Arc<App>,
        console: &'a Console,
        req: Request<Incoming>,
        request_id: &'a str,
    ) -> std::pin::Pin<Box<dyn Future<Output = Resp> + Send + 'a>> {
        Box::pin(handle(app, console, req, request_id))
    }
}

/// Serves one request under `/console`. A body is capped on its declared
/// length before anything else is looked at, and read only when someone
/// may send one: the forms of the signed-out pages (sign-in, invitation),
/// and a signed-in person's forms, each under a permit of its client or
/// person (a few bodies in memory at once, a short wait, then 429). A
/// signed-out request to any other page is answered unread. An upload is
/// read by its handler, once the session, the role and its CSRF token
/// (ahead of the file) have passed ([`bulk_upload`]).
pub async fn handle(
    app: &Arc<App>,
    console: &Console,
    req: Request<Incoming>,
    request_id: &str,
) -> Resp {
    let client = req.extensions().get::<ClientAddr>().map(|c| c.0);
    let upload = req.uri().path() == bulk_upload::PATH;
    // A CSV upload may be as large as the API takes one; other forms are small.
    let limit = if upload {
        app.max_body_bytes
    } else {
        MAX_FORM_BYTES
    };
    let head = mmc_http::check_head(&req, limit);
    let (parts, body) = req.into_parts();
    let headers: Vec<(String, String)> = parts
        .headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect();
    let mut req = Req {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        headers,
        body: Vec::new(),
        unread: Default::default(),
        client: client.map(|c| c.to_string()),
        lang: Lang::En,
        request_id: request_id.to_string(),
    };
    req.lang = Lang::pick(
        req.param("lang").as_deref(),
        req.cookie("mmc_lang").as_deref(),
        req.header("accept-language"),
    );
    if let Err(e) = head {
        return ConsoleError::Body(e).into_response(req.lang, None);
    }
    let session = match req.cookie(COOKIE) {
        Some(token) => match blocking(|| console.sessions.find(&token)) {
            Ok(s) => s,
            Err(e) => return ConsoleError::from(e).into_response(req.lang, None),
        },
        None => None,
    };
    let lang = req.lang;
    if req.method == "POST" {
        let read = match (&session, upload) {
            (Some(_), true) => {
                req.unread = std::sync::Mutex::new(Some(body));
                Ok(())
            }
            (Some(s), false) => {
                read_form(app, &mut req, body, &format!("person {}", s.actor_id())).await
            }
            (None, _) if public_form(&req.path) => match client {
                Some(ip) => read_form(app, &mut req, body, &format!("client {ip}")).await,
                None => Ok(()),
            },
            // Signed out, to a page that needs a session: answered unread.
            (None, _) => Ok(()),
        };
        if let Err(e) = read {
            return e.into_response(lang, session.as_ref());
        }
    }
    let mut resp = match route(app, console, &req, session.as_ref()).await {
        Ok(resp) => resp,
        Err(e) => e.into_response(lang, session.as_ref()),
    };
    // A language asked for in the query is kept for the next pages.
    if let Some(l) = req.param("lang") {
        resp = web::with_cookie(
            resp,
            &web::cookie(
                "mmc_lang",
                Lang::pick(Some(&l), None, None).code(),
                console.secure_cookies,
                None,
            ),
        );
    }
    resp
}

/// The forms a signed-out browser may post: sign-in and an invitation's.
fn public_form(path: &str) -> bool {
    path == "/console/sign-in" || path.starts_with("/console/invite/")
}

/// A form's body, within [`MAX_FORM_BYTES`], under one of `reader`'s
/// permits (the connections' per-client ones).
async fn read_form(
    app: &App,
    req: &mut Req,
    body: Incoming,
    reader: &str,
) -> Result<(), ConsoleError> {
    if hyper::body::Body::is_end_stream(&body) {
        return Ok(());
    }
    let _reading = body_permit(app, reader).await?;
    req.body = mmc_http::read_body(app, body, MAX_FORM_BYTES)
        .await?
        .to_vec();
    Ok(())
}

/// One of `reader`'s body permits, waiting as the API's requests do.
pub(crate) async fn body_permit(
    app: &App,
    reader: &str,
) -> Result<mmc_common::permits::KeyedPermit, ConsoleError> {
    let wait = std::time::Duration::from_millis(app.connections.config.body_permit_wait_ms);
    app.connections
        .client_bodies
        .acquire_within(reader, wait)
        .await
        .ok_or(ConsoleError::Body(
            mmc_http::errors::HttpError::RateLimited(std::time::Duration::from_secs(1)),
        ))
}

async fn route(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    session: Option<&Session>,
) -> Result<Resp, ConsoleError> {
    let rest = req.path.strip_prefix("/console").unwrap_or_default();
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let method = req.method.as_str();
    // Pages anyone may reach.
    match (method, segments.as_slice()) {
        ("GET", ["assets", "console.css"]) => {
            return Ok(web::body_response(
                200,
                "text/css; charset=utf-8",
                html::CSS.as_bytes().to_vec(),
            ));
        }
        ("GET", ["sign-in"]) => return Ok(auth::sign_in_page(c, req, 200, None)),
        ("POST", ["sign-in"]) => return auth::sign_in(c, req).await,
        ("GET", ["invite", token]) => return auth::invite_page(c, req, token, None),
        ("POST", ["invite", token]) => return auth::accept_invite(c, req, token).await,
        _ => {}
    }
    let s = session.ok_or(ConsoleError::NotSignedIn)?;
    mmc_http::record_principal(&s.merchant_id, s.environment.as_str());
    api::admit(app, s)?;
    match (method, segments.as_slice()) {
        ("POST", ["sign-out"]) => return auth::sign_out(c, req, s),
        ("POST", ["environment"]) => return auth::switch_environment(c, req, s),
        ("GET", ["security"]) => {
            let done = (req.param("done").as_deref() == Some("password"))
                .then(|| (html::t(req.lang, "password_changed"), false));
            return auth::security_page(c, req, s, done);
        }
        ("POST", ["security"]) => return auth::security_action(c, req, s).await,
        _ => {}
    }
    // Everything else works in the session's environment.
    auth::admitted(s)?;
    page(app, c, req, s, method, &segments).await
}

/// The pages and forms of a signed-in person, admitted in their environment.
async fn page(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
    method: &str,
    segments: &[&str],
) -> Result<Resp, ConsoleError> {
    match (method, segments) {
        ("GET", []) => Ok(web::redirect("/console/payments")),
        ("GET", ["payments"]) => payments::list(app, req, s).await,
        ("GET", ["payments.csv"]) => payments::csv(app, req, s).await,
        ("GET", ["payments", id]) => payment::show(app, req, s, id).await,
        ("GET", ["payments", id, "refund"]) => refunds::refund_form(app, req, s, id, None).await,
        ("POST", ["payments", id, "refund"]) => refunds::refund(app, c, req, s, id).await,
        ("GET", ["payments", id, "cancel"]) => refunds::cancel_form(app, req, s, id).await,
        ("POST", ["payments", id, "cancel"]) => refunds::cancel(app, c, req, s, id).await,
        ("POST", ["events", id, "resend"]) => payment::resend(app, c, req, s, id).await,
        ("GET", ["bulk"]) => bulk::list(app, req, s, None).await,
        ("POST", ["bulk", "upload"]) => bulk::upload(app, c, req, s).await,
        ("GET", ["bulk", id]) => bulk::show(app, c, req, s, id).await,
        ("GET", ["bulk", id, "approve"]) => bulk::approve_form(app, req, s, id).await,
        ("POST", ["bulk", id, "validate"]) => bulk::validate(app, c, req, s, id).await,
        ("GET", ["developers"]) => keys::page(app, c, req, s, None),
        ("POST", ["developers", "keys"]) => keys::create(app, c, req, s),
        ("GET", ["developers", "keys", "new"]) => keys::shown(app, c, req, s),
        ("GET", ["developers", "keys", id, "revoke"]) => keys::revoke_page(app, req, s, id),
        ("POST", ["developers", "keys", id, "revoke"]) => keys::revoke(app, c, req, s, id),
        ("GET", ["developers", "webhooks"]) => hooks::endpoints(app, req, s, None, false).await,
        ("POST", ["developers", "webhooks"]) => hooks::add(app, c, req, s).await,
        ("POST", ["developers", "webhooks", id, "disabled"]) => {
            hooks::set_disabled(app, c, req, s, id).await
        }
        ("POST", ["developers", "webhooks", id, "rotate"]) => {
            hooks::rotate(app, c, req, s, id).await
        }
        ("GET", ["developers", "events"]) => hooks::events(app, req, s).await,
        ("GET", ["developers", "events", id]) => hooks::event(app, req, s, id).await,
        ("GET", ["overview"]) => overview::page(app, c, req, s).await,
        ("GET", ["links"]) => links::list(app, c, req, s, None).await,
        ("POST", ["links"]) => links::create(app, c, req, s).await,
        ("GET", ["links", id]) => links::show(app, req, s, id).await,
        ("GET", ["links", id, "qr.svg"]) => links::qr(app, req, s, id).await,
        ("GET", ["team"]) => team::page(c, req, s, None),
        ("POST", ["team", "invite"]) => team::invite(c, &app.base_url, req, s).await,
        ("POST", ["team", "sessions", hash, "end"]) => team::end_session(c, req, s, hash),
        ("POST", ["team", "zone"]) => team::set_zone(app, c, req, s),
        ("GET", ["team", id, what @ ("remove" | "reset")]) => team::confirm(c, req, s, id, what),
        ("POST", ["team", id, "remove"]) => team::remove(c, req, s, id),
        ("POST", ["team", id, "reset"]) => team::reset(c, &app.base_url, req, s, id).await,
        ("GET", ["audit"]) => audit::page(c, req, s),
        ("GET", ["finance"]) => finance::page(app, req, s).await,
        ("GET", ["finance.csv"]) => finance::csv(app, req, s).await,
        ("POST", ["finance", "run"]) => finance::run(app, c, req, s).await,
        ("GET", ["finance", "cases", id]) => finance::case_page(app, req, s, id).await,
        ("POST", ["finance", "cases", id, "resolve"]) => finance::resolve(app, c, req, s, id).await,
        _ => Err(ConsoleError::NotFound),
    }
}
