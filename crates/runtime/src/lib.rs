//! The component runtime: one engine, components loaded from a directory and
//! compiled once (cached on disk by content hash), one `InstancePre` per
//! component and a fresh `Store` per call (an interpreted adapter may keep
//! its instance warm between calls: [`warm`]), each call under a deadline
//! and a memory cap. A failing call is an error value for the caller; the host
//! carries on.

/// The host's capabilities (the `mmc-capabilities` crate).
pub use mmc_capabilities as capabilities;
/// Requests served on the worker that read them (in `mmc-common`).
pub use mmc_common::inline;
/// The generated bindings of the WIT worlds (the `mmc-world` crate).
pub use mmc_world as bindings;
mod calls;
mod catalogue;
mod compile;
mod engine;
mod invoke;
mod load;
pub mod pacing;
mod payments;
mod pool;
mod router;
mod routes;
mod session;
pub mod state;
mod warm;
mod wasi_io;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use sha2::{Digest, Sha256};
use wasmtime::component::{ComponentExportIndex, Linker};
use wasmtime::{Engine, Store, UpdateDeadline};

use self::bindings::adapter::{Adapter, AdapterPre};
use self::bindings::adapter_types::OperatorInfo;
use self::bindings::collect::{Collect, CollectPre};
use self::bindings::http_types::{Caller, Request, Response};
use self::bindings::service::ServicePre;
use self::bindings::surface::{Surface, SurfacePre};
pub use self::session::AdapterSession;
use self::state::{Deadline, DeadlineExceeded, HostState};
use mmc_capabilities::outbound_http::HttpClient;
use mmc_common::clock::Clock;
use mmc_config::{ComponentConfig, Config, Limits};
use mmc_db::Backend;
use mmc_metrics::Metrics;

/// The component whose `payments` export serves facades.
pub const PAYMENTS_COMPONENT: &str = "collect";

/// Epoch tick; deadlines are checked at this granularity.
const TICK: Duration = Duration::from_millis(10);

/// Shared services behind the capabilities (real ones in the server, fakes in the sandbox).
pub struct Services {
    pub audit: Arc<mmc_audit::Audit>,
    pub storage: Arc<dyn Backend>,
    pub http: Arc<dyn HttpClient>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<Metrics>,
    pub cache: Arc<mmc_capabilities::cache::Cache>,
    /// Appends made durable behind the call (the simulated provider's books).
    pub journal: Arc<mmc_capabilities::journal::Journal>,
    /// This process and the liveness of others (the fleet's leases).
    pub nodes: Arc<dyn mmc_capabilities::node::Nodes>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Exports `handler`, `jobs` and `payments` (the current API).
    Collect,
    /// Exports `handler` and `jobs` (bulk payouts).
    Service,
    /// Exports `handler`.
    Surface,
    /// Exports `operator`.
    Adapter,
}

#[derive(Clone)]
enum Pre {
    Collect(CollectPre<HostState>),
    Service(ServicePre<HostState>),
    Surface(SurfacePre<HostState>),
    Adapter(AdapterPre<HostState>),
}

/// A loaded, compiled, pre-linked component version.
pub struct Loaded {
    pub name: String,
    pub kind: Kind,
    /// SHA-256 of the component bytes.
    pub hash: String,
    pub loaded_at_ms: u64,
    /// What an adapter said it serves: asked at load, then again every
    /// minute ([`Runtime::refresh_descriptions`]).
    pub operators: Vec<OperatorInfo>,
    config: Arc<ComponentConfig>,
    pre: Pre,
    /// `mmc:api/handler#handle` of an API component, found once at load.
    handler: Option<ComponentExportIndex>,
    /// An adapter's `books` export, found once at load; none when it reads
    /// no books (built for the `adapter` world alone).
    books: Option<bindings::provider_books::GuestIndices>,
    /// An API component's `recheck` export (the owner of money movements
    /// the books may ask it to check again), found once at load.
    recheck: Option<bindings::record_recheck::GuestIndices>,
}

impl Loaded {
    /// Whether this adapter reads its provider's books.
    pub fn keeps_books(&self) -> bool {
        self.books.is_some()
    }

    /// The calls one instance serves when it keeps its instances warm
    /// (`calls_per_instance` above 1); None: a fresh instance per call.
    pub(crate) fn warm_calls(&self) -> Option<u32> {
        self.config.calls_per_instance.filter(|&n| n > 1)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("component {name} does not compile: {message}")]
    Compile { name: String, message: String },
    #[error("component {name} cannot be linked: {message}")]
    Link { name: String, message: String },
    #[error("component {name} exports none of mmc:api/handler or mmc:adapter/operator")]
    UnknownWorld { name: String },
    #[error("adapter {name} failed to describe itself: {message}")]
    Describe { name: String, message: String },
}

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("component {0} is not loaded")]
    NotLoaded(String),
    #[error("component {0} does not serve this kind of call")]
    WrongKind(String),
    #[error("no adapter serves operator {operator} in the {environment} environment")]
    NoRoute {
        environment: String,
        operator: String,
    },
    #[error("component {0} exceeded its deadline")]
    Deadline(String),
    #[error("component {0} is at capacity: no instance slot freed up within its deadline")]
    Busy(String),
    #[error("component {0} exceeded its memory limit")]
    Memory(String),
    #[error("component {component} trapped: {message}")]
    Trap { component: String, message: String },
    /// Stopped on a tokio worker for using up its inline budget; the request
    /// runs again on a blocking thread ([`inline`]).
    #[error("component {0} ran past its time on the worker")]
    InlineBudget(String),
}

