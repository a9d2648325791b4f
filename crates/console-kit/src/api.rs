//! The console acts as a key with its role's scopes would: each action is a
//! request to the API component, admitted by the same scope check
//! ([`mmc_accounts::scopes::Scopes::allow`]) and per-caller rate limit as a key's
//! request, and carried out by the same component code, with its
//! idempotency, money rules and outbox. Nothing here writes a payment.

use std::sync::Arc;

use serde_json::Value;

use crate::audit::{Outcome, Payment, Pending};
use crate::sessions::Session;
use crate::web::ConsoleError;
use mmc_http::App;
use mmc_runtime::bindings::http_types;

/// The API's answer to a console action: the kit's, as every API component answers.
pub use mmc_api_kit::Answer;

/// What the console reads in an API's answer.
pub trait Reading {
    /// The body as JSON (`null` when it is none).
    fn value(&self) -> Value;
    /// A 2xx.
    fn ok(&self) -> bool;
    /// A refusal as the audit log keeps it: the status and the API's code.
    fn refused_as(&self) -> String;
    /// The API's refusal, in the page's language, for the form that asked.
    fn refusal(&self, lang: crate::html::Lang) -> ConsoleError;
}

impl Reading for Answer {
    fn value(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    fn ok(&self) -> bool {
        (200..300).contains(&self.status)
    }

    fn refused_as(&self) -> String {
        let body = self.value();
        let code = body["error"]["code"].as_str().unwrap_or("refused");
        format!("{} {code}", self.status)
    }

    fn refusal(&self, lang: crate::html::Lang) -> ConsoleError {
        let body = self.value();
        let error = &body["error"];
        let message = error["message"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| format!("The API answered {}.", self.status));
        ConsoleError::Refused(
            self.status,
            crate::refusals::words(
                lang,
                error["code"].as_str(),
                error["param"].as_str(),
                &message,
            ),
        )
    }
}

/// The refusal of an action none of whose scopes the role has.
pub fn forbidden(needed: &[mmc_accounts::scopes::Scope]) -> ConsoleError {
    let names: Vec<&str> = needed.iter().map(|n| n.as_str()).collect();
    ConsoleError::Forbidden(names.join(" or "))
}

/// A console request counts against its person's rate limit as a key's
/// request does against the key's (once, whatever API calls it makes).
pub fn admit(app: &App, s: &Session) -> Result<(), ConsoleError> {
    app.rate_limiter
        .check(&s.actor_id())
        .map_err(ConsoleError::RateLimited)
}

/// A console action that changes something, as each confirming form does
/// it: the form's CSRF token checked, the action's entry written to the
/// audit log as `audit` on `subject`, the API request made as the person,
/// and the entry finished with the outcome (a refusal in the API's words;
/// the detail `detail` draws from an accepted answer).
pub struct Action<'a> {
    pub method: &'a str,
    pub target: &'a str,
    pub body: Option<&'a Value>,
    pub audit: &'a str,
    pub subject: Option<&'a str>,
}

pub async fn perform(
    app: &Arc<App>,
    c: &crate::Console,
    req: &crate::web::Req,
    s: &Session,
    action: Action<'_>,
    detail: impl FnOnce(&Answer) -> Option<String>,
) -> Result<Answer, ConsoleError> {
    crate::web::check_csrf(req, s)?;
    let request = call(
        app,
        s,
        action.method,
        action.target,
        action.body,
        None,
        &req.request_id,
    );
    let audit = (action.audit, action.subject, None);
    match audited(app, c, req, s, audit, request).await? {
        Ok((entry, answer)) => {
            let detail = detail(&answer);
            crate::blocking(|| {
                c.audit
                    .finish(entry, Outcome::Done, None, detail.as_deref())
            })?;
            Ok(answer)
        }
        Err(refused) => Err(refused.refusal(req.lang)),
    }
}

/// The role's scope for `method target`, checked before anything else is
/// asked or shown: a role that may not is refused here, and the attempt
/// is in the audit log as `(action, subject)` refused, as the API would
/// have refused it (`403 insufficient_scope`).
pub async fn permitted(
    app: &Arc<App>,
    c: &crate::Console,
    req: &crate::web::Req,
    s: &Session,
    (method, target): (&str, &str),
    (action, subject): (&str, Option<&str>),
) -> Result<(), ConsoleError> {
    let (path, _) = target.split_once('?').unwrap_or((target, ""));
    let Err(needed) = s.role.scopes().allow(method, path) else {
        return Ok(());
    };
    let refused = forbidden(needed);
    let why = refused_here(&refused).unwrap_or_default();
    let payment = payment_of(app, s, (action, subject), &req.request_id).await;
    let about = (action, subject, payment.as_ref());
    crate::blocking(|| c.audit.refused(s, about, &why, req.client.as_deref()))?;
    Err(refused)
}

/// How the audit log keeps a request that got no answer from the API: a
/// refusal of the console's own (the role's scope, no such route), in the
/// API's terms, its status and code; or none when it was sent and no
/// answer came (it may have been done).
fn refused_here(e: &ConsoleError) -> Option<String> {
    match e {
        ConsoleError::Forbidden(_) => Some("403 insufficient_scope".into()),
        ConsoleError::NotFound => Some("404 resource_not_found".into()),
        ConsoleError::Unavailable(_) => None,
        other => Some(format!("{} {other}", other.status())),
    }
}

