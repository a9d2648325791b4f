//! Fake operator servers that speak the real protocols over real HTTP on
//! 127.0.0.1:0: MTN MoMo Open API (`mtn`), Wave Checkout/Payout (`wave`) and
//! pawaPay v2 (`pawapay`). Each one checks credentials, completes operations
//! asynchronously, calls back the way its operator does, records everything
//! it received and takes injected faults (5xx, slow answers, malformed
//! bodies) per endpoint, so the adapters are tested against the protocol and
//! not against our own assumptions.

pub mod mtn;
pub mod pawapay;
pub mod wave;

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use serde_json::Value;
use tokio::net::TcpListener;

/// A request as the fake received it.
#[derive(Clone, Debug)]
pub struct Received {
    pub method: String,
    pub path: String,
    pub query: String,
    pub headers: Vec<(String, String)>,
    pub body: Bytes,
    /// When the request arrived (to tell concurrent calls from sequential ones).
    pub at: std::time::Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    pub fn query_param(&self, name: &str) -> Option<String> {
        self.query.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k == name).then(|| v.to_string())
        })
    }
}

/// What the fake answers.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn json(status: u16, body: &Value) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: serde_json::to_vec(body).unwrap(),
        }
    }

    pub fn empty(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
        }
    }
}

/// A fault to inject into the next request(s) to one endpoint.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Answer this status (a 5xx, usually) without doing anything.
    Status(u16),
    /// Do the work, then answer only after this delay: the client may time
    /// out while the operator did take the request, as in production.
    Slow(Duration),
    /// Answer 200 with a body that is not what the protocol says.
    Malformed,
}

/// What every fake shares: the record of requests, the fault queues and a
/// client to call back with.
#[derive(Default)]
pub struct Plumbing {
    received: Mutex<Vec<(&'static str, Received)>>,
    faults: Mutex<HashMap<&'static str, VecDeque<Fault>>>,
    /// Callbacks sent: (url, status our service answered).
    callbacks: Mutex<Vec<(String, u16)>>,
    client: reqwest::Client,
}

impl Plumbing {
    pub fn record(&self, endpoint: &'static str, req: &Received) {
        self.received.lock().push((endpoint, req.clone()));
    }

    pub fn inject(&self, endpoint: &'static str, fault: Fault, times: usize) {
        let mut faults = self.faults.lock();
        let queue = faults.entry(endpoint).or_default();
        for _ in 0..times {
            queue.push_back(fault.clone());
        }
    }

    pub fn take_fault(&self, endpoint: &'static str) -> Option<Fault> {
        self.faults.lock().get_mut(endpoint)?.pop_front()
    }

    pub fn requests(&self, endpoint: &str) -> Vec<Received> {
        self.received
            .lock()
            .iter()
            .filter(|(e, _)| *e == endpoint)
            .map(|(_, r)| r.clone())
            .collect()
    }

    pub fn callbacks(&self) -> Vec<(String, u16)> {
        self.callbacks.lock().clone()
    }

    /// Sends one callback and records what our service answered (0: unreachable).
    pub async fn call_back(
        &self,
        method: &str,
        url: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> u16 {
        let mut req = self
            .client
            .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url)
            .header("content-type", "application/json")
            .timeout(Duration::from_secs(10))
            .body(body);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let status = match req.send().await {
            Ok(resp) => resp.status().as_u16(),
            Err(_) => 0,
        };
        self.callbacks.lock().push((url.to_string(), status));
        status
    }
}

/// Applies an injected fault around `work`: a status or malformed answer
/// skips the work; a slow answer does it and then waits.
pub async fn with_fault(
    plumbing: &Plumbing,
    endpoint: &'static str,
    work: impl std::future::Future<Output = Reply>,
) -> Reply {
    match plumbing.take_fault(endpoint) {
        None => work.await,
        Some(Fault::Status(status)) => Reply::json(
            status,
            &serde_json::json!({"message": "injected failure", "status": status}),
        ),
        Some(Fault::Malformed) => Reply {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: b"{\"status\": \"SUCC<html>bad gateway".to_vec(),
        },
        Some(Fault::Slow(delay)) => {
            let reply = work.await;
            tokio::time::sleep(delay).await;
            reply
        }
    }
}

pub type Handler = Arc<dyn Fn(Received) -> BoxFuture<'static, Reply> + Send + Sync>;

/// Serves `handler` over HTTP/1.1 on 127.0.0.1 and returns the address.
pub async fn serve(handler: Handler) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let handler = handler.clone();
            tokio::spawn(async move {
                let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let handler = handler.clone();
                    async move {
                        let (parts, body) = req.into_parts();
                        let body = body
                            .collect()
                            .await
                            .map(|b| b.to_bytes())
                            .unwrap_or_default();
                        let received = Received {
                            method: parts.method.to_string(),
                            path: parts.uri.path().to_string(),
                            query: parts.uri.query().unwrap_or_default().to_string(),
                            headers: parts
                                .headers
                                .iter()
                                .filter_map(|(k, v)| {
                                    Some((k.as_str().to_string(), v.to_str().ok()?.to_string()))
                                })
                                .collect(),
                            body,
                            at: std::time::Instant::now(),
                        };
                        let reply = handler(received).await;
                        let mut resp = hyper::Response::builder().status(reply.status);
                        for (k, v) in reply.headers {
                            resp = resp.header(k, v);
                        }
                        Ok::<_, Infallible>(resp.body(Full::new(Bytes::from(reply.body))).unwrap())
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            });
        }
    });
    addr
}

/// What the payer's (or recipient's) side will do, keyed by MSISDN digits.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Succeed,
    /// Fail with the operator's own reason code.
    Fail(&'static str),
    /// Never settle (the customer ignores the prompt).
    Stay,
}

/// Outcomes by MSISDN digits; everything not listed succeeds.
#[derive(Default)]
pub struct Outcomes(Mutex<HashMap<String, Outcome>>);

impl Outcomes {
    pub fn set(&self, msisdn: &str, outcome: Outcome) {
        let digits: String = msisdn.chars().filter(char::is_ascii_digit).collect();
        self.0.lock().insert(digits, outcome);
    }

    pub fn of(&self, msisdn: &str) -> Outcome {
        let digits: String = msisdn.chars().filter(char::is_ascii_digit).collect();
        self.0
            .lock()
            .get(&digits)
            .cloned()
            .unwrap_or(Outcome::Succeed)
    }
}

pub fn is_uuid(s: &str) -> bool {
    uuid::Uuid::parse_str(s).is_ok() && s.len() == 36
}

/// An amount as these APIs want it: a string of digits, no leading zero.
pub fn is_amount(v: Option<&Value>) -> bool {
    matches!(v, Some(Value::String(s))
        if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && !s.starts_with('0'))
}

pub fn now_rfc3339() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    mmc_domain::time::rfc3339(secs * 1000)
}
