//! The admin listener's requests: `/healthz` and the admin API
//! (`/admin/v1`, behind its token), with their own request id, span and metrics.

use bytes::Bytes;
use http_body_util::Full;

use super::*;
use mmc_http::native::{native_request, native_response};
use mmc_http::read_request;

pub(super) async fn handle(site: Arc<Site>, mut req: Request<Incoming>) -> Response<Body> {
    let head = head_as_get(&mut req);
    let resp = paged::full(handle_get(site, req).await);
    if head { without_body(resp) } else { resp }
}

async fn handle_get(site: Arc<Site>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let started = Instant::now();
    let request_id = format!("req_{}", uuid::Uuid::new_v4().simple());
    let path = req.uri().path().to_string();
    let quiet = path == "/healthz";
    let span = request_span(quiet, &request_id, req.method(), &path, "admin");
    mmc_telemetry::traces::follow_caller(&span, req.headers());
    let served = async {
        if quiet {
            text(StatusCode::OK, "text/plain", "ok\n")
        } else if path == "/admin/v1" || path.starts_with("/admin/v1/") {
            admin_api(&site, req).await
        } else {
            HttpError::NoRoute {
                method: req.method().to_string(),
                path: path.clone(),
            }
            .into_response(&Generation::Current, &site.app.docs_url())
        }
    };
    let mut resp = served.instrument(span.clone()).await;
    finish(
        &site.app,
        &mut resp,
        &request_id,
        "admin",
        &span,
        quiet,
        started,
    );
    resp
}

async fn admin_api(site: &Site, req: Request<Incoming>) -> Response<Full<Bytes>> {
    let app = &site.app;
    let authorization = req
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok());
    if let Err(e) = mmc_admin::api::authorize(&site.admin, authorization) {
        return native_response(app, Err(e));
    }
    // Component uploads get a larger body limit.
    match read_request(app, req, Some(MAX_BODY)).await {
        Ok((parts, body)) => {
            let request = native_request(&parts, body);
            let under = |prefix| mmc_common::paths::under(&request.path, prefix);
            let result = if under("/admin/v1/reconciliation") || under("/admin/v1/balances") {
                mmc_http::books::admin(&app.books, request).await
            } else {
                mmc_admin::api::handle(&site.admin, request).await
            };
            native_response(app, result)
        }
        Err(err) => err.into_response(&Generation::Current, &app.docs_url()),
    }
}

/// Largest component upload accepted by the admin API.
const MAX_BODY: usize = 64 * 1024 * 1024;
