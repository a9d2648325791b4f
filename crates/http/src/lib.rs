//! The HTTP front: hyper 1 on tokio. Which part serves a path is decided
//! above this module, by the site; here is what every request goes
//! through: the connection's caps and clocks, the key and its limits, the
//! bounded read of the body, the host's errors, and the hand-over of a
//! request to its API component on a blocking thread (components run
//! synchronously under deadlines).

pub mod api_docs;
pub mod books;
pub mod component;
pub mod connections;
pub mod docs;
pub mod errors;
pub mod escape;
pub mod listener;
pub mod native;
pub mod native_areas;
pub mod paged;
pub mod pages;
mod principal;
pub mod request_log;
pub mod webhooks;

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::{Request, Response, StatusCode};

use self::connections::{Connections, Cut};
use self::errors::HttpError;
use self::paged::Body;
pub use self::principal::person_of;
pub use self::request_log::record_principal;
use mmc_accounts::Accounts;
use mmc_config::{Generation, Route};
use mmc_runtime::Runtime;
use mmc_runtime::bindings::http_types;

/// Bounds on what a client may send before a component sees it.
const MAX_HEADERS: usize = 64;
const MAX_HEADER_BYTES: usize = 16 * 1024;

/// What the API's requests are served with: keys and their limits, the
/// runtime that holds the components, the webhooks, the routes.
pub struct App {
    pub rate_limiter: mmc_common::rate_limit::RateLimiter,
    /// Requests without a key on public routes, per client address and route.
    pub client_limiter: mmc_common::rate_limit::RateLimiter,
    pub runtime: Arc<Runtime>,
    pub webhooks: Arc<mmc_webhooks::Webhooks>,
    pub accounts: Accounts,
    /// Reconciliation against the providers' books.
    pub books: Arc<mmc_reconciliation::Books>,
    pub routes: Vec<Route>,
    pub max_body_bytes: usize,
    pub base_url: String,
    /// The public listener's connections (caps, clocks).
    pub connections: Arc<Connections>,
    /// Graceful shutdown: once started, no connection is accepted and open
    /// ones close after their current request.
    pub drain: Arc<mmc_common::shutdown::Drain>,
    /// GETs are served on the worker that read them ([`mmc_runtime::inline`]).
    pub inline_reads: bool,
}

impl App {
    /// The base of errors' `doc_url`s: the errors chapter, whose rows are
    /// anchored by code.
    pub fn docs_url(&self) -> String {
        format!("{}/docs/{}", self.base_url, docs::ERRORS)
    }

    /// Longest matching prefix, on a path-segment boundary.
    pub fn route(&self, path: &str) -> Option<&Route> {
        self.routes
            .iter()
            .filter(|r| mmc_common::paths::under(path, &r.prefix))
            .max_by_key(|r| r.prefix.len())
    }
}

/// `HEAD` is answered everywhere as `GET` is, headers and all, without the
/// body (RFC 9110 §9.3.2): handlers and components see a `GET`.
pub fn head_as_get(req: &mut Request<Incoming>) -> bool {
    let head = req.method() == hyper::Method::HEAD;
    if head {
        *req.method_mut() = hyper::Method::GET;
    }
    head
}

/// The answer to a `HEAD`: the `GET`'s headers, its length, no body. A
/// streamed body has no length to tell; dropping it stops its pages.
pub fn without_body(mut resp: Response<Body>) -> Response<Body> {
    if let Either::Left(full) = resp.body() {
        let len = hyper::body::Body::size_hint(full).exact().unwrap_or(0);
        resp.headers_mut()
            .insert(hyper::header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    *resp.body_mut() = Either::Left(Full::new(Bytes::new()));
    resp
}

/// Header bounds, then the body within `max_body_bytes`.
pub async fn read_request(
    app: &App,
    req: Request<Incoming>,
    max_body: Option<usize>,
) -> Result<(hyper::http::request::Parts, Bytes), HttpError> {
    let max_body_bytes = max_body.unwrap_or(app.max_body_bytes);
    check_head(&req, max_body_bytes)?;
    let (parts, body) = req.into_parts();
    Ok((parts, read_body(app, body, max_body_bytes).await?))
}

/// What a request's head alone says is too much: too many or too large
/// headers, or a declared body over `max_body_bytes`. Nothing of the body
/// is read.
pub fn check_head<B>(req: &Request<B>, max_body_bytes: usize) -> Result<(), HttpError> {
    if req.headers().len() > MAX_HEADERS
        || req
            .headers()
            .iter()
            .map(|(k, v)| k.as_str().len() + v.len())
            .sum::<usize>()
            > MAX_HEADER_BYTES
    {
        return Err(HttpError::HeadersTooLarge);
    }
    let declared = req
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > max_body_bytes) {
        return Err(HttpError::PayloadTooLarge(max_body_bytes));
    }
    Ok(())
}

/// A body, whole, within `max_body_bytes` and the body read clock.
pub async fn read_body(
    app: &App,
    body: Incoming,
    max_body_bytes: usize,
) -> Result<Bytes, HttpError> {
    let read_timeout =
        std::time::Duration::from_millis(app.connections.config.body_read_timeout_ms);
    let collected =
        tokio::time::timeout(read_timeout, Limited::new(body, max_body_bytes).collect())
            .await
            .map_err(|_| {
                app.connections.cut(Cut::BodyTimeout);
                HttpError::BodyTimeout
            })?;
    match collected {
        Ok(b) => Ok(b.to_bytes()),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            Err(HttpError::PayloadTooLarge(max_body_bytes))
        }
        Err(_) => Err(HttpError::BadBody),
    }
}

fn headers_of(parts: &hyper::http::request::Parts) -> Vec<(String, String)> {
    parts
        .headers
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect()
}

/// The client a request's connection came from, as [`connections::client_of`]
/// counts clients (set at accept).
#[derive(Debug, Clone, Copy)]
pub struct ClientAddr(pub std::net::IpAddr);

/// Runs `f` on a blocking thread, inside the request's span (the
/// components' log lines carry the request's fields too).
pub async fn on_blocking_thread<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, HttpError> + Send + 'static,
) -> Result<R, HttpError> {
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(f))
        .await
        .map_err(|e| HttpError::Unavailable(format!("request task failed: {e}")))?
}
