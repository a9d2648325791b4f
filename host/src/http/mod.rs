//! The HTTP front: hyper 1 on tokio. The host authenticates, bounds the
//! request, picks the API component by path prefix and hands it the request
//! on a blocking thread (components run synchronously under deadlines).

mod admin;
pub mod api_docs;
mod component;
pub mod connections;
pub mod docs;
pub mod errors;
pub mod native;
pub mod native_areas;
pub mod paged;
mod pages;
mod principal;
pub mod rate_limit;
mod request_log;
pub mod webhooks;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full, Limited};
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tracing::Instrument;

use self::admin::handle_admin;
use self::component::dispatch;
use self::connections::{Activity, Connections, Cut, Watched, client_of};
use self::errors::HttpError;
use self::native::{native_request, native_response};
use self::native_areas::{NativeArea, native_area, native_dispatch};
use self::paged::Body;
use self::pages::{api_docs_page, docs_page, text};
pub(crate) use self::request_log::record_principal;
use self::request_log::{finish, request_span};
use crate::accounts::Accounts;
use crate::config::{Generation, Route};
use crate::runtime::Runtime;
use crate::runtime::bindings::http_types;

/// Bounds on what a client may send before a component sees it.
const MAX_HEADERS: usize = 64;
const MAX_HEADER_BYTES: usize = 16 * 1024;

pub struct App {
    pub admin: Arc<crate::admin::Admin>,
    pub rate_limiter: rate_limit::RateLimiter,
    /// Requests without a key on public routes, per client address and route.
    pub client_limiter: rate_limit::RateLimiter,
    pub runtime: Arc<Runtime>,
    pub webhooks: Arc<crate::webhooks::Webhooks>,
    pub accounts: Accounts,
    pub routes: Vec<Route>,
    pub max_body_bytes: usize,
    pub base_url: String,
    /// The public listener's connections (caps, clocks).
    pub connections: Arc<Connections>,
    /// Graceful shutdown: once started, no connection is accepted and open
    /// ones close after their current request.
    pub drain: Arc<crate::shutdown::Drain>,
    /// GETs are served on the worker that read them ([`crate::runtime::inline`]).
    pub inline_reads: bool,
    /// The merchant console (`/console/`).
    pub console: crate::console::Console,
}

impl App {
    /// The base of errors' `doc_url`s: the errors chapter, whose rows are
    /// anchored by code.
    pub(crate) fn docs_url(&self) -> String {
        format!("{}/docs/{}", self.base_url, docs::ERRORS)
    }

    /// Longest matching prefix, on a path-segment boundary.
    pub(crate) fn route(&self, path: &str) -> Option<&Route> {
        self.routes
            .iter()
            .filter(|r| crate::paths::under(path, &r.prefix))
            .max_by_key(|r| r.prefix.len())
    }
}

/// The public listener: merchants, customers, operators' callbacks.
pub async fn serve(app: Arc<App>, listener: TcpListener) {
    let connections = app.connections.clone();
    accept_loop(app, listener, connections, |app, req| {
        Box::pin(handle(app, req))
    })
    .await
}

/// The admin listener (`admin.listen`): `/admin/v1` and `/healthz`, nothing
/// else; the same clocks, its own caps.
pub async fn serve_admin(app: Arc<App>, listener: TcpListener) {
    let connections = Connections::new(
        app.connections.config.clone(),
        app.runtime.services.metrics.clone(),
    );
    accept_loop(app, listener, connections, |app, req| {
        Box::pin(handle_admin(app, req))
    })
    .await
}

/// Draining: how long a connection accepted before draining began has to
/// send its first request.
const FIRST_REQUEST_GRACE: Duration = Duration::from_millis(500);

type Handled = std::pin::Pin<Box<dyn std::future::Future<Output = Response<Body>> + Send>>;

