//! A wasmtime sandbox for one component at a time, with fake capabilities:
//! in-memory storage, a settable clock and scripted HTTP. This is how the
//! test suite (and a platform team) exercises a component with no network,
//! no disk state and no other component. [`conformance`] is the adapter
//! contract checked in it.

pub mod conformance;

use std::collections::VecDeque;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;

use mmc_capabilities::outbound_http::HttpClient;
use mmc_common::clock::Clock;
use mmc_config::{ComponentConfig, Config};
use mmc_db::Memory;
use mmc_metrics::Metrics;
use mmc_runtime::bindings::CapabilityError;
use mmc_runtime::bindings::host::mmc::platform::outbound_http::{Request, Response};
use mmc_runtime::{LoadError, Loaded, Runtime, Services};

/// A clock that moves only when told.
pub struct FakeClock(AtomicU64);

impl FakeClock {
    pub fn advance(&self, by: Duration) {
        self.0.fetch_add(by.as_millis() as u64, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

type Responder = Box<dyn Fn(&Request) -> Result<Response, CapabilityError> + Send + Sync>;

/// Answers outbound requests from a script and records them.
#[derive(Default)]
pub struct FakeHttp {
    pub requests: Mutex<Vec<Request>>,
    queued: Mutex<VecDeque<Result<Response, CapabilityError>>>,
    responder: Mutex<Option<Responder>>,
}

impl FakeHttp {
    /// The next request gets this answer (before any responder).
    pub fn enqueue(&self, r: Result<Response, CapabilityError>) {
        self.queued.lock().push_back(r);
    }

    pub fn respond_with(
        &self,
        f: impl Fn(&Request) -> Result<Response, CapabilityError> + Send + Sync + 'static,
    ) {
        *self.responder.lock() = Some(Box::new(f));
    }
}

impl HttpClient for FakeHttp {
    fn send(&self, req: Request, _timeout: Duration) -> Result<Response, CapabilityError> {
        self.requests.lock().push(req.clone());
        if let Some(r) = self.queued.lock().pop_front() {
            return r;
        }
        match &*self.responder.lock() {
            Some(f) => f(&req),
            None => Err(CapabilityError::Unavailable(
                "sandbox: no scripted answer".into(),
            )),
        }
    }
}

pub struct Sandbox {
    pub runtime: Arc<Runtime>,
    pub clock: Arc<FakeClock>,
    pub http: Arc<FakeHttp>,
    pub storage: Arc<Memory>,
}

/// 2026-06-01T00:00:00Z: a fixed start so outputs are reproducible.
pub const SANDBOX_EPOCH_MS: u64 = 1_780_272_000_000;

impl Sandbox {
    /// `config` supplies limits, routing and per-component settings; storage,
    /// HTTP and the clock are fakes.
    pub fn new(config: &Config) -> anyhow::Result<Sandbox> {
        let clock = Arc::new(FakeClock(AtomicU64::new(SANDBOX_EPOCH_MS)));
        let http = Arc::new(FakeHttp::default());
        let storage = Arc::new(Memory::default());
        let services = Services {
            audit: mmc_audit::Audit::disabled(),
            storage: storage.clone(),
            http: http.clone(),
            clock: clock.clone(),
            metrics: Arc::new(Metrics::default()),
            cache: Arc::default(),
            journal: mmc_capabilities::journal::Journal::start(storage.clone()),
            nodes: Arc::new(mmc_capabilities::node::Alone::new("sandbox")),
        };
        let runtime = Runtime::new(config, services)?;
        Ok(Sandbox {
            runtime,
            clock,
            http,
            storage,
        })
    }

    /// Loads one component file under `name` and makes it current.
    pub fn load(&self, name: &str, path: &Path) -> Result<Arc<Loaded>, LoadError> {
        let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let loaded = self.runtime.prepare(name, &bytes)?;
        self.runtime.install(loaded);
        Ok(self.runtime.get(name).expect("just installed"))
    }
}

/// Config for a sandboxed adapter: `name` serves every operator of `environment`.
pub fn adapter_config(name: &str, environment: &str, component: ComponentConfig) -> Config {
    let mut config = Config::default();
    config.routing.clear();
    config.routing.insert(
        environment.to_string(),
        [("*".to_string(), name.into())].into(),
    );
    config.components.insert(name.to_string(), component);
    config
}
