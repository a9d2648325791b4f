//! The HTTP front: hyper 1 on tokio. The host authenticates, bounds the
//! request, picks the API component by path prefix and hands it the request
//! on a blocking thread (components run synchronously under deadlines).

pub mod api_docs;
pub mod connections;
pub mod docs;
pub mod errors;
pub mod native;
pub mod paged;
pub mod rate_limit;

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

use self::connections::{Activity, Connections, Cut, Watched, client_of};
use self::errors::HttpError;
use self::native::NativeRequest;
use self::paged::Body;
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

async fn handle_admin(app: Arc<App>, mut req: Request<Incoming>) -> Response<Body> {
    let head = head_as_get(&mut req);
    let resp = paged::full(handle_admin_get(app, req).await);
    if head { without_body(resp) } else { resp }
}

async fn handle_admin_get(app: Arc<App>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let started = Instant::now();
    let request_id = format!("req_{}", uuid::Uuid::new_v4().simple());
    let path = req.uri().path().to_string();
    let quiet = path == "/healthz";
    let span = request_span(quiet, &request_id, req.method(), &path, "admin");
    let served = async {
        if quiet {
            text(StatusCode::OK, "text/plain", "ok\n")
        } else if path == "/admin/v1" || path.starts_with("/admin/v1/") {
            admin_dispatch(&app, req).await
        } else {
            HttpError::NoRoute {
                method: req.method().to_string(),
                path: path.clone(),
            }
            .into_response(&Generation::Current, &app.docs_url())
        }
    };
    let mut resp = served.instrument(span.clone()).await;
    resp.headers_mut().insert(
        "x-request-id",
        HeaderValue::from_str(&request_id).expect("ascii id"),
    );
    let elapsed = started.elapsed();
    app.runtime
        .services
        .metrics
        .request("admin", resp.status().as_u16(), elapsed);
    log_request_end(&span, quiet, resp.status(), elapsed);
    resp
}

async fn admin_dispatch(app: &Arc<App>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let authorization = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    if let Err(e) = crate::admin::api::authorize(&app.admin, authorization) {
        return native_response(app, Err(e));
    }
    // Component uploads get a larger body limit.
    match read_request(app, req, Some(ADMIN_MAX_BODY)).await {
        Ok((parts, body)) => {
            let result = crate::admin::api::handle(&app.admin, native_request(&parts, body)).await;
            native_response(app, result)
        }
        Err(err) => err.into_response(&Generation::Current, &app.docs_url()),
    }
}

fn text(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Full::new(body.into()))
        .expect("static response parts are valid")
}

/// A page of the merchant's guide, under a policy that lets nothing run or load.
fn docs_page(page: &'static str) -> Response<Full<Bytes>> {
    html_page(page)
}

/// The API reference (`/docs/api`), rendered from the OpenAPI documents the
/// components serve. Each view asks the components for them, so a client
/// gets as many views as its bucket for public routes allows.
async fn api_docs_page(app: &Arc<App>, client: Option<std::net::IpAddr>) -> Response<Full<Bytes>> {
    if let Some(ip) = client
        && let Err(wait) = app.client_limiter.check(&client_bucket(ip, "/docs/api"))
    {
        return HttpError::RateLimited(wait).into_response(&Generation::Current, &app.docs_url());
    }
    html_page(Bytes::from(api_docs::page(app).await.as_bytes().to_vec()))
}

