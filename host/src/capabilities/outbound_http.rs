//! The `outbound-http` capability. The allow-list is checked here, in the
//! host, before any connection: a denied host is an error value, never a
//! trap. The client is a trait so the sandbox can answer without a network.

use std::time::Duration;

use crate::runtime::bindings::CapabilityError;
use crate::runtime::bindings::host::mmc::platform::outbound_http::{Host, Request, Response};
use crate::runtime::state::HostState;

pub trait HttpClient: Send + Sync + 'static {
    fn send(&self, req: Request, timeout: Duration) -> Result<Response, CapabilityError>;
}

/// Largest response body handed to a component.
const MAX_RESPONSE_BYTES: usize = 4 * 1024 * 1024;

/// Real HTTP through reqwest; no redirects (an operator redirecting us is an answer, not a hop).
pub struct ReqwestClient {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl ReqwestClient {
    pub fn new(runtime: tokio::runtime::Handle) -> ReqwestClient {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("mmc/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("reqwest client with default TLS");
        ReqwestClient { client, runtime }
    }
}

impl HttpClient for ReqwestClient {
    fn send(&self, req: Request, timeout: Duration) -> Result<Response, CapabilityError> {
        let method = reqwest::Method::from_bytes(req.method.as_bytes())
            .map_err(|_| CapabilityError::Invalid(format!("bad method {}", req.method)))?;
        let mut builder = self
            .client
            .request(method, &req.url)
            .timeout(timeout)
            .body(req.body);
        for (k, v) in req.headers {
            builder = builder.header(k, v);
        }
        // Components run on blocking threads; the I/O runs on the server's runtime.
        self.runtime.block_on(async move {
            let resp = builder.send().await.map_err(|e| {
                if e.is_timeout() {
                    CapabilityError::Timeout(e.to_string())
                } else {
                    CapabilityError::Unavailable(e.to_string())
                }
            })?;
            let status = resp.status().as_u16();
            let headers = resp
                .headers()
                .iter()
                .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
                .collect();
            let body = resp.bytes().await.map_err(|e| {
                if e.is_timeout() {
                    CapabilityError::Timeout(e.to_string())
                } else {
                    CapabilityError::Unavailable(e.to_string())
                }
            })?;
            if body.len() > MAX_RESPONSE_BYTES {
                return Err(CapabilityError::Unavailable(
                    "response body larger than 4 MiB".into(),
                ));
            }
            Ok(Response {
                status,
                headers,
                body: body.to_vec(),
            })
        })
    }
}

/// `host` or `host:port` of an http(s) URL, if it is one.
fn authority(url: &str) -> Result<(String, Option<u16>), CapabilityError> {
    let parsed =
        reqwest::Url::parse(url).map_err(|e| CapabilityError::Invalid(format!("bad url: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(CapabilityError::Denied(format!(
            "scheme {} is not allowed",
            parsed.scheme()
        )));
    }
    let host = parsed
        .host_str()
        .ok_or_else(|| CapabilityError::Invalid("url has no host".into()))?;
    Ok((host.to_ascii_lowercase(), parsed.port()))
}

pub fn is_allowed(allowed: &[String], url: &str) -> Result<(), CapabilityError> {
    let (host, port) = authority(url)?;
    let with_port = port.map(|p| format!("{host}:{p}"));
    let ok = allowed.iter().any(|a| {
        let a = a.to_ascii_lowercase();
        a == host || Some(&a) == with_port.as_ref()
    });
    if ok {
        Ok(())
    } else {
        Err(CapabilityError::Denied(format!(
            "host {} is not in this component's allow-list",
            with_port.unwrap_or(host)
        )))
    }
}

impl Host for HostState {
    fn send(&mut self, req: Request) -> wasmtime::Result<Result<Response, CapabilityError>> {
        if let Err(e) = is_allowed(&self.config.allowed_hosts, &req.url) {
            tracing::warn!(component = &*self.component, url = %req.url, "outbound request denied");
            return Ok(Err(e));
        }
        let default = self.runtime.limits.outbound_timeout_ms;
        let timeout = Duration::from_millis(if req.timeout_ms == 0 {
            default
        } else {
            (req.timeout_ms as u64).min(default.max(1))
        });
        Ok(self.runtime.services.http.send(req, timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allow_list_matches_host_or_host_and_port() {
        let allowed = vec!["api.example.com".to_string(), "127.0.0.1:9000".to_string()];
        assert!(is_allowed(&allowed, "https://api.example.com/x").is_ok());
        assert!(is_allowed(&allowed, "http://127.0.0.1:9000/x").is_ok());
        assert!(matches!(
            is_allowed(&allowed, "http://127.0.0.1:9001/x"),
            Err(CapabilityError::Denied(_))
        ));
        assert!(matches!(
            is_allowed(&allowed, "file:///etc/passwd"),
            Err(CapabilityError::Denied(_))
        ));
        assert!(matches!(
            is_allowed(&allowed, "not a url"),
            Err(CapabilityError::Invalid(_))
        ));
    }
}
