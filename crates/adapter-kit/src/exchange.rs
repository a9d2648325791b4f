//! The outbound exchange and the one rule that says what its ending means
//! for the money. Only an explicit answer is known; a call that may have
//! reached the operator without an answer we can read leaves the outcome
//! unknown (asked again by our id, never sent again under a new one):
//!
//! | ending                                           | class     | adapter-error      |
//! |--------------------------------------------------|-----------|--------------------|
//! | timeout                                          | unknown   | `timeout`          |
//! | connection failed or reset, backend failure      | unknown   | `unavailable`      |
//! | 5xx                                              | unknown   | `unavailable`      |
//! | 1xx, 3xx, a 2xx the call does not expect         | unknown   | `invalid-response` |
//! | an expected success whose body cannot be read    | unknown   | `invalid-response` |
//! | 401, 403, 404, 429: refused because of us        | refused   | `rejected`         |
//! | any other 4xx: the operator declined             | known     | (read by adapter)  |
//! | an expected success                              | known     | (read by adapter)  |
//! | the host's allow-list denied it                  | not sent  | `not-sent`         |
//!
//! "Not sent" is said only when nothing can have left us: a connection that
//! failed is not proof that the request did not arrive.

use mmc_domain::http;
use mmc_domain::outcome::Certainty;

use crate::bindings::mmc::platform::types::CapabilityError;
use crate::outbound_http::{self, Request, Response};
use crate::types::{AdapterError, Failure};

/// How a provider's refusals are worded.
pub struct Provider {
    /// As exchange errors name it (`MTN`, `Wave`).
    pub name: &'static str,
    /// The credential a 401 or 403 refuses (`API key`), named in the error;
    /// `None`: those are worded by `refusal` as any other.
    pub credential: Option<&'static str>,
    /// The provider's reason from a 4xx answer (its own error body).
    pub refusal: fn(u16, &[u8]) -> Failure,
}

/// What an exchange's ending says about the money (see the module table).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// The operator answered: what it said is final.
    Known,
    /// The operator may have performed it.
    Unknown,
    /// The operator refused the request itself: not performed.
    Refused,
    /// Nothing left us: not performed.
    NotSent,
}

/// The class of an adapter error, as the service reads it
/// (`mmc_domain::outcome`): not-sent and not-supported are not sent,
/// rejected is refused, the rest unknown.
pub fn class_of(e: &AdapterError) -> Class {
    let failure = mmc_domain::call_failure!(AdapterError, e);
    match (failure.certainty(), e) {
        (Certainty::Unknown, _) => Class::Unknown,
        (Certainty::NotPerformed, AdapterError::Rejected(_)) => Class::Refused,
        (Certainty::NotPerformed, _) => Class::NotSent,
    }
}

/// A call's answer once the ending has been classified.
#[derive(Debug)]
pub enum Reply {
    /// A success status the call expects: its body is the operator's answer.
    Success(Response),
    /// A 4xx other than ours: the operator declined (its body says why).
    Declined(Response),
}

/// Refused because of us (credentials, path, pace): not performed, and not
/// the customer's refusal either.
pub fn ours(status: u16) -> bool {
    matches!(status, 401 | 403 | 404 | 429)
}

/// The statuses a call takes for its answer: a list (`[200, 201]`) or a
/// range (`200..=299`).
pub trait Expected {
    fn expects(&self, status: u16) -> bool;
}

impl<const N: usize> Expected for [u16; N] {
    fn expects(&self, status: u16) -> bool {
        self.contains(&status)
    }
}

impl Expected for std::ops::RangeInclusive<u16> {
    fn expects(&self, status: u16) -> bool {
        self.contains(&status)
    }
}

/// An answer that cannot be read (a `String` saying why) leaves the outcome
/// unknown.
pub trait OrUnknown<T> {
    fn or_unknown(self) -> Result<T, AdapterError>;
}

impl<T> OrUnknown<T> for Result<T, String> {
    fn or_unknown(self) -> Result<T, AdapterError> {
        self.map_err(AdapterError::InvalidResponse)
    }
}