/// A documentation page, under a policy that lets nothing run or load.
fn html_page(html: impl Into<Bytes>) -> Response<Full<Bytes>> {
    let mut resp = text(StatusCode::OK, "text/html; charset=utf-8", html);
    let headers = resp.headers_mut();
    if let Ok(csp) = HeaderValue::from_str(&docs::content_security_policy()) {
        headers.insert("content-security-policy", csp);
    }
    headers.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    headers.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    resp
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

/// Longest path a log line carries (a client chooses its length).
const MAX_LOGGED_PATH: usize = 256;

fn logged_path(path: &str) -> &str {
    if path.len() <= MAX_LOGGED_PATH {
        return path;
    }
    let mut cut = MAX_LOGGED_PATH;
    while !path.is_char_boundary(cut) {
        cut -= 1;
    }
    &path[..cut]
}

/// The span of one request: every line logged while it is served (the
/// components' included) carries its fields; `merchant_id` and
/// `environment` are recorded once the key is authenticated
/// ([`record_principal`]). The path has no query string: no secret or
/// customer data from it reaches the log.
fn request_span(
    quiet: bool,
    request_id: &str,
    method: &hyper::Method,
    path: &str,
    component: &str,
) -> tracing::Span {
    macro_rules! span {
        ($level:expr) => {
            tracing::span!(
                $level,
                "request",
                request_id = %request_id,
                method = %method,
                path = %logged_path(path),
                component = %component,
                merchant_id = tracing::field::Empty,
                environment = tracing::field::Empty,
            )
        };
    }
    if quiet {
        span!(tracing::Level::DEBUG)
    } else {
        span!(tracing::Level::INFO)
    }
}

/// The request's merchant and environment, on its span.
pub(crate) fn record_principal(merchant_id: &str, environment: &str) {
    let span = tracing::Span::current();
    span.record("merchant_id", tracing::field::display(merchant_id));
    span.record("environment", tracing::field::display(environment));
}

/// The one line a request logs, at its end (when its response's head is
/// ready; a streamed body goes on after it), in its span.
fn log_request_end(
    span: &tracing::Span,
    quiet: bool,
    status: StatusCode,
    elapsed: std::time::Duration,
) {
    let status = status.as_u16();
    let duration_ms = elapsed.as_micros() as f64 / 1000.0;
    span.in_scope(|| {
        if quiet {
            tracing::debug!(status, duration_ms, "request");
        } else {
            tracing::info!(status, duration_ms, "request");
        }
    });
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
    resp.headers_mut().insert(
        "x-request-id",
        HeaderValue::from_str(&request_id).expect("ascii id"),
    );
    let elapsed = started.elapsed();
    app.runtime
        .services
        .metrics
        .request(target.label(), resp.status().as_u16(), elapsed);
    log_request_end(&span, quiet, resp.status(), elapsed);
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

fn presented_key(req: &Request<Incoming>) -> Option<String> {
    let headers = req.headers();
    if let Some(v) = headers.get("authorization").and_then(|v| v.to_str().ok()) {
        let v = v.trim();
        if v.len() > 7 && v[..7].eq_ignore_ascii_case("bearer ") {
            return Some(v[7..].trim().to_string());
        }
    }
    headers
        .get("x-api-key")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_string())
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

/// A key that authenticates nothing. Each costs a lookup, so they are counted
/// per client address as anonymous requests are: a flood of made-up keys is
/// answered 429 once the client's bucket is empty.
fn invalid_key(app: &App, client: Option<std::net::IpAddr>) -> HttpError {
    match client.map(|ip| app.client_limiter.check(&client_bucket(ip, "invalid-key"))) {
        Some(Err(wait)) => HttpError::RateLimited(wait),
        _ => HttpError::InvalidKey,
    }
}

/// The per-client bucket of `ip` for one route (or other area).
fn client_bucket(ip: std::net::IpAddr, area: &str) -> String {
    format!("{ip} {area}")
}

/// Areas of the public listener the host serves itself (the admin API is
/// on its own listener: [`serve_admin`]).
#[derive(Clone, Copy)]
enum NativeArea {
    Webhooks,
}

impl NativeArea {
    fn label(self) -> &'static str {
        match self {
            NativeArea::Webhooks => "webhooks",
        }
    }
}

fn native_area(path: &str) -> Option<NativeArea> {
    let under = |prefix| crate::paths::under(path, prefix);
    if under("/api/v1/webhook-endpoints") || under("/api/v1/events") {
        return Some(NativeArea::Webhooks);
    }
    None
}

/// Largest component upload accepted by the admin API.
const ADMIN_MAX_BODY: usize = 64 * 1024 * 1024;

fn native_request(parts: &hyper::http::request::Parts, body: Bytes) -> NativeRequest {
    NativeRequest {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        headers: headers_of(parts),
        body: body.to_vec(),
    }
}

fn native_response(
    app: &App,
    result: Result<native::NativeResponse, errors::ApiError>,
) -> Response<Full<Bytes>> {
    let (status, body, allow) = match result {
        Ok(r) => (r.status, r.body, None),
        Err(e) => (e.status, e.body(&app.docs_url()), e.allow),
    };
    let mut resp = Response::builder()
        .status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR))
        .header("content-type", "application/json");
    if let Some(allow) = allow {
        resp = resp.header("allow", allow);
    }
    if status == 503 {
        resp = resp.header("retry-after", errors::RETRY_UNAVAILABLE_SECS);
    }
    resp.body(Full::new(Bytes::from(body.to_string())))
        .expect("valid response parts")
}

