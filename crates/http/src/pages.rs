//! Pages the host renders itself: plain text, and the documentation under a
//! policy that lets nothing run or load.

use super::principal::client_bucket;
use super::*;

pub fn text(
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
pub fn docs_page(page: &'static str) -> Response<Full<Bytes>> {
    html_page(page)
}

/// The API reference (`/docs/api`), rendered from the OpenAPI documents the
/// components serve. Each view asks the components for them, so a client
/// gets as many views as its bucket for public routes allows.
pub async fn api_docs_page(
    app: &Arc<App>,
    client: Option<std::net::IpAddr>,
) -> Response<Full<Bytes>> {
    if let Some(ip) = client
        && let Err(wait) = app.client_limiter.check(&client_bucket(ip, "/docs/api"))
    {
        return HttpError::RateLimited(wait).into_response(&Generation::Current, &app.docs_url());
    }
    html_page(Bytes::from(api_docs::page(app).await.as_bytes().to_vec()))
}

/// A documentation page, under a policy that lets nothing run or load.
pub(super) fn html_page(html: impl Into<Bytes>) -> Response<Full<Bytes>> {
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