impl Provider {
    /// The transport's ending: a failure to reach the operator, or a 5xx,
    /// becomes the adapter error that says what is known of the operation.
    pub fn transport(
        &self,
        sent: Result<Response, CapabilityError>,
        method: &str,
        path: &str,
    ) -> Result<Response, AdapterError> {
        let name = self.name;
        match sent {
            Err(CapabilityError::Timeout(m)) => Err(AdapterError::Timeout(format!(
                "{name} did not answer {method} {path} in time: {m}"
            ))),
            Err(CapabilityError::Denied(m)) => Err(AdapterError::NotSent(format!(
                "outbound request denied: {m}"
            ))),
            Err(
                CapabilityError::Unavailable(m)
                | CapabilityError::Invalid(m)
                | CapabilityError::Conflict(m),
            ) => Err(AdapterError::Unavailable(format!(
                "{name} unreachable: {m}"
            ))),
            Ok(resp) if resp.status >= 500 => Err(AdapterError::Unavailable(format!(
                "{name} answered {} to {method} {path}: {}",
                resp.status,
                http::excerpt(&resp.body)
            ))),
            Ok(resp) => Ok(resp),
        }
    }

    /// An answer the call did not expect: a 4xx is a refusal (nothing
    /// performed), anything else cannot be read (unknown).
    pub fn unexpected(&self, resp: &Response) -> AdapterError {
        match (resp.status, self.credential) {
            (401 | 403, Some(credential)) => AdapterError::Rejected(format!(
                "{} refused our {credential} ({}): {}",
                self.name,
                resp.status,
                http::excerpt(&resp.body)
            )),
            (400..=499, _) => AdapterError::Rejected(self.refused(resp).message),
            (s, _) => AdapterError::InvalidResponse(format!(
                "{} answered {s} unexpectedly: {}",
                self.name,
                http::excerpt(&resp.body)
            )),
        }
    }

    /// Classifies the answer to a call that expects one of `success`.
    pub fn reply(&self, resp: Response, success: &[u16]) -> Result<Reply, AdapterError> {
        self.reply_if(resp, |s| success.contains(&s))
    }

    /// [`Provider::reply`] with the success statuses given by a predicate
    /// (a provider whose answer is in the body of any 2xx or 3xx).
    pub fn reply_if(
        &self,
        resp: Response,
        success: impl Fn(u16) -> bool,
    ) -> Result<Reply, AdapterError> {
        match resp.status {
            s if success(s) => Ok(Reply::Success(resp)),
            s if ours(s) => Err(self.unexpected(&resp)),
            400..=499 => Ok(Reply::Declined(resp)),
            _ => Err(self.unexpected(&resp)),
        }
    }

    /// The provider's reason for declining, from its answer.
    pub fn refused(&self, resp: &Response) -> Failure {
        (self.refusal)(resp.status, &resp.body)
    }

    /// The answer to a call that expects `expected`, read by `read`
    /// (unreadable, the outcome is unknown), or, for a 4xx other than ours,
    /// the provider's refusal: nothing was performed.
    pub fn answer<T>(
        &self,
        resp: Response,
        expected: impl Expected,
        read: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<Result<T, Failure>, AdapterError> {
        match self.reply_if(resp, |s| expected.expects(s))? {
            Reply::Success(resp) => read(&resp.body).map(Ok).or_unknown(),
            Reply::Declined(resp) => Ok(Err(self.refused(&resp))),
        }
    }

    /// An answer to a read that may find nothing: 200 read by `read`
    /// (unreadable, the answer is unknown), 404 none, anything else an error.
    pub fn found<T>(
        &self,
        resp: Response,
        read: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<Option<T>, AdapterError> {
        match resp.status {
            200 => read(&resp.body).map(Some).or_unknown(),
            404 => Ok(None),
            _ => Err(self.unexpected(&resp)),
        }
    }

    /// A body read as `T`: unreadable, the answer is unknown.
    pub fn read<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        body: &[u8],
    ) -> Result<T, AdapterError> {
        serde_json::from_slice(body).map_err(|e| {
            AdapterError::InvalidResponse(format!("unreadable {} {what}: {e}", self.name))
        })
    }
}

/// A refusal as most providers word it: a JSON body with `code` and
/// `message`, and the field-by-field `errors` some add (any may be missing,
/// or the body not JSON at all).
pub fn coded_refusal(provider: &str, status: u16, body: &[u8]) -> Failure {
    #[derive(serde::Deserialize)]
    struct Coded {
        #[serde(default, deserialize_with = "crate::wire::text_or_number")]
        code: Option<String>,
        message: Option<String>,
        errors: Option<serde_json::Value>,
    }
    let parsed: Option<Coded> = serde_json::from_slice(body).ok();
    let (code, message, errors) =
        parsed.map_or((None, None, None), |b| (b.code, b.message, b.errors));
    let code = code.map(|c| format!(" {c}")).unwrap_or_default();
    let errors = errors.map_or_else(String::new, |e| {
        format!(" {}", e.to_string().chars().take(200).collect::<String>())
    });
    Failure {
        code: "operator_refused".into(),
        message: match message {
            Some(m) => format!("{provider} refused the request ({status}{code}): {m}{errors}"),
            None => format!("{provider} refused the request ({status}{code}).{errors}"),
        },
    }
}

/// A refusal quoted as it came, for a provider whose error bodies have no
/// `code`/`message` to read ([`coded_refusal`] reads those).
pub fn quoted_refusal(provider: &str, status: u16, body: &[u8]) -> Failure {
    Failure {
        code: "operator_refused".into(),
        message: format!(
            "{provider} refused the request ({status}): {}",
            http::excerpt(body)
        ),
    }
}

/// A failure of a call made before the one that moves money (a token, a
/// lookup, a draft the provider creates): nothing was asked of the
/// customer, whatever the error says.
pub fn before_sending(what: &str) -> impl Fn(AdapterError) -> AdapterError + '_ {
    move |e| match e {
        AdapterError::NotSupported(_) | AdapterError::NotSent(_) | AdapterError::Rejected(_) => e,
        AdapterError::Timeout(m)
        | AdapterError::Unavailable(m)
        | AdapterError::InvalidResponse(m)
        | AdapterError::Unauthenticated(m)
        | AdapterError::Busy(m) => AdapterError::NotSent(format!("{what}, nothing sent: {m}")),
    }
}