async fn native_dispatch(
    app: &Arc<App>,
    area: NativeArea,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, HttpError> {
    let key = presented_key(&req).ok_or(HttpError::MissingKey)?;
    let client = req.extensions().get::<ClientAddr>().map(|c| c.0);
    let Some(principal) = principal_of(app, &key).await? else {
        return Err(invalid_key(app, client));
    };
    admit_principal(app, &principal, req.method().as_str(), req.uri().path())?;
    let reading = body_permit(app, &req, Some(&principal.key_id), client).await?;
    let (parts, body) = read_request(app, req, None).await?;
    drop(reading);
    let request = native_request(&parts, body);
    let result = match area {
        NativeArea::Webhooks => {
            crate::webhooks::api::handle(&app.webhooks, &principal, request).await
        }
    };
    Ok(native_response(app, result))
}

/// The principal a presented key names: from the key cache, or from the
/// database off the workers. Called on the request's headers alone, so a
/// key that authenticates nothing gets its 401 before any byte of its body
/// is read (hyper then closes the connection rather than read the rest).
async fn principal_of(
    app: &Arc<App>,
    key: &str,
) -> Result<Option<crate::accounts::Principal>, HttpError> {
    if let Some(known) = app.accounts.cached(key) {
        return Ok(known);
    }
    let (accounts, key) = (app.accounts.clone(), key.to_string());
    on_blocking_thread(move || {
        accounts
            .authenticate(&key)
            .map_err(|e| HttpError::Unavailable(e.to_string()))
    })
    .await
}

/// An authenticated key's rate limit and scopes, for this method and path.
fn admit_principal(
    app: &App,
    p: &crate::accounts::Principal,
    method: &str,
    path: &str,
) -> Result<(), HttpError> {
    record_principal(&p.merchant_id, p.environment.as_str());
    app.rate_limiter
        .check(&p.key_id)
        .map_err(HttpError::RateLimited)?;
    p.scopes
        .allow(method, path)
        .map_err(HttpError::insufficient_scope)
}

/// The right to read a request's body: one of its key's permits, or, on a
/// route without a key, one of its client address's, so that no key or
/// client holds more than a few bodies in memory at once. A request past
/// them waits briefly, then gets 429. A request without a body needs none.
async fn body_permit(
    app: &App,
    req: &Request<Incoming>,
    key_id: Option<&str>,
    client: Option<std::net::IpAddr>,
) -> Result<Option<crate::permits::KeyedPermit>, HttpError> {
    if hyper::body::Body::is_end_stream(req.body()) {
        return Ok(None);
    }
    let wait = Duration::from_millis(app.connections.config.body_permit_wait_ms);
    let permit = match (key_id, client) {
        (Some(key_id), _) => {
            app.connections
                .key_bodies
                .acquire_within(key_id, wait)
                .await
        }
        (None, Some(ip)) => {
            app.connections
                .client_bodies
                .acquire_within(&ip.to_string(), wait)
                .await
        }
        (None, None) => return Ok(None),
    };
    permit
        .map(Some)
        .ok_or(HttpError::RateLimited(Duration::from_secs(1)))
}

async fn dispatch(
    app: &Arc<App>,
    route: &Route,
    req: Request<Incoming>,
    request_id: &str,
) -> Result<Response<Body>, HttpError> {
    let key = presented_key(&req);
    if !route.public && key.is_none() {
        return Err(HttpError::MissingKey);
    }
    // Anonymous surfaces (checkout, callbacks) have no key to count by: a
    // client address gets its own bucket per route, before any body is read.
    // Whatever the headers say: a made-up `Authorization` (or Wave's shared
    // secret, which comes as one) must not buy a way around the bucket.
    let client = req.extensions().get::<ClientAddr>().map(|c| c.0);
    if route.public
        && let Some(ip) = client
    {
        app.client_limiter
            .check(&client_bucket(ip, &route.prefix))
            .map_err(HttpError::RateLimited)?;
    }
    // The key, from the headers: a request whose key authenticates nothing
    // is refused unread (on a public route it is served as anonymous).
    let principal = match &key {
        Some(key) => principal_of(app, key).await?,
        None => None,
    };
    let caller = match principal {
        Some(p) => {
            admit_principal(app, &p, req.method().as_str(), req.uri().path())?;
            Some(caller_of(app, p, request_id))
        }
        None if route.public => None,
        None => return Err(invalid_key(app, client)),
    };
    let reading = body_permit(
        app,
        &req,
        caller.as_ref().map(|c| c.key_id.as_str()),
        client,
    )
    .await?;
    let (parts, body) = read_request(app, req, route.max_body_bytes).await?;
    drop(reading);
    let request = http_types::Request {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        headers: headers_of(&parts),
        body: body.to_vec(),
    };
    let inline =
        app.inline_reads && matches!(parts.method, hyper::Method::GET | hyper::Method::HEAD);
    let (caller, request, mut response) = if inline {
        serve_inline(app, route, caller, request).await?
    } else {
        let (app, route) = (app.clone(), route.clone());
        on_blocking_thread(move || {
            let response = app
                .runtime
                .handle(&route.component, caller.as_ref(), &request)?;
            Ok((caller, request, response))
        })
        .await?
    };
    let continuation = paged::take_continuation(&mut response);

    let mut builder = Response::builder()
        .status(StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    for (k, v) in &response.headers {
        // A component cannot produce an invalid header: such a header is dropped.
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            builder = builder.header(name, value);
        }
    }
    let body = match (continuation, caller) {
        // A page that names the next one: the rest is streamed after it.
        (Some(next), Some(caller)) if response.status == 200 => {
            // A revoked key's stream stops: checked between pages (the
            // key cache makes that a lookup every 500 ms at most).
            let (accounts, key) = (app.accounts.clone(), key.unwrap_or_default());
            let still_valid: paged::StillValid =
                Arc::new(move || !matches!(accounts.authenticate(&key), Ok(None)));
            Either::Right(paged::stream(
                app.runtime.clone(),
                route.component.clone(),
                caller,
                request,
                response.body,
                next,
                still_valid,
            ))
        }
        _ => Either::Left(Full::new(Bytes::from(response.body))),
    };
    Ok(builder.body(body).unwrap_or_else(|_| {
        paged::full(text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            "invalid response\n",
        ))
    }))
}

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

