//! Fake operator servers that speak the real protocols over real HTTP on
//! 127.0.0.1:0: MTN MoMo Open API (`mtn`), Wave Checkout/Payout (`wave`),
//! pawaPay v2 (`pawapay`) and FedaPay v1 (`fedapay`). Each one checks
//! credentials, completes operations asynchronously, calls back the way its
//! operator does, records everything it received and takes injected faults
//! per endpoint, or per operation
//! (`inject_for`: matched against the party's MSISDN or our id), so the
//! adapters are tested against the protocol and not against our own
//! assumptions.
//!
//! Every fake is built on the kit ([`kit`]): a [`kit::Wire`] (the
//! provider's routes and records) served by a [`kit::FakeServer`], which
//! gives it the server, the adapter's configuration, the record of
//! requests, the faults, the callback modes and the customers' outcomes.
//!
//! Faults lie the way operators do: besides a refusal before any work
//! (`Status`, `Malformed`), an operator may do the work and still fail to
//! tell us (`Slow`, `AcceptThenStatus`, `AcceptThenReset`,
//! `AcceptThenGarbage`): the money moves and our side sees an error. Each
//! fake exposes what it did (transactions, sessions, payouts, records) so a
//! test can compare "money moved at the operator" with what we report.

/// The example operator `mmc adapters new` scaffolds from, compiled with the
/// fakes so that its template cannot rot.
#[path = "../../../crates/scaffold/src/templates/fake.rs"]
pub mod acme;
pub mod cinetpay;
pub mod fedapay;
pub mod kit;
pub mod mtn;
pub mod pawapay;
pub mod wave;

use std::collections::{BTreeSet, HashMap, VecDeque};
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

pub use kit::{Callbacks, FakeServer, Wire};

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
    /// What identifies the operation this request is about, normalised by
    /// [`normal_key`]: our id(s), the ids it refers to, the party's MSISDN digits.
    /// Filled in by each fake; faults injected with `inject_for` match these.
    pub keys: Vec<String>,
    /// Creating requests: the id the operation is created under (MTN
    /// `X-Reference-Id`, pawaPay `depositId`/`payoutId`/`refundId`, Wave
    /// `client_reference` or `idempotency-key`, or the session refunded or
    /// expired). Counting distinct values tells whether one money movement
    /// was sent under two ids.
    pub op_id: Option<String>,
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

    /// Whether `key` (an MSISDN in any form, or an id) identifies this request.
    pub fn is_about(&self, key: &str) -> bool {
        let wanted = normal_key(key);
        self.keys.contains(&wanted)
    }

    /// Adds identifying keys (normalised; empty ones are skipped).
    pub fn add_keys<'a>(&mut self, keys: impl IntoIterator<Item = &'a str>) {
        for k in keys {
            let k = normal_key(k);
            if !k.is_empty() && !self.keys.contains(&k) {
                self.keys.push(k);
            }
        }
    }

    pub fn query_param(&self, name: &str) -> Option<String> {
        self.query.split('&').find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k == name).then(|| v.to_string())
        })
    }
}

/// Normalises an identifying key: an MSISDN in any form (`+229 01…`,
/// `22901…`) becomes its digits; anything else (ids) is kept as is.
pub fn normal_key(s: &str) -> String {
    let s = s.trim();
    let phone_like = !s.is_empty()
        && s.trim_start_matches('+')
            .bytes()
            .all(|b| b.is_ascii_digit() || b == b' ');
    if phone_like {
        s.chars().filter(char::is_ascii_digit).collect()
    } else {
        s.to_string()
    }
}

/// What the fake answers.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// Drop the connection instead of answering (no HTTP response at all).
    pub reset: bool,
}

impl Reply {
    pub fn json(status: u16, body: &Value) -> Reply {
        Reply {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: serde_json::to_vec(body).unwrap(),
            reset: false,
        }
    }

    pub fn empty(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            body: Vec::new(),
            reset: false,
        }
    }

    /// 200 with a body no parser of this protocol can read.
    pub fn garbage() -> Reply {
        Reply {
            status: 200,
            headers: vec![("content-type".into(), "application/json".into())],
            body: b"{\"status\": \"SUCC<html>bad gateway".to_vec(),
            reset: false,
        }
    }

    /// The connection is closed after the request was read, before any response.
    pub fn reset() -> Reply {
        Reply {
            reset: true,
            ..Reply::empty(0)
        }
    }

    fn injected_failure(status: u16) -> Reply {
        Reply::json(
            status,
            &serde_json::json!({"message": "injected failure", "status": status}),
        )
    }
}