/// The payment an action on `subject` is about (an action `payment.…`),
/// read as the person may read it, for its entry to name it by its
/// reference and amount; none when it cannot be read.
async fn payment_of(
    app: &Arc<App>,
    s: &Session,
    (action, subject): (&str, Option<&str>),
    request_id: &str,
) -> Option<Payment> {
    // The subject is the payment's path segment, as the console's own URL had it.
    let id =
        subject.filter(|id| action.starts_with("payment.") && !id.contains(['/', '?', '#']))?;
    let target = format!("/api/v1/collect/payments/{id}");
    let answer = call(app, s, "GET", &target, None, None, request_id)
        .await
        .ok()?;
    answer.ok().then(|| Payment::of(&answer.value())).flatten()
}

/// The API request `request` as an audited action `(action, subject,
/// detail)`: its entry written first (naming the payment the action is
/// about), then the request made. A refusal (`Ok(Err(answer))`, with its
/// status and code, or the console's own refusal in the same terms)
/// finishes the entry here as refused, a request that got no answer (`Err`:
/// it may have been done) as unknown; an accepted answer comes back with
/// its entry, for the caller to finish with what the answer told.
pub async fn audited(
    app: &Arc<App>,
    c: &crate::Console,
    req: &crate::web::Req,
    s: &Session,
    (action, subject, detail): (&str, Option<&str>, Option<&str>),
    request: impl std::future::Future<Output = Result<Answer, ConsoleError>>,
) -> Result<Result<(Pending, Answer), Answer>, ConsoleError> {
    let client = req.client.as_deref();
    let payment = payment_of(app, s, (action, subject), &req.request_id).await;
    let about = (action, subject, payment.as_ref());
    let entry = crate::blocking(|| c.audit.begin_about(s, about, detail, client))?;
    match request.await {
        Ok(answer) if answer.ok() => Ok(Ok((entry, answer))),
        Ok(answer) => {
            let why = answer.refused_as();
            crate::blocking(|| c.audit.finish(entry, Outcome::Refused, None, Some(&why)))?;
            Ok(Err(answer))
        }
        Err(e) => {
            let (outcome, why) = match refused_here(&e) {
                Some(why) => (Outcome::Refused, why),
                None => (Outcome::Unknown, e.to_string()),
            };
            crate::blocking(|| c.audit.finish(entry, outcome, None, Some(&why)))?;
            Err(e)
        }
    }
}

/// `method path?query` with a JSON body, on behalf of the signed-in person.
pub async fn call(
    app: &Arc<App>,
    s: &Session,
    method: &str,
    target: &str,
    body: Option<&Value>,
    idempotency_key: Option<&str>,
    request_id: &str,
) -> Result<Answer, ConsoleError> {
    let body = Body {
        content_type: "application/json".into(),
        bytes: body.map(|b| b.to_string().into_bytes()).unwrap_or_default(),
    };
    call_with(app, s, method, target, body, idempotency_key, request_id).await
}

/// A request body and its media type (JSON, or a multipart upload).
pub struct Body {
    pub content_type: String,
    pub bytes: Vec<u8>,
}

/// [`call`] with any body: a CSV import is multipart, as a key would send it.
pub async fn call_with(
    app: &Arc<App>,
    s: &Session,
    method: &str,
    target: &str,
    body: Body,
    idempotency_key: Option<&str>,
    request_id: &str,
) -> Result<Answer, ConsoleError> {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    // The scope check a key's request passes ([`admit`] counted the request).
    s.role.scopes().allow(method, path).map_err(forbidden)?;
    if mmc_common::paths::under(path, "/api/v1/events")
        || mmc_common::paths::under(path, "/api/v1/webhook-endpoints")
    {
        return Ok(native(app, s, method, path, query, body.bytes).await);
    }
    let route = app.route(path).ok_or(ConsoleError::NotFound)?.clone();
    let caller = http_types::Caller {
        merchant_id: s.merchant_id.clone(),
        merchant_name: s.merchant_name.clone(),
        environment: s.environment.as_str().to_string(),
        key_id: s.actor_id(),
        person: Some(mmc_http::person_of(&s.person())),
        require_second_approver: s.require_second_approver,
        request_id: request_id.to_string(),
        base_url: app.base_url.clone(),
    };
    let mut headers = vec![("content-type".to_string(), body.content_type)];
    if let Some(key) = idempotency_key {
        headers.push(("idempotency-key".to_string(), key.to_string()));
    }
    let request = http_types::Request {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        headers,
        body: body.bytes,
    };
    let app = app.clone();
    let response = mmc_http::on_blocking_thread(move || {
        Ok(app
            .runtime
            .handle(&route.component, Some(&caller), &request)?)
    })
    .await
    .map_err(|e| ConsoleError::Unavailable(e.to_string()))?;
    Ok(Answer {
        status: response.status,
        headers: response.headers,
        body: response.body,
    })
}

/// The areas the host serves itself (events, webhook endpoints), through
/// the handler a key's request reaches, with the person as the principal.
async fn native(
    app: &Arc<App>,
    s: &Session,
    method: &str,
    path: &str,
    query: &str,
    body: Vec<u8>,
) -> Answer {
    let principal = mmc_accounts::Principal {
        key_id: s.actor_id(),
        merchant_id: s.merchant_id.clone(),
        merchant_name: s.merchant_name.clone(),
        environment: s.environment,
        scopes: s.role.scopes(),
        person: Some(s.person()),
        require_second_approver: s.require_second_approver,
    };
    let request = mmc_http::native::NativeRequest {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        headers: vec![("content-type".into(), "application/json".into())],
        body,
    };
    match mmc_http::webhooks::handle(&app.webhooks, &principal, request).await {
        Ok(r) => Answer::json(r.status, &r.body),
        Err(e) => e.into_answer(&app.base_url),
    }
}