/// The caller an authenticated key stands for, as the components see it.
/// A revoked key stops at once on the node that revoked it, and within the
/// key cache's 500 ms on the others (`Accounts::authenticate`).
fn caller_of(app: &App, p: crate::accounts::Principal, request_id: &str) -> http_types::Caller {
    http_types::Caller {
        merchant_id: p.merchant_id,
        merchant_name: p.merchant_name,
        environment: p.environment.as_str().to_string(),
        key_id: p.key_id,
        require_second_approver: p.require_second_approver,
        request_id: request_id.to_string(),
        base_url: app.base_url.clone(),
    }
}

type Served = (
    Option<http_types::Caller>,
    http_types::Request,
    http_types::Response,
);

/// A read, served on this worker; one that computes past the inline budget
/// is stopped and served again on a blocking thread. Doing a GET again is
/// safe: the most it writes is what the operator answered to a status query
/// (`?sync=true`), which the second run asks and applies again, idempotently.
async fn serve_inline(
    app: &Arc<App>,
    route: &Route,
    caller: Option<http_types::Caller>,
    request: http_types::Request,
) -> Result<Served, HttpError> {
    use crate::runtime::inline;
    // A host panic must not take the connection down without an answer.
    let attempt = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        inline::run(|| {
            app.runtime
                .handle(&route.component, caller.as_ref(), &request)
        })
    }));
    let response = match attempt {
        Ok(Some(response)) => response?,
        Ok(None) => {
            let (app, component, caller, request) = (
                app.clone(),
                route.component.clone(),
                caller.clone(),
                request.clone(),
            );
            on_blocking_thread(move || {
                Ok(app.runtime.handle(&component, caller.as_ref(), &request)?)
            })
            .await?
        }
        Err(_) => return Err(HttpError::Unavailable("request task failed".into())),
    };
    Ok((caller, request, response))
}

