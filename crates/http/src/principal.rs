//! Who a request is from: the key it presents, the principal that key names
//! (cached), its rate limit and scopes, and its right to send a body; and
//! [`admit`], the one sequence of them every keyed request goes through.

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
) -> Result<Option<mmc_accounts::Principal>, HttpError> {
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
    p: &mmc_accounts::Principal,
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
) -> Result<Option<mmc_common::permits::KeyedPermit>, HttpError> {
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

/// How a route is entered: with an API key, or open to anyone (no key
/// needed, a key given still checked), each client address then counted in
/// a bucket of its own for the route.
pub(super) enum Door<'a> {
    Keyed,
    Public { prefix: &'a str },
}

/// A request let in: the key it presented, the principal that key names
/// (none on a public route entered without one), and its body, read.
pub(super) struct Admitted {
    pub key: Option<String>,
    pub principal: Option<mmc_accounts::Principal>,
    pub parts: hyper::http::request::Parts,
    pub body: Bytes,
}

/// The one way in for every request served with an API key, the API
/// components' and the host's own areas alike: the client's bucket on a
/// public route, the key from the headers, the principal it names, its
/// rate limit and scopes, a permit to read the body, then the body (at
/// most `max_body`). Everything is decided on the headers: a key that
/// authenticates nothing is refused before any byte of its body is read.
pub(super) async fn admit(
    app: &Arc<App>,
    req: Request<Incoming>,
    door: Door<'_>,
    max_body: Option<usize>,
) -> Result<Admitted, HttpError> {
    let key = presented_key(&req);
    let client = req.extensions().get::<ClientAddr>().map(|c| c.0);
    match door {
        Door::Keyed if key.is_none() => return Err(HttpError::MissingKey),
        // Whatever the headers say: a made-up `Authorization` (or Wave's
        // shared secret, which comes as one) must not buy a way around it.
        Door::Public { prefix } => {
            if let Some(ip) = client {
                app.client_limiter
                    .check(&client_bucket(ip, prefix))
                    .map_err(HttpError::RateLimited)?;
            }
        }
        Door::Keyed => {}
    }
    let principal = match &key {
        Some(key) => principal_of(app, key).await?,
        None => None,
    };
    match &principal {
        Some(p) => admit_principal(app, p, req.method().as_str(), req.uri().path())?,
        None if matches!(door, Door::Public { .. }) => {}
        None => return Err(invalid_key(app, client)),
    }
    let reading = body_permit(
        app,
        &req,
        principal.as_ref().map(|p| p.key_id.as_str()),
        client,
    )
    .await?;
    let (parts, body) = read_request(app, req, max_body).await?;
    drop(reading);
    Ok(Admitted {
        key,
        principal,
        parts,
        body,
    })
}

/// The caller an authenticated key stands for, as the components see it.
/// A revoked key stops at once on the node that revoked it, and within the
/// key cache's 500 ms on the others (`Accounts::authenticate`).
pub(super) fn caller_of(
    app: &App,
    p: mmc_accounts::Principal,
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
pub fn person_of(p: &mmc_accounts::Person) -> http_types::Person {
    http_types::Person {
        id: p.id.clone(),
        approvals_held_until_ms: p.approvals_held_until_ms,
    }
}
