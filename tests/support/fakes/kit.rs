//! The fake-operator kit: what every fake shares, written once. A fake is
//! its provider's wire format (a [`Wire`]: the routes, the records, the
//! documented behaviours) served by a [`FakeServer`], which gives it
//! - its plumbing: a server on 127.0.0.1:0, `host`, `base_url`, the
//!   adapter's `component_config`, the record of every request;
//! - its lies: faults per endpoint or per operation (`inject`,
//!   `inject_for`: refuse, accept then 5xx / reset / garbage, slow), and
//!   callbacks sent once, lost, twice or late ([`Callbacks`]);
//! - the customer's side: what each phone number does ([`Outcome`]) and how
//!   long it takes to act (`settle_after`).
//!
//! A fake adds only what its provider has and others do not, in an
//! `impl FakeServer<ItsWire>` block (e.g. `FakeMtn::provision`).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use mmc_config::ComponentConfig;

use super::{Fault, Outcome, Plumbing, Received, Reply};

/// A provider's wire format: what a fake writes itself.
pub trait Wire: Send + Sync + Sized + 'static {
    /// The provider as it is when the fake starts (its documented defaults).
    fn new() -> Self;

    /// The kit's state of this fake (records, faults, callbacks, customers).
    fn plumbing(&self) -> &Plumbing;

    /// Answers one request: identifies it, records it, applies its fault
    /// (`with_fault_for`) around the work.
    fn handle(self: Arc<Self>, req: Received) -> BoxFuture<'static, Reply>;

    /// The adapter's secrets and settings for this fake, besides `base_url`
    /// and the allow-list, which the kit sets.
    fn configure(&self, component: &mut ComponentConfig);
}

/// How the provider sends the callbacks of operations that became final.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Callbacks {
    /// As documented: one delivery (with the provider's retries).
    Send,
    /// Lost on the way: never sent.
    Lost,
    /// Delivered twice (providers say duplicates happen).
    Duplicate,
    /// Sent only after this delay (after our side may have asked already).
    Late(Duration),
}

/// A fake operator server: a [`Wire`] served over real HTTP.
pub struct FakeServer<W> {
    pub addr: SocketAddr,
    inner: Arc<W>,
}

impl<W: Wire> FakeServer<W> {
    /// Serves a fresh provider on 127.0.0.1, port 0.
    pub async fn start() -> FakeServer<W> {
        let inner = Arc::new(W::new());
        let handler_inner = inner.clone();
        let addr = super::serve(Arc::new(move |req| handler_inner.clone().handle(req))).await;
        FakeServer { addr, inner }
    }

    /// The provider's state, for the fake's own methods.
    pub(super) fn wire(&self) -> &Arc<W> {
        &self.inner
    }

    pub fn plumbing(&self) -> &Plumbing {
        self.inner.plumbing()
    }

    /// `127.0.0.1:<port>`, as the adapter's allow-list names it.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The adapter's configuration for this fake: its `base_url`, its host
    /// allowed, and the credentials the fake checks.
    pub fn component_config(&self) -> ComponentConfig {
        let mut c = ComponentConfig {
            allowed_hosts: vec![self.host()],
            ..Default::default()
        };
        c.settings.insert("base_url".into(), self.base_url());
        self.inner.configure(&mut c);
        c
    }

    /// Where callbacks go, as the merchant sets it once in the provider's
    /// dashboard or portal (providers that take a URL per request use that).
    pub fn set_callback_url(&self, url: &str) {
        *self.plumbing().callback_url.lock() = Some(url.into());
    }

    /// How callbacks are sent from now on.
    pub fn callbacks(&self, mode: Callbacks) {
        *self.plumbing().callback_mode.lock() = mode;
    }

    /// Callbacks sent so far: (url, status our service answered; 0: none).
    pub fn callbacks_sent(&self) -> Vec<(String, u16)> {
        self.plumbing().callbacks()
    }

    /// What the customer (or a payout's recipient side) behind `msisdn` does.
    pub fn set_outcome(&self, msisdn: &str, outcome: Outcome) {
        self.plumbing().outcomes.set(msisdn, outcome);
    }

    /// How long the customer takes to act (300 ms unless set).
    pub fn settle_after(&self, delay: Duration) {
        *self.plumbing().settle_after.lock() = delay;
    }

    /// The next `times` requests to `endpoint` get `fault` (each fake's
    /// module comment lists its endpoints).
    pub fn inject(&self, endpoint: &'static str, fault: Fault, times: usize) {
        self.plumbing().inject(endpoint, fault, times);
    }

    /// The next `times` requests to `endpoint` about `key` get `fault`:
    /// `key` is one of the request's identifying keys (an MSISDN in any
    /// form, our id, the provider's id; see each fake's `identify`).
    pub fn inject_for(&self, endpoint: &'static str, key: &str, fault: Fault, times: usize) {
        self.plumbing().inject_for(endpoint, key, fault, times);
    }

    /// Drops every fault not used yet.
    pub fn clear_faults(&self) {
        self.plumbing().clear_faults();
    }

    /// Injections for (`endpoint`, `key`) not used yet.
    pub fn faults_left(&self, endpoint: &str, key: &str) -> usize {
        self.plumbing().faults_left(endpoint, key)
    }

    pub fn requests(&self, endpoint: &str) -> Vec<Received> {
        self.plumbing().requests(endpoint)
    }

    /// Requests to `endpoint` about `key` (see [`FakeServer::inject_for`]).
    pub fn requests_for(&self, endpoint: &str, key: &str) -> Vec<Received> {
        self.plumbing().requests_for(endpoint, key)
    }

    /// Distinct ids the creating requests to `endpoint` about `key` were
    /// sent under (more than one: one movement sent under two ids).
    pub fn ids_for(&self, endpoint: &str, key: &str) -> BTreeSet<String> {
        self.plumbing().ids_for(endpoint, key)
    }

    /// The most requests to `endpoint` answered at once.
    pub fn most_at_once(&self, endpoint: &str) -> usize {
        self.plumbing().most_at_once(endpoint)
    }
}