/// A running server: its bound addresses and the tasks serving them.
pub struct Running {
    pub addr: SocketAddr,
    pub task: tokio::task::JoinHandle<()>,
    pub admin_addr: SocketAddr,
    pub admin_task: tokio::task::JoinHandle<()>,
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::sync::Mutex;
    use std::time::Duration;

    use serde_json::Value;

    use super::*;
    use crate::config::{Config, LogFormat};
    use crate::runtime::bindings::host::mmc::platform::log::{Host, Level};
    use crate::runtime::state::HostState;

    /// What a subscriber under test wrote.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Captured {
        type Writer = Captured;
        fn make_writer(&'a self) -> Captured {
            self.clone()
        }
    }

    /// A request as `handle_get` logs it, a component logging through its
    /// capability in it, then a probe; what `mmc` writes in `format`.
    fn logs_of_a_request(format: LogFormat) -> String {
        let out = Captured::default();
        let subscriber = crate::logging::subscriber(
            format,
            tracing_subscriber::EnvFilter::new("info"),
            out.clone(),
            false,
        );
        let mut config = Config::default();
        config.limits.concurrent_calls = 1;
        let sandbox = crate::sandbox::Sandbox::new(&config).unwrap();
        let mut component = HostState::new(
            sandbox.runtime.clone(),
            "collect".into(),
            Arc::default(),
            1 << 20,
            Duration::from_secs(1),
        );
        tracing::subscriber::with_default(subscriber, || {
            let span = request_span(
                false,
                "req_1",
                &hyper::Method::POST,
                "/api/v1/collect/payments",
                "collect",
            );
            span.in_scope(|| {
                record_principal("m_1", "test");
                component
                    .log(Level::Warn, "said by the component".into())
                    .unwrap();
            });
            log_request_end(
                &span,
                false,
                StatusCode::CREATED,
                Duration::from_micros(12_345),
            );
            // Probes are logged at debug: not at info.
            let probe = request_span(true, "req_2", &hyper::Method::GET, "/healthz", "healthz");
            log_request_end(&probe, true, StatusCode::OK, Duration::from_millis(1));
        });
        String::from_utf8(out.0.lock().unwrap().clone()).unwrap()
    }

    #[test]
    fn a_requests_lines_carry_its_id_merchant_and_component_in_json() {
        let text = logs_of_a_request(LogFormat::Json);
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(lines.len(), 2, "{text}");
        let said = &lines[0];
        assert_eq!(said["target"], "component", "{said}");
        assert_eq!(said["component"], "collect", "{said}");
        assert_eq!(said["message"], "said by the component", "{said}");
        assert_eq!(said["span"]["request_id"], "req_1", "{said}");
        assert_eq!(said["span"]["merchant_id"], "m_1", "{said}");
        let end = &lines[1];
        assert_eq!(end["level"], "INFO", "{end}");
        assert_eq!(end["message"], "request", "{end}");
        assert_eq!(end["status"], 201, "{end}");
        assert_eq!(end["duration_ms"], 12.345, "{end}");
        let span = &end["span"];
        assert_eq!(span["request_id"], "req_1", "{end}");
        assert_eq!(span["method"], "POST", "{end}");
        assert_eq!(span["path"], "/api/v1/collect/payments", "{end}");
        assert_eq!(span["component"], "collect", "{end}");
        assert_eq!(span["merchant_id"], "m_1", "{end}");
        assert_eq!(span["environment"], "test", "{end}");
    }

    #[test]
    fn a_requests_lines_in_text_are_prefixed_by_its_span_without_colour() {
        let text = logs_of_a_request(LogFormat::Text);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        for line in &lines {
            assert!(
                line.contains(
                    "request{request_id=req_1 method=POST path=/api/v1/collect/payments component=collect merchant_id=m_1 environment=test}:"
                ),
                "{line}"
            );
        }
        assert!(lines[1].contains("status=201") && lines[1].contains("duration_ms=12.345"));
        assert!(!text.contains('\u{1b}'), "{text}");
    }

    #[test]
    fn a_long_path_is_cut_for_the_log() {
        let long = "/é".repeat(200);
        let logged = logged_path(&long);
        assert!(logged.len() <= MAX_LOGGED_PATH && long.starts_with(logged));
        assert_eq!(logged_path("/healthz"), "/healthz");
    }
}