async fn accept_loop(
    app: Arc<App>,
    listener: TcpListener,
    connections: Arc<Connections>,
    handler: fn(Arc<App>, Request<Incoming>) -> Handled,
) {
    loop {
        let accepted = tokio::select! {
            a = listener.accept() => a,
            _ = app.drain.started() => break, // the listener closes as it drops
        };
        let (stream, peer) = match accepted {
            Ok(s) => s,
            Err(e) => {
                // EMFILE and friends: back off instead of spinning.
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            }
        };
        // Over a cap: closed at once, before a byte is read.
        let client = client_of(peer.ip());
        let Ok(admitted) = connections.admit(client) else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let app = app.clone();
        let connections = connections.clone();
        let drain = app.drain.clone();
        tokio::spawn(async move {
            let _admitted = admitted;
            let activity = Activity::new();
            let served = activity.clone();
            let service = service_fn(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(ClientAddr(client));
                let app = app.clone();
                let in_flight = served.request_started();
                async move {
                    let resp = handler(app, req).await;
                    drop(in_flight);
                    Ok::<_, Infallible>(resp)
                }
            });
            let conn = http1::Builder::new()
                .max_buf_size(MAX_HEADER_BYTES.max(8192) * 4)
                .serve_connection(
                    TokioIo::new(Watched::new(stream, activity.clone())),
                    service,
                );
            tokio::pin!(conn);
            let every = Activity::check_every(&connections.config);
            let draining = drain.started();
            tokio::pin!(draining);
            let mut closing = false;
            // Draining, a connection accepted before it and not yet read
            // from: its client has sent, or is sending, a request it expects
            // answered. hyper would close it unread (its graceful shutdown
            // closes an idle connection at once), so it is given until
            // this deadline for that first request.
            let mut first_request_until: Option<Instant> = None;
            loop {
                tokio::select! {
                    _ = &mut conn => break,
                    // The request in flight is answered, then the connection closes.
                    _ = &mut draining, if !closing => {
                        closing = true;
                        if activity.served_any() {
                            conn.as_mut().graceful_shutdown();
                        } else {
                            first_request_until = Some(Instant::now() + FIRST_REQUEST_GRACE);
                        }
                    }
                    _ = tokio::time::sleep(Duration::from_millis(5)), if first_request_until.is_some() => {
                        if activity.served_any()
                            || first_request_until.is_some_and(|t| Instant::now() >= t)
                        {
                            conn.as_mut().graceful_shutdown();
                            first_request_until = None;
                        }
                    }
                    _ = tokio::time::sleep(every) => {
                        if let Some(cut) = activity.overdue(&connections.config) {
                            connections.cut(cut);
                            break; // dropping the connection closes it
                        }
                    }
                }
            }
        });
    }
}

/// `HEAD` is answered everywhere as `GET` is, headers and all, without the
/// body (RFC 9110 §9.3.2): handlers and components see a `GET`.
fn head_as_get(req: &mut Request<Incoming>) -> bool {
    let head = req.method() == hyper::Method::HEAD;
    if head {
        *req.method_mut() = hyper::Method::GET;
    }
    head
}