impl CallError {
    fn outcome(&self) -> &'static str {
        match self {
            CallError::Deadline(_) => "deadline",
            CallError::Memory(_) => "memory",
            CallError::Trap { .. } => "trap",
            CallError::Busy(_) => "busy",
            CallError::InlineBudget(_) => "moved",
            _ => "refused",
        }
    }
}

pub struct Runtime {
    engine: Engine,
    /// Everything an API component may import.
    api_linker: Linker<HostState>,
    /// Adapters get no storage and no router: they cannot reach payment data.
    adapter_linker: Linker<HostState>,
    pub services: Services,
    pub limits: Limits,
    /// The routes in force (the admin API may replace them).
    routes: RwLock<Arc<mmc_routing::RouteTable>>,
    /// What this node observed of each route.
    pub health: mmc_routing::Health,
    /// Each route's float for payouts, as its provider last stated it.
    floats: mmc_routing::float::Floats,
    float_max_age_ms: u64,
    /// What each provider charges (`books.rate_cards`): a route's expected fee.
    rate_cards: Vec<mmc_books::RateCard>,
    component_config: BTreeMap<String, ComponentConfig>,
    cache_dir: PathBuf,
    components: RwLock<HashMap<String, Arc<Loaded>>>,
    api_slots: pool::Gate,
    adapter_slots: pool::Gate,
    /// Idle adapter instances kept for their next call ([`warm`]).
    warm: warm::WarmPool,
    /// Spaces each adapter's status queries to its provider's cap.
    pub status_pacer: pacing::StatusPacer,
    stop_ticker: Arc<AtomicBool>,
    /// What components read of the platform through `config`: the longest
    /// adapter deadline, and the address the service is reached at
    /// (`public_base_url`, else the address it listens on) once it listens
    /// (see [`Runtime::set_service_base_url`]).
    facts: mmc_capabilities::config::Facts,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.stop_ticker.store(true, Ordering::Relaxed);
    }
}

fn wasm_error(e: impl std::fmt::Display) -> String {
    e.to_string()
}

impl Runtime {
    pub fn new(config: &Config, services: Services) -> anyhow::Result<Arc<Runtime>> {
        let engine = engine::engine(config)?;
        let api_linker = engine::api_linker(&engine).map_err(|e| anyhow::anyhow!("{e}"))?;
        let adapter_linker = engine::adapter_linker(&engine).map_err(|e| anyhow::anyhow!("{e}"))?;
        let itself = Arc::new(std::sync::OnceLock::new());
        let stop_ticker = engine::start_epoch_ticker(&engine, itself.clone())?;

        let runtime = Arc::new(Runtime {
            engine,
            api_linker,
            adapter_linker,
            services,
            limits: config.limits.clone(),
            routes: RwLock::new(Arc::new(mmc_routing::RouteTable::new(
                config.routing.clone(),
            ))),
            health: mmc_routing::Health::new(config.route_health.clone()),
            floats: Default::default(),
            float_max_age_ms: config.route_health.float_max_age_ms,
            rate_cards: config.books.rate_cards.clone(),
            component_config: config.components.clone(),
            cache_dir: config.cache_dir(),
            components: RwLock::new(HashMap::new()),
            api_slots: pool::Gate::new(config.limits.concurrent_calls),
            adapter_slots: pool::Gate::new(config.limits.adapter_slots()),
            warm: Default::default(),
            status_pacer: pacing::StatusPacer::default(),
            stop_ticker,
            facts: mmc_capabilities::config::Facts {
                // API components read it as the setting `adapter_deadline_ms`: a
                // request to the operator counts as in flight at least this long.
                adapter_deadline_ms: largest_override(
                    config,
                    config.limits.adapter_deadline_ms,
                    |c| c.deadline_ms,
                ),
                service_base_url: std::sync::OnceLock::new(),
            },
        });
        let _ = itself.set(Arc::downgrade(&runtime));
        Ok(runtime)
    }

    /// Sets the service's address, once: API components read it as the
    /// setting `service_base_url` where a request gives them none (a job
    /// sending a request to pay again, for a record stored without one).
    pub fn set_service_base_url(&self, url: &str) {
        let _ = self
            .facts
            .service_base_url
            .set(url.trim_end_matches('/').to_string());
    }
}

/// The largest of a global limit and every component's override of it (the
/// memory the engine's pool must hold; the longest an adapter call may take).
fn largest_override(
    config: &Config,
    global: u64,
    pick: fn(&ComponentConfig) -> Option<u64>,
) -> u64 {
    config
        .components
        .values()
        .filter_map(pick)
        .fold(global, u64::max)
}

/// Used by the sandbox and the admin API to call an adapter directly.
pub type AdapterInstance = Adapter;
pub type CollectInstance = Collect;
pub type SurfaceInstance = Surface;