/// A fault to inject into the next request(s) to one endpoint (`inject`)
/// or about one operation (`inject_for`).
///
/// Two families: the operator refused **before doing anything** (`Status`,
/// `Malformed`: nothing recorded, no money moves), or it **did the work**
/// (the operation is recorded and settles as usual, money moves) and then
/// failed to tell us (`Slow`, `AcceptThen…`). For the second family the
/// outcome is unknown to the caller, who must ask the operator by its id.
#[derive(Clone, Debug)]
pub enum Fault {
    /// Before any work: answer this status (a 5xx, usually); nothing is done.
    Status(u16),
    /// Before any work: answer 200 with a body that is not what the protocol
    /// says; nothing is done.
    Malformed,
    /// Do the work, then answer only after this delay: the client may time
    /// out while the operator did take the request, as in production.
    Slow(Duration),
    /// Do the work, then answer this status (a 5xx from a gateway in front
    /// of an operator that did process the request).
    AcceptThenStatus(u16),
    /// Do the work, then drop the connection without any response (the
    /// client sees a reset / connection closed after sending).
    AcceptThenReset,
    /// Do the work, then answer 200 with an unreadable body.
    AcceptThenGarbage,
    /// The request waits in the operator's gateway: the client hears
    /// nothing in time, nothing is known of the operation meanwhile (a
    /// status query finds nothing), and the work is done only after this
    /// delay, once every window the caller keeps has passed. A copy sent
    /// meanwhile under the same id is taken as the provider takes a
    /// repeated id.
    ArrivesLate(Duration),
    /// Before any work: answer exactly this (a refusal in the provider's
    /// own error shape, e.g. each fake's `refusal(401)`); nothing is done.
    Reply(Reply),
    /// The request waits in the provider's gateway, nothing known of it
    /// (a status query finds nothing), until the test opens the gate; then
    /// it meets the fault given, or is taken as usual (`None`). A refusal let
    /// through late is an operator saying "nothing was done" after the
    /// caller's view of the operation has moved on.
    Held(Gate, Option<Box<Fault>>),
}

/// Where a [`Fault::Held`] request waits until the test opens it.
#[derive(Clone, Debug)]
pub struct Gate(Arc<tokio::sync::watch::Sender<bool>>);

impl Default for Gate {
    fn default() -> Gate {
        Gate(Arc::new(tokio::sync::watch::channel(false).0))
    }
}

impl Gate {
    /// Lets every request held here go on.
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    async fn passed(&self) {
        let mut open = self.0.subscribe();
        let _ = open.wait_for(|o| *o).await;
    }
}

/// The refusals an operator gives a partner for the partner's own doing,
/// whatever the customer does: 401 (credentials), 403 (not allowed: wrong
/// key scope or target environment), 404 (wrong path) and 429 (throttled).
pub const REFUSED_BECAUSE_OF_US: [u16; 4] = [401, 403, 404, 429];

/// How a provider delivers one callback: how long it waits for our answer,
/// how many times it tries, and which answers count as delivered. Each fake
/// states its provider's rule and where it comes from (`mtn::DELIVERY`,
/// `pawapay::DELIVERY`, `wave::DELIVERY`, `fedapay::DELIVERY`).
#[derive(Clone, Copy, Debug)]
pub struct Delivery {
    /// How long one attempt waits for the answer (then it counts as failed, 0).
    pub patience: Duration,
    /// Attempts in all, the first one included.
    pub attempts: usize,
    /// The pause between two attempts (shortened for tests: providers wait longer).
    pub pause: Duration,
    /// Only `200` counts as delivered (pawaPay); otherwise any 2xx does.
    pub only_200: bool,
}

impl Delivery {
    pub fn delivered(&self, status: u16) -> bool {
        if self.only_200 {
            status == 200
        } else {
            (200..300).contains(&status)
        }
    }
}

