//! A webhook receiver on loopback that records every request and can be told
//! to fail, to check deliveries, retries and signatures from the outside.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use parking_lot::Mutex;
use serde_json::Value;

#[derive(Debug, Clone)]
pub struct Received {
    /// The W3C trace context the sender passed on, if any.
    pub traceparent: String,
    pub signature: String,
    pub event_id_header: String,
    pub body: Vec<u8>,
}

impl Received {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

pub struct Receiver {
    pub addr: SocketAddr,
    pub received: Arc<Mutex<Vec<Received>>>,
    /// Answer 500 to this many requests first.
    pub fail_first: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    pub async fn start() -> Receiver {
        Self::start_on("127.0.0.1:0".parse().unwrap()).await
    }

    pub async fn start_on(addr: SocketAddr) -> Receiver {
        let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let fail_first = Arc::new(AtomicUsize::new(0));
        let (r, f) = (received.clone(), fail_first.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (r, f) = (r.clone(), f.clone());
                tokio::spawn(async move {
                    let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        let (r, f) = (r.clone(), f.clone());
                        async move {
                            let header = |n: &str| {
                                req.headers()
                                    .get(n)
                                    .and_then(|v| v.to_str().ok())
                                    .unwrap_or_default()
                                    .to_string()
                            };
                            let traceparent = header("traceparent");
                            let signature = header("x-service-signature");
                            let event_id_header = header("x-service-event-id");
                            let body = req
                                .into_body()
                                .collect()
                                .await
                                .map(|b| b.to_bytes().to_vec())
                                .unwrap_or_default();
                            r.lock().push(Received {
                                traceparent,
                                signature,
                                event_id_header,
                                body,
                            });
                            let fail = f
                                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                                    n.checked_sub(1)
                                })
                                .is_ok();
                            // A failing answer carries what a broken server leaks.
                            let (status, body) = if fail {
                                (500, LEAKED_TEXT)
                            } else {
                                (200, "ok")
                            };
                            Ok::<_, Infallible>(
                                hyper::Response::builder()
                                    .status(status)
                                    .body(Full::new(Bytes::from_static(body.as_bytes())))
                                    .unwrap(),
                            )
                        }
                    });
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Receiver {
            addr,
            received,
            fail_first,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}/hooks", self.addr)
    }

    pub fn events(&self) -> Vec<Received> {
        self.received.lock().clone()
    }

    /// Waits until `pred` holds for the received requests (or panics after `secs`).
    pub async fn wait_for(&self, secs: u64, pred: impl Fn(&[Received]) -> bool) -> Vec<Received> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
        loop {
            let got = self.events();
            if pred(&got) {
                return got;
            }
            if std::time::Instant::now() > deadline {
                let types: Vec<String> = got
                    .iter()
                    .map(|r| r.json()["type"].as_str().unwrap_or("?").to_string())
                    .collect();
                panic!("receiver did not get what was expected in {secs} s; got {types:?}");
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
}

/// Verifies `X-Service-Signature` independently of the service's code:
/// HMAC-SHA256 over `<t>.<raw body>` with the `hmac` crate directly.
/// What a failing receiver answers: never to be recorded or shown.
pub const LEAKED_TEXT: &str = "stack trace: db password hunter2";

pub fn verify(secret: &str, header: &str, body: &[u8]) -> bool {
    use hmac::{Hmac, Mac};
    let mut t = None;
    let mut v1 = Vec::new();
    for part in header.split(',') {
        match part.split_once('=') {
            Some(("t", v)) => t = Some(v.to_string()),
            Some(("v1", v)) => v1.push(v.to_string()),
            _ => {}
        }
    }
    let Some(t) = t else { return false };
    let mut mac = Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(t.as_bytes());
    mac.update(b".");
    mac.update(body);
    let expected = hex::encode(mac.finalize().into_bytes());
    v1.contains(&expected)
}