/// `Authorization: Bearer <token>`.
pub fn bearer(token: &str) -> (String, String) {
    ("Authorization".into(), format!("Bearer {token}"))
}

/// A request body in JSON.
pub fn json(body: &impl serde::Serialize) -> Option<Vec<u8>> {
    Some(serde_json::to_vec(body).expect("wire types serialise"))
}

/// One provider endpoint: where, with which headers on every request, and
/// how long to wait.
#[derive(Clone)]
pub struct Endpoint {
    pub provider: &'static Provider,
    pub base_url: String,
    pub headers: Vec<(String, String)>,
    pub timeout_ms: u32,
}

impl Endpoint {
    /// The provider's API at `base_url`, authorised by `token` sent as a
    /// bearer token.
    pub fn bearer(
        provider: &'static Provider,
        base_url: String,
        token: &str,
        timeout_ms: u32,
    ) -> Endpoint {
        Endpoint {
            provider,
            base_url,
            headers: vec![bearer(token)],
            timeout_ms,
        }
    }

    /// The same API with `header` on every request too.
    pub fn with(mut self, (name, value): (&str, &str)) -> Endpoint {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// One exchange; a JSON body gets its `Content-Type`. Transport failures
    /// and 5xx are classified ([`Provider::transport`]).
    pub fn send(
        &self,
        method: &str,
        path: &str,
        extra_headers: &[(String, String)],
        body: Option<Vec<u8>>,
    ) -> Result<Response, AdapterError> {
        let mut headers = self.headers.clone();
        if body.is_some() {
            headers.push(("Content-Type".into(), "application/json".into()));
        }
        headers.extend(extra_headers.iter().cloned());
        let req = Request {
            method: method.into(),
            url: format!("{}{path}", self.base_url),
            headers,
            body: body.unwrap_or_default(),
            timeout_ms: self.timeout_ms,
        };
        self.provider
            .transport(outbound_http::send(&req), method, path)
    }

    /// `POST path` with a JSON body ([`Endpoint::send`]).
    pub fn post(&self, path: &str, body: &impl serde::Serialize) -> Result<Response, AdapterError> {
        self.send("POST", path, &[], json(body))
    }

    /// `POST path` with a JSON body, its answer read as
    /// [`Provider::answer`] says: the object `read` reads, or the refusal.
    pub fn submit<T>(
        &self,
        path: &str,
        body: &impl serde::Serialize,
        expected: impl Expected,
        read: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<Result<T, Failure>, AdapterError> {
        self.provider.answer(self.post(path, body)?, expected, read)
    }

    /// `GET path` answered 200 with a readable `T`; anything else is an error.
    pub fn get<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        path: &str,
    ) -> Result<T, AdapterError> {
        let resp = self.send("GET", path, &[], None)?;
        if resp.status != 200 {
            return Err(self.provider.unexpected(&resp));
        }
        self.provider.read(what, &resp.body)
    }

    /// [`Endpoint::get`] for a body `read` reads (unreadable: unknown).
    pub fn get_with<T>(
        &self,
        path: &str,
        read: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<T, AdapterError> {
        let resp = self.send("GET", path, &[], None)?;
        if resp.status != 200 {
            return Err(self.provider.unexpected(&resp));
        }
        read(&resp.body).or_unknown()
    }
}

#[cfg(test)]
mod tests;