/// A fault waiting for a request about one operation.
struct Targeted {
    endpoint: &'static str,
    key: String,
    fault: Fault,
    left: usize,
}

/// What every fake shares: the record of requests, the fault queues, a
/// client to call back with, how callbacks are sent and what customers do.
pub struct Plumbing {
    received: Mutex<Vec<(&'static str, Received)>>,
    faults: Mutex<HashMap<&'static str, VecDeque<Fault>>>,
    targeted: Mutex<Vec<Targeted>>,
    /// Callbacks sent: (url, status our service answered).
    callbacks: Mutex<Vec<(String, u16)>>,
    /// Per endpoint: requests being answered now, and the most at once.
    in_flight: Mutex<HashMap<&'static str, (usize, usize)>>,
    client: reqwest::Client,
    /// What each customer does, by MSISDN.
    pub outcomes: Outcomes,
    /// How long a customer takes to act.
    pub settle_after: Mutex<Duration>,
    /// How callbacks are sent ([`Callbacks`]).
    pub callback_mode: Mutex<Callbacks>,
    /// The callback URL set once in the provider's dashboard, if any.
    pub callback_url: Mutex<Option<String>>,
}

impl Default for Plumbing {
    fn default() -> Plumbing {
        Plumbing {
            received: Mutex::default(),
            faults: Mutex::default(),
            targeted: Mutex::default(),
            callbacks: Mutex::default(),
            in_flight: Mutex::default(),
            client: reqwest::Client::default(),
            outcomes: Outcomes::default(),
            settle_after: Mutex::new(Duration::from_millis(300)),
            callback_mode: Mutex::new(Callbacks::Send),
            callback_url: Mutex::default(),
        }
    }
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

    /// Drops every fault not used yet: the provider answers again.
    pub fn clear_faults(&self) {
        self.faults.lock().clear();
        self.targeted.lock().clear();
    }

    /// The next `times` requests to `endpoint` about `key` (an MSISDN or one
    /// of our ids, see [`Received::keys`]) get `fault`. Targeted faults let
    /// many operations run concurrently against one fake, each with its own.
    pub fn inject_for(&self, endpoint: &'static str, key: &str, fault: Fault, times: usize) {
        self.targeted.lock().push(Targeted {
            endpoint,
            key: normal_key(key),
            fault,
            left: times,
        });
    }

    /// How many injections for (`endpoint`, `key`) have not been used yet
    /// (a test checks 0 to know its fault really hit).
    pub fn faults_left(&self, endpoint: &str, key: &str) -> usize {
        let wanted = normal_key(key);
        self.targeted
            .lock()
            .iter()
            .filter(|t| t.endpoint == endpoint && t.key == wanted)
            .map(|t| t.left)
            .sum()
    }

    /// The most requests to `endpoint` this fake was answering at once
    /// (requests with a `Slow` fault overlap if the client sends them together).
    pub fn most_at_once(&self, endpoint: &str) -> usize {
        self.in_flight
            .lock()
            .get(endpoint)
            .map_or(0, |(_, most)| *most)
    }

    pub fn take_fault(&self, endpoint: &'static str) -> Option<Fault> {
        self.faults.lock().get_mut(endpoint)?.pop_front()
    }

    /// A fault targeted at this request's operation first, else the endpoint's queue.
    pub fn take_fault_for(&self, endpoint: &'static str, req: &Received) -> Option<Fault> {
        {
            let mut targeted = self.targeted.lock();
            let hit = targeted
                .iter_mut()
                .find(|t| t.endpoint == endpoint && t.left > 0 && req.keys.contains(&t.key));
            if let Some(t) = hit {
                t.left -= 1;
                return Some(t.fault.clone());
            }
        }
        self.take_fault(endpoint)
    }

    pub fn requests(&self, endpoint: &str) -> Vec<Received> {
        self.received
            .lock()
            .iter()
            .filter(|(e, _)| *e == endpoint)
            .map(|(_, r)| r.clone())
            .collect()
    }

    /// Requests to `endpoint` about `key` (an MSISDN or one of our ids).
    pub fn requests_for(&self, endpoint: &str, key: &str) -> Vec<Received> {
        self.requests(endpoint)
            .into_iter()
            .filter(|r| r.is_about(key))
            .collect()
    }