/// The answer to a `HEAD`: the `GET`'s headers, its length, no body. A
/// streamed body has no length to tell; dropping it stops its pages.
fn without_body(mut resp: Response<Body>) -> Response<Body> {
    if let Either::Left(full) = resp.body() {
        let len = hyper::body::Body::size_hint(full).exact().unwrap_or(0);
        resp.headers_mut()
            .insert(hyper::header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    *resp.body_mut() = Either::Left(Full::new(Bytes::new()));
    resp
}

async fn handle(app: Arc<App>, mut req: Request<Incoming>) -> Response<Body> {
    let head = head_as_get(&mut req);
    let resp = handle_get(app, req).await;
    if head { without_body(resp) } else { resp }
}

/// What the public listener serves a path with, decided before anything is read.
enum Target {
    Healthz,
    Metrics,
    /// The guide's index or one of its chapters, rendered.
    Docs(&'static str),
    ApiDocs,
    Console,
    Native(NativeArea),
    Route(Route),
    Unmatched,
}

impl Target {
    fn of(app: &App, path: &str) -> Target {
        match path {
            "/healthz" => Target::Healthz,
            "/metrics" => Target::Metrics,
            "/docs" => Target::Docs(docs::index()),
            "/docs/api" => Target::ApiDocs,
            _ if crate::paths::under(path, "/console") => Target::Console,
            _ => match path.strip_prefix("/docs/").and_then(docs::chapter) {
                Some(page) => Target::Docs(page),
                None => match native_area(path) {
                    Some(area) => Target::Native(area),
                    None => match app.route(path) {
                        Some(route) => Target::Route(route.clone()),
                        None => Target::Unmatched,
                    },
                },
            },
        }
    }

    /// Who served it: the API component, or the host's own area. The
    /// `component` of the request's log line and the metrics' `route` label.
    fn label(&self) -> &str {
        match self {
            Target::Healthz => "healthz",
            Target::Metrics => "metrics",
            Target::Docs(_) | Target::ApiDocs => "docs",
            Target::Console => "console",
            Target::Native(area) => area.label(),
            Target::Route(route) => &route.component,
            Target::Unmatched => "unmatched",
        }
    }

    /// Probes and scrapes: logged at debug, so they do not flood the log.
    fn quiet(&self) -> bool {
        matches!(self, Target::Healthz | Target::Metrics)
    }
}

async fn handle_get(app: Arc<App>, req: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    let request_id = format!("req_{}", uuid::Uuid::new_v4().simple());
    let path = req.uri().path().to_string();
    let target = Target::of(&app, &path);
    let quiet = target.quiet();
    let span = request_span(quiet, &request_id, req.method(), &path, target.label());
    let mut resp = serve_target(&app, &target, req, &path, &request_id)
        .instrument(span.clone())
        .await;
    finish(
        &app,
        &mut resp,
        &request_id,
        target.label(),
        &span,
        quiet,
        started,
    );
    resp
}

async fn serve_target(
    app: &Arc<App>,
    target: &Target,
    req: Request<Incoming>,
    path: &str,
    request_id: &str,
) -> Response<Body> {
    match target {
        Target::Healthz => paged::full(text(StatusCode::OK, "text/plain", "ok\n")),
        Target::Metrics => paged::full(text(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            app.runtime.services.metrics.render(),
        )),
        Target::Docs(page) => paged::full(docs_page(page)),
        Target::ApiDocs => {
            let client = req.extensions().get::<ClientAddr>().map(|c| c.0);
            paged::full(api_docs_page(app, client).await)
        }
        Target::Console => paged::full(crate::console::handle(app, req, request_id).await),
        Target::Native(area) => {
            let resp = match native_dispatch(app, *area, req).await {
                Ok(resp) => resp,
                Err(err) => err.into_response(&Generation::Current, &app.docs_url()),
            };
            paged::full(resp)
        }
        Target::Unmatched => {
            let err = HttpError::NoRoute {
                method: req.method().to_string(),
                path: path.to_string(),
            };
            let generation = if path.starts_with("/api/v1/collect/mobile-money") {
                Generation::Legacy
            } else {
                Generation::Current
            };
            paged::full(err.into_response(&generation, &app.docs_url()))
        }
        Target::Route(route) => match dispatch(app, route, req, request_id).await {
            Ok(resp) => resp,
            Err(err) => paged::full(err.into_response(&route.generation, &app.docs_url())),
        },
    }
}

/// Header bounds, then the body within `max_body_bytes`.
pub(crate) async fn read_request(
    app: &App,
    req: Request<Incoming>,
    max_body: Option<usize>,
) -> Result<(hyper::http::request::Parts, Bytes), HttpError> {
    let max_body_bytes = max_body.unwrap_or(app.max_body_bytes);
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
    let (parts, body) = req.into_parts();
    let read_timeout =
        std::time::Duration::from_millis(app.connections.config.body_read_timeout_ms);
    let collected =
        tokio::time::timeout(read_timeout, Limited::new(body, max_body_bytes).collect())
            .await
            .map_err(|_| {
                app.connections.cut(Cut::BodyTimeout);
                HttpError::BodyTimeout
            })?;
    let body = match collected {
        Ok(b) => b.to_bytes(),
        Err(e)
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            return Err(HttpError::PayloadTooLarge(max_body_bytes));
        }
        Err(_) => return Err(HttpError::BadBody),
    };
    Ok((parts, body))
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
pub(crate) async fn on_blocking_thread<R: Send + 'static>(
    f: impl FnOnce() -> Result<R, HttpError> + Send + 'static,
) -> Result<R, HttpError> {
    let span = tracing::Span::current();
    tokio::task::spawn_blocking(move || span.in_scope(f))
        .await
        .map_err(|e| HttpError::Unavailable(format!("request task failed: {e}")))?
}

/// A running server: its bound addresses and the tasks serving them.
pub struct Running {
    pub addr: SocketAddr,
    pub task: tokio::task::JoinHandle<()>,
    pub admin_addr: SocketAddr,
    pub admin_task: tokio::task::JoinHandle<()>,
}
