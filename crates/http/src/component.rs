//! Routes served by an API component: the key checked before the body is
//! read, the request handed to the component (a read inline on the worker,
//! a write on a blocking thread), its answer streamed page by page.

use super::pages::text;
use super::principal::{Admitted, Door, admit, caller_of};
use super::*;

pub async fn dispatch(
    app: &Arc<App>,
    route: &Route,
    req: Request<Incoming>,
    request_id: &str,
) -> Result<Response<Body>, HttpError> {
    // Anonymous surfaces (checkout, callbacks) have no key to count by.
    let door = if route.public {
        Door::Public {
            prefix: &route.prefix,
        }
    } else {
        Door::Keyed
    };
    let Admitted {
        key,
        principal,
        parts,
        body,
    } = admit(app, req, door, route.max_body_bytes).await?;
    let caller = principal.map(|p| caller_of(app, p, request_id));
    let request = http_types::Request {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        query: parts.uri.query().unwrap_or_default().to_string(),
        headers: headers_of(&parts),
        body: body.to_vec(),
    };
    let inline =
        app.inline_reads && matches!(parts.method, hyper::Method::GET | hyper::Method::HEAD);
    let (caller, request, response) = if inline {
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
    let key = key.unwrap_or_default();
    Ok(respond(app, route, caller, request, response, key))
}

/// The component's answer as an HTTP response: its status and headers (an
/// invalid header dropped), its body, and when it names a next page, the
/// rest streamed after it while the key stays valid.
fn respond(
    app: &Arc<App>,
    route: &Route,
    caller: Option<http_types::Caller>,
    request: http_types::Request,
    mut response: http_types::Response,
    key: String,
) -> Response<Body> {
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
            let accounts = app.accounts.clone();
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
    builder.body(body).unwrap_or_else(|_| {
        paged::full(text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            "invalid response\n",
        ))
    })
}

pub(super) type Served = (
    Option<http_types::Caller>,
    http_types::Request,
    http_types::Response,
);

/// A read, served on this worker; one that computes past the inline budget
/// is stopped and served again on a blocking thread. Doing a GET again is
/// safe: the most it writes is what the operator answered to a status query
/// (`?sync=true`), which the second run asks and applies again, idempotently.
pub(super) async fn serve_inline(
    app: &Arc<App>,
    route: &Route,
    caller: Option<http_types::Caller>,
    request: http_types::Request,
) -> Result<Served, HttpError> {
    use mmc_runtime::inline;
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