    /// The distinct ids operations were created under, among the requests to
    /// `endpoint` about `key`: more than one means one money movement was
    /// sent under two ids.
    pub fn ids_for(&self, endpoint: &str, key: &str) -> BTreeSet<String> {
        self.requests_for(endpoint, key)
            .into_iter()
            .filter_map(|r| r.op_id)
            .collect()
    }

    pub fn callbacks(&self) -> Vec<(String, u16)> {
        self.callbacks.lock().clone()
    }

    /// How long the customer takes to act now.
    pub fn settle_delay(&self) -> Duration {
        *self.settle_after.lock()
    }

    /// The dashboard's callback URL, if set.
    pub fn dashboard_url(&self) -> Option<String> {
        self.callback_url.lock().clone()
    }

    /// One callback of an operation that became final, sent as the fake's
    /// [`Callbacks`] mode says (once, never, twice, or late), each delivery
    /// under the provider's `rule` ([`Plumbing::deliver`]). Returns our
    /// answers to every attempt.
    pub async fn dispatch(
        &self,
        method: &str,
        url: &str,
        headers: impl Fn() -> Vec<(String, String)>,
        body: Vec<u8>,
        rule: Delivery,
    ) -> Vec<u16> {
        let mode = *self.callback_mode.lock();
        let times = match mode {
            Callbacks::Send => 1,
            Callbacks::Lost => 0,
            Callbacks::Duplicate => 2,
            Callbacks::Late(delay) => {
                tokio::time::sleep(delay).await;
                1
            }
        };
        let mut answers = Vec::new();
        for _ in 0..times {
            answers.extend(
                self.deliver(method, url, &headers, body.clone(), rule)
                    .await,
            );
        }
        answers
    }

