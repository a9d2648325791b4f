//! The site: what each listener serves, path by path. The public listener
//! hands `/console` to the merchant console, the webhook endpoints and
//! events to the host's own handlers, the guide and the API reference to
//! their pages, and every other path to the API component whose prefix it
//! falls under; the admin listener serves `/admin/v1` and `/healthz` alone
//! ([`admin`]). The parts it routes to stand below it and know nothing of it.

mod admin;

use std::sync::Arc;
use std::time::Instant;

use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use tokio::net::TcpListener;
use tracing::Instrument;

use mmc_config::{Generation, Route};
use mmc_console_kit::{Console, Pages};
use mmc_http::component::dispatch;
use mmc_http::connections::Connections;
use mmc_http::errors::HttpError;
use mmc_http::listener::accept_loop;
use mmc_http::native_areas::{NativeArea, native_area, native_dispatch};
use mmc_http::paged::{self, Body};
use mmc_http::pages::{api_docs_page, docs_page, text};
use mmc_http::request_log::{finish, request_span};
use mmc_http::{App, ClientAddr, docs, head_as_get, without_body};

/// What the listeners serve: the API's state, and the areas beside it.
pub struct Site {
    /// Keys, limits, the runtime and its components: what every API request needs.
    pub app: Arc<App>,
    /// The merchant console (`/console/`): its frame's state, and its pages.
    pub console: Console,
    pub pages: Arc<dyn Pages>,
    /// Adapter deployments, through the admin API (`/admin/v1`).
    pub admin: Arc<mmc_admin::Admin>,
}

/// The public listener: merchants, customers, operators' callbacks.
pub async fn serve(site: Arc<Site>, listener: TcpListener) {
    let connections = site.app.connections.clone();
    let drain = site.app.drain.clone();
    accept_loop(site, listener, connections, drain, |site, req| {
        Box::pin(handle(site, req))
    })
    .await
}

/// The admin listener (`admin.listen`): `/admin/v1` and `/healthz`, nothing
/// else; the same clocks, its own caps.
pub async fn serve_admin(site: Arc<Site>, listener: TcpListener) {
    let connections = Connections::new(
        site.app.connections.config.clone(),
        site.app.runtime.services.metrics.clone(),
    );
    let drain = site.app.drain.clone();
    accept_loop(site, listener, connections, drain, |site, req| {
        Box::pin(admin::handle(site, req))
    })
    .await
}

async fn handle(site: Arc<Site>, mut req: Request<Incoming>) -> Response<Body> {
    let head = head_as_get(&mut req);
    let resp = handle_get(site, req).await;
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
            _ if mmc_common::paths::under(path, "/console") => Target::Console,
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

async fn handle_get(site: Arc<Site>, req: Request<Incoming>) -> Response<Body> {
    let started = Instant::now();
    let request_id = format!("req_{}", uuid::Uuid::new_v4().simple());
    let path = req.uri().path().to_string();
    let target = Target::of(&site.app, &path);
    let quiet = target.quiet();
    let span = request_span(quiet, &request_id, req.method(), &path, target.label());
    mmc_telemetry::traces::follow_caller(&span, req.headers());
    let mut resp = serve_target(&site, &target, req, &path, &request_id)
        .instrument(span.clone())
        .await;
    finish(
        &site.app,
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
    site: &Site,
    target: &Target,
    req: Request<Incoming>,
    path: &str,
    request_id: &str,
) -> Response<Body> {
    let app = &site.app;
    match target {
        Target::Healthz => paged::full(text(StatusCode::OK, "text/plain", "ok\n")),
        Target::Metrics => paged::full(text(
            StatusCode::OK,
            "text/plain; version=0.0.4",
            app.runtime.render_metrics(),
        )),
        Target::Docs(page) => paged::full(docs_page(page)),
        Target::ApiDocs => {
            let client = req.extensions().get::<ClientAddr>().map(|c| c.0);
            paged::full(api_docs_page(app, client).await)
        }
        Target::Console => {
            paged::full(site.pages.handle(app, &site.console, req, request_id).await)
        }
        Target::Native(area) => {
            let resp = match native_dispatch(app, *area, req).await {
                Ok(resp) => resp,
                Err(err) => err.into_response(&Generation::Current, &app.docs_url()),
            };
            paged::full(resp)
        }
        Target::Unmatched => paged::full(unmatched(app, req.method(), path)),
        Target::Route(route) => match dispatch(app, route, req, request_id).await {
            Ok(resp) => resp,
            Err(err) => paged::full(err.into_response(&route.generation, &app.docs_url())),
        },
    }
}

/// A path nothing serves: a 404 in the error shape of the generation its
/// path belongs to.
fn unmatched(
    app: &App,
    method: &hyper::Method,
    path: &str,
) -> Response<http_body_util::Full<bytes::Bytes>> {
    let err = HttpError::NoRoute {
        method: method.to_string(),
        path: path.to_string(),
    };
    let generation = if path.starts_with("/api/v1/collect/mobile-money") {
        Generation::Legacy
    } else {
        Generation::Current
    };
    err.into_response(&generation, &app.docs_url())
}
