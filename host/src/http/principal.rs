//! Who a request is from: the key it presents, the principal that key names
//! (cached), its rate limit and scopes, and its right to send a body.

use super::*;

pub(super) fn presented_key(req: &Request<Incoming>) -> Option<String> {
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

/// A key that authenticates nothing. Each costs a lookup, so they are counted
/// per client address as anonymous requests are: a flood of made-up keys is
/// answered 429 once the client's bucket is empty.
pub(super) fn invalid_key(app: &App, client: Option<std::net::IpAddr>) -> HttpError {
    match client.map(|ip| app.client_limiter.check(&client_bucket(ip, "invalid-key"))) {
        Some(Err(wait)) => HttpError::RateLimited(wait),
        _ => HttpError::InvalidKey,
    }
}

/// The per-client bucket of `ip` for one route (or other area).
pub(super) fn client_bucket(ip: std::net::IpAddr, area: &str) -> String {
    format!("{ip} {area}")
}

/// The principal a presented key names: from the key cache, or from the
/// database off the workers. Called on the request's headers alone, so a
/// key that authenticates nothing gets its 401 before any byte of its body
/// is read (hyper then closes the connection rather than read the rest).
pub(super) async fn principal_of(
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
pub(super) fn admit_principal(
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
pub(super) async fn body_permit(
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

/// The caller an authenticated key stands for, as the components see it.
/// A revoked key stops at once on the node that revoked it, and within the
/// key cache's 500 ms on the others (`Accounts::authenticate`).
pub(super) fn caller_of(
    app: &App,
    p: crate::accounts::Principal,
    request_id: &str,
) -> http_types::Caller {
    http_types::Caller {
        merchant_id: p.merchant_id,
        merchant_name: p.merchant_name,
        environment: p.environment.as_str().to_string(),
        key_id: p.key_id,
        person: p.person.as_ref().map(person_of),
        require_second_approver: p.require_second_approver,
        request_id: request_id.to_string(),
        base_url: app.base_url.clone(),
    }
}

/// A person as the components see them.
pub(crate) fn person_of(p: &crate::accounts::Person) -> http_types::Person {
    http_types::Person {
        id: p.id.clone(),
        approvals_held_until_ms: p.approvals_held_until_ms,
    }
}