    /// Sends one callback and records what our service answered (0: unreachable).
    pub async fn call_back(
        &self,
        method: &str,
        url: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> u16 {
        self.call_back_within(method, url, headers, body, Duration::from_secs(10))
            .await
    }

    /// One callback delivered under the provider's `rule`: each attempt
    /// waits `rule.patience` for our answer, and another follows while none
    /// counted as delivered, up to `rule.attempts`. `headers` is called for
    /// every attempt (a signature is made when the attempt is sent). Returns
    /// our answer to each attempt, in order (0: none in time, or unreachable).
    pub async fn deliver(
        &self,
        method: &str,
        url: &str,
        headers: impl Fn() -> Vec<(String, String)>,
        body: Vec<u8>,
        rule: Delivery,
    ) -> Vec<u16> {
        let mut answers = Vec::new();
        for attempt in 0..rule.attempts {
            if attempt > 0 {
                tokio::time::sleep(rule.pause).await;
            }
            let status = self
                .call_back_within(method, url, headers(), body.clone(), rule.patience)
                .await;
            answers.push(status);
            if rule.delivered(status) {
                break;
            }
        }
        answers
    }

    async fn call_back_within(
        &self,
        method: &str,
        url: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
        patience: Duration,
    ) -> u16 {
        let mut req = self
            .client
            .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url)
            .header("content-type", "application/json")
            .timeout(patience)
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

/// Applies the endpoint's next queued fault around `work` (see [`apply`]).
pub async fn with_fault(
    plumbing: &Plumbing,
    endpoint: &'static str,
    work: impl std::future::Future<Output = Reply>,
) -> Reply {
    counted(
        plumbing,
        endpoint,
        apply(plumbing.take_fault(endpoint), work),
    )
    .await
}

/// `answer`, counted among the requests `endpoint` is answering meanwhile.
async fn counted(
    plumbing: &Plumbing,
    endpoint: &'static str,
    answer: impl std::future::Future<Output = Reply>,
) -> Reply {
    {
        let mut in_flight = plumbing.in_flight.lock();
        let (now, most) = in_flight.entry(endpoint).or_default();
        *now += 1;
        *most = (*most).max(*now);
    }
    let reply = answer.await;
    if let Some((now, _)) = plumbing.in_flight.lock().get_mut(endpoint) {
        *now -= 1;
    }
    reply
}

/// Applies a fault targeted at `req`'s operation, else the endpoint's next
/// queued one, around `work` (see [`apply`]).
pub async fn with_fault_for(
    plumbing: &Plumbing,
    endpoint: &'static str,
    req: &Received,
    work: impl std::future::Future<Output = Reply>,
) -> Reply {
    let fault = plumbing.take_fault_for(endpoint, req);
    counted(plumbing, endpoint, apply(fault, work)).await
}

/// `Status`, `Malformed` and `Reply` skip the work; `Held` waits, then
/// applies its own; every other fault does the work (the operation is
/// recorded and settles as usual) and then lies about it.
async fn apply(fault: Option<Fault>, work: impl std::future::Future<Output = Reply>) -> Reply {
    let Some(fault) = fault else {
        return work.await;
    };
    match fault {
        Fault::Status(status) => Reply::injected_failure(status),
        Fault::Malformed => Reply::garbage(),
        Fault::Slow(delay) => {
            let reply = work.await;
            tokio::time::sleep(delay).await;
            reply
        }
        Fault::AcceptThenStatus(status) => {
            work.await;
            Reply::injected_failure(status)
        }
        Fault::AcceptThenReset => {
            work.await;
            Reply::reset()
        }
        Fault::AcceptThenGarbage => {
            work.await;
            Reply::garbage()
        }
        Fault::ArrivesLate(delay) => {
            // The client gave up long before; the request goes on in the
            // gateway ([`serve`] finishes every request it received).
            tokio::time::sleep(delay).await;
            work.await;
            Reply::injected_failure(504)
        }
        Fault::Reply(reply) => reply,
        Fault::Held(gate, then) => {
            gate.passed().await;
            Box::pin(apply(then.map(|f| *f), work)).await
        }
    }
}

pub type Handler = Arc<dyn Fn(Received) -> BoxFuture<'static, Reply> + Send + Sync>;

/// The service's error for a [`Reply::reset`]: hyper then closes the
/// connection without writing any response.
#[derive(Debug)]
struct ResetByFake;

impl std::fmt::Display for ResetByFake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection reset by the fake operator (injected)")
    }
}

impl std::error::Error for ResetByFake {}

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
                            keys: Vec::new(),
                            op_id: None,
                        };
                        // A request received is carried out even when the
                        // client has gone (a gateway does not know it left).
                        let reply = tokio::spawn(handler(received))
                            .await
                            .unwrap_or_else(|_| Reply::reset());
                        if reply.reset {
                            return Err(ResetByFake);
                        }
                        let mut resp = hyper::Response::builder().status(reply.status);
                        for (k, v) in reply.headers {
                            resp = resp.header(k, v);
                        }
                        Ok(resp.body(Full::new(Bytes::from(reply.body))).unwrap())
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

/// How a [`Receiver`] answers one request.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    /// This status, at once.
    Status(u16),
    /// 200, after this delay (a receiver too slow for the provider).
    Late(Duration),
}

/// A stand-in for our service's callback endpoint, to check how a fake
/// delivers callbacks: the requests whose body contains `marker` are
/// answered by the script in turn (then 200) and recorded; any other is
/// answered 200 at once.
pub struct Receiver {
    pub addr: SocketAddr,
    received: Arc<Mutex<Vec<Received>>>,
}

impl Receiver {
    pub async fn start(marker: &str, script: Vec<Answer>) -> Receiver {
        let received = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(VecDeque::from(script)));
        let marker = marker.as_bytes().to_vec();
        let log = received.clone();
        let addr = serve(Arc::new(move |req: Received| {
            let scripted = req
                .body
                .windows(marker.len())
                .any(|w| w == marker.as_slice());
            let answer = if scripted {
                script.lock().pop_front()
            } else {
                None
            };
            if scripted {
                log.lock().push(req);
            }
            Box::pin(async move {
                match answer {
                    Some(Answer::Status(status)) => Reply::empty(status),
                    Some(Answer::Late(delay)) => {
                        tokio::time::sleep(delay).await;
                        Reply::empty(200)
                    }
                    None => Reply::empty(200),
                }
            })
        }))
        .await;
        Receiver { addr, received }
    }

    pub fn url(&self) -> String {
        format!("http://{}/callback", self.addr)
    }

    /// The requests that carried the marker, in order of arrival.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().clone()
    }
}
