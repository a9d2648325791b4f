//! The `outbound-http` capability. The allow-list is checked here, in the
//! host, before any connection: a denied host is an error value, never a
//! trap. The client is a trait so the sandbox can answer without a network.

use std::time::Duration;

use crate::bindings::CapabilityError;
use crate::bindings::host::mmc::platform::outbound_http::{Host, Request, Response};
use mmc_common::clock::Clock;

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
        let fetch = async move {
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
            // Read chunk by chunk and stop at the cap: a hostile or broken
            // server cannot make the host buffer more than 4 MiB. (An answer
            // too large is unreadable: the outcome stays unknown.)
            let too_large =
                || CapabilityError::Unavailable("response body larger than 4 MiB".into());
            if resp
                .content_length()
                .is_some_and(|n| n > MAX_RESPONSE_BYTES as u64)
            {
                return Err(too_large());
            }
            let mut resp = resp;
            let mut body = Vec::new();
            while let Some(chunk) = resp.chunk().await.map_err(|e| {
                if e.is_timeout() {
                    CapabilityError::Timeout(e.to_string())
                } else {
                    CapabilityError::Unavailable(e.to_string())
                }
            })? {
                if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                    return Err(too_large());
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Response {
                status,
                headers,
                body,
            })
        };
        // Components run on blocking threads (or off a worker's core, when
        // inline); the I/O runs on the server's runtime.
        mmc_common::inline::may_block(|| self.runtime.block_on(fetch))
    }
}

/// Host, port and whether it is `https` on its default port, of an http(s) URL.
fn authority(url: &str) -> Result<(String, Option<u16>, bool), CapabilityError> {
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
    let default_https = parsed.scheme() == "https" && parsed.port().is_none();
    Ok((host.to_ascii_lowercase(), parsed.port(), default_https))
}

/// An entry `host` allows `https://host` on its default port only; an entry
/// `host:port` allows that port (plain `http` included: the test fakes).
/// A bare host used to match every port and plain http.
pub fn is_allowed(allowed: &[String], url: &str) -> Result<(), CapabilityError> {
    let (host, port, default_https) = authority(url)?;
    let with_port = port.map(|p| format!("{host}:{p}"));
    let ok = allowed.iter().any(|a| {
        let a = a.to_ascii_lowercase();
        (a == host && default_https) || Some(&a) == with_port.as_ref()
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

/// The sending deadline of one attempt of a money movement (a refund, a
/// payout), checked here, where the bytes leave: no request starts after
/// `until_ms` (wall clock), and none runs past it. Another node asks about
/// the movement, or sends it again under the same id, only once the attempt
/// can no longer be on its way: a node that froze between its claim and its
/// call wakes to find it has nothing to send.
#[derive(Debug, Clone, Copy)]
pub struct Fence {
    pub until_ms: u64,
    /// A request was refused because the deadline had passed.
    pub tripped: bool,
}

impl Fence {
    pub fn until(until_ms: u64) -> Fence {
        Fence {
            until_ms,
            tripped: false,
        }
    }

    /// How long a request may still run, none when it must not start.
    pub fn left(&mut self, now_ms: u64) -> Option<Duration> {
        match self.until_ms.checked_sub(now_ms) {
            Some(ms) if ms > 0 => Some(Duration::from_millis(ms)),
            _ => {
                self.tripped = true;
                None
            }
        }
    }
}

pub struct View<'a> {
    pub component: &'a str,
    /// The calling component's allow-list.
    pub allowed_hosts: &'a [String],
    /// The longest a request may take, and what one that names none gets.
    pub timeout_ms: u64,
    /// The money movement this call sends, if any.
    pub fence: &'a mut Option<Fence>,
    pub clock: &'a dyn Clock,
    pub client: &'a dyn HttpClient,
}

/// The marker the runtime links this interface with.
pub type Cap = View<'static>;

impl wasmtime::component::HasData for Cap {
    type Data<'a> = View<'a>;
}

impl Host for View<'_> {
    fn send(&mut self, req: Request) -> wasmtime::Result<Result<Response, CapabilityError>> {
        if let Err(e) = is_allowed(self.allowed_hosts, &req.url) {
            tracing::warn!(component = self.component, url = %req.url, "outbound request denied");
            return Ok(Err(e));
        }
        let default = self.timeout_ms;
        let mut timeout = Duration::from_millis(if req.timeout_ms == 0 {
            default
        } else {
            (req.timeout_ms as u64).min(default.max(1))
        });
        // A money movement's attempt: nothing starts after its deadline, and
        // nothing of it is still on the wire after it.
        if let Some(fence) = self.fence.as_mut() {
            match fence.left(self.clock.now_ms()) {
                Some(left) => timeout = timeout.min(left),
                None => {
                    tracing::warn!(component = self.component, url = %req.url,
                        "request not sent: its attempt's sending deadline has passed");
                    return Ok(Err(CapabilityError::Denied(
                        "this attempt's sending deadline has passed: nothing sent".into(),
                    )));
                }
            }
        }
        let span = mmc_telemetry::traces::outbound_span(&req.method, &req.url);
        let _entered = span.enter();
        let sent = self.client.send(req, timeout);
        if let Ok(r) = &sent {
            span.record("http.response.status_code", r.status);
        }
        Ok(sent)
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
        // A bare host is https on its default port, nothing else.
        for url in [
            "http://api.example.com/x",
            "https://api.example.com:8443/x",
            "http://api.example.com:22/x",
        ] {
            assert!(
                matches!(is_allowed(&allowed, url), Err(CapabilityError::Denied(_))),
                "{url}"
            );
        }
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

    /// A body past the cap is refused as soon as the cap is passed, not once
    /// the server has finished sending (this one never finishes).
    #[test]
    fn a_response_past_the_cap_is_refused_without_reading_it_all() {
        use tokio::io::AsyncWriteExt;
        let rt = tokio::runtime::Runtime::new().unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        rt.spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = tokio::io::AsyncReadExt::read(&mut s, &mut buf).await;
            s.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                .await
                .unwrap();
            let chunk = vec![b'x'; 64 * 1024];
            for _ in 0..(MAX_RESPONSE_BYTES / chunk.len() + 2) {
                let head = format!("{:x}\r\n", chunk.len());
                if s.write_all(head.as_bytes()).await.is_err()
                    || s.write_all(&chunk).await.is_err()
                    || s.write_all(b"\r\n").await.is_err()
                {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_secs(60)).await; // never ends the body
        });
        let client = ReqwestClient::new(rt.handle().clone());
        let started = std::time::Instant::now();
        let answer = client.send(
            Request {
                method: "GET".into(),
                url: format!("http://{addr}/big"),
                headers: vec![],
                body: vec![],
                timeout_ms: 0,
            },
            Duration::from_secs(30),
        );
        assert!(
            matches!(&answer, Err(CapabilityError::Unavailable(m)) if m.contains("4 MiB")),
            "{answer:?}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "did not wait for the end"
        );
    }
}
