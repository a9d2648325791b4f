//! The component runtime: one engine, components loaded from a directory and
//! compiled once (cached on disk by content hash), one `InstancePre` per
//! component and a fresh `Store` per call, each call under a deadline and a
//! memory cap. A failing call is an error value for the caller; the host
//! carries on.

pub mod bindings;
mod catalogue;
mod compile;
pub mod inline;
mod load;
pub mod pacing;
mod pool;
mod session;
pub mod state;
mod wasi_io;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use parking_lot::RwLock;
use sha2::{Digest, Sha256};
use wasmtime::component::{ComponentExportIndex, HasSelf, Linker};
use wasmtime::{Engine, Store, UpdateDeadline};

use self::bindings::adapter::{Adapter, AdapterPre};
use self::bindings::adapter_types::OperatorInfo;
use self::bindings::collect::{Collect, CollectPre};
use self::bindings::http_types::{Caller, Request, Response};
use self::bindings::service::ServicePre;
use self::bindings::surface::{Surface, SurfacePre};
pub use self::session::AdapterSession;
use self::state::{Deadline, DeadlineExceeded, HostState};
use crate::capabilities::outbound_http::HttpClient;
use crate::clock::Clock;
use crate::config::{ComponentConfig, Config, Limits};
use crate::db::Backend;
use crate::metrics::Metrics;

/// The component whose `payments` export serves facades.
pub const PAYMENTS_COMPONENT: &str = "collect";

/// Epoch tick; deadlines are checked at this granularity.
const TICK: Duration = Duration::from_millis(10);

/// Shared services behind the capabilities (real ones in the server, fakes in the sandbox).
pub struct Services {
    pub audit: Arc<crate::audit::Audit>,
    pub storage: Arc<dyn Backend>,
    pub http: Arc<dyn HttpClient>,
    pub clock: Arc<dyn Clock>,
    pub metrics: Arc<Metrics>,
    pub cache: Arc<crate::capabilities::cache::Cache>,
    /// This process and the liveness of others (the fleet's leases).
    pub nodes: Arc<dyn crate::capabilities::node::Nodes>,
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
    routes: RwLock<Arc<crate::routing::RouteTable>>,
    /// What this node observed of each route.
    pub health: crate::routing::Health,
    component_config: BTreeMap<String, ComponentConfig>,
    cache_dir: PathBuf,
    components: RwLock<HashMap<String, Arc<Loaded>>>,
    api_slots: pool::Gate,
    adapter_slots: pool::Gate,
    /// Spaces each adapter's status queries to its provider's cap.
    pub status_pacer: pacing::StatusPacer,
    stop_ticker: Arc<AtomicBool>,
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
        let mut wasm_config = wasmtime::Config::new();
        wasm_config.epoch_interruption(true);
        wasm_config.wasm_component_model(true);
        let max_memory_mib = config
            .components
            .values()
            .filter_map(|c| c.memory_mib)
            .chain([config.limits.memory_mib])
            .max()
            .unwrap_or(config.limits.memory_mib);
        wasm_config.allocation_strategy(pool::strategy(
            max_memory_mib,
            config.limits.concurrent_calls + config.limits.adapter_slots(),
        ));
        let engine =
            Engine::new(&wasm_config).map_err(|e| anyhow::anyhow!("wasmtime engine: {e}"))?;

        let mut api_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut api_linker)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        wasi_io::link(&mut api_linker).map_err(|e| anyhow::anyhow!("{e}"))?;
        bindings::host::HostCapabilities::add_to_linker::<_, HasSelf<HostState>>(
            &mut api_linker,
            |s| s,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        bindings::surface::mmc::api::http_types::add_to_linker::<_, HasSelf<HostState>>(
            &mut api_linker,
            |s| s,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        bindings::facade::mmc::api::payment_types::add_to_linker::<_, HasSelf<HostState>>(
            &mut api_linker,
            |s| s,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        bindings::facade::mmc::api::payments::add_to_linker::<_, HasSelf<HostState>>(
            &mut api_linker,
            |s| s,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;

        let mut adapter_linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_sync(&mut adapter_linker)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        wasi_io::link(&mut adapter_linker).map_err(|e| anyhow::anyhow!("{e}"))?;
        bindings::adapter::Adapter::add_to_linker::<_, HasSelf<HostState>>(
            &mut adapter_linker,
            |s| s,
        )
        .map_err(|e| anyhow::anyhow!("{e}"))?;

        let stop_ticker = Arc::new(AtomicBool::new(false));
        {
            let engine = engine.clone();
            let stop = stop_ticker.clone();
            std::thread::Builder::new()
                .name("epoch-ticker".into())
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        std::thread::sleep(TICK);
                        engine.increment_epoch();
                    }
                })?;
        }

        Ok(Arc::new(Runtime {
            engine,
            api_linker,
            adapter_linker,
            services,
            limits: config.limits.clone(),
            routes: RwLock::new(Arc::new(crate::routing::RouteTable::new(
                config.routing.clone(),
            ))),
            health: crate::routing::Health::new(config.route_health.clone()),
            component_config: config.components.clone(),
            cache_dir: config.cache_dir(),
            components: RwLock::new(HashMap::new()),
            api_slots: pool::Gate::new(config.limits.concurrent_calls),
            adapter_slots: pool::Gate::new(config.limits.adapter_slots()),
            status_pacer: pacing::StatusPacer::default(),
            stop_ticker,
        }))
    }

    /// The longest an adapter call may take under this configuration (the
    /// global adapter deadline or a longer per-component one). API components
    /// read it as the setting `adapter_deadline_ms`: a request to the operator
    /// counts as in flight for at least this long.
    pub fn longest_adapter_deadline_ms(&self) -> u64 {
        self.component_config
            .values()
            .filter_map(|c| c.deadline_ms)
            .chain([self.limits.adapter_deadline_ms])
            .max()
            .unwrap_or(self.limits.adapter_deadline_ms)
    }

    fn deadline_for(&self, loaded: &Loaded) -> Duration {
        let default = match loaded.kind {
            Kind::Adapter => self.limits.adapter_deadline_ms,
            _ => self.limits.api_deadline_ms,
        };
        Duration::from_millis(loaded.config.deadline_ms.unwrap_or(default))
    }

    /// Runs `f` in a fresh Store of `loaded`, under its deadline and memory
    /// cap, and turns any failure into a [`CallError`].
    fn invoke<R>(
        self: &Arc<Self>,
        loaded: &Loaded,
        f: impl FnOnce(&mut Store<HostState>, &Pre) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        self.invoke_waiting(loaded, None, f)
    }

    fn invoke_waiting<R>(
        self: &Arc<Self>,
        loaded: &Loaded,
        slot_wait: Option<Duration>,
        f: impl FnOnce(&mut Store<HostState>, &Pre) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let _slot = self.enter(loaded, slot_wait)?;
        let mut store = self.new_store(loaded);
        let result = self.run(loaded, &mut store, |store| f(store, &loaded.pre));
        if store.data().open_txn {
            // A call stopped inside a transaction: dropping the Store rolls it
            // back, which waits until what it read is durable.
            inline::may_block(|| drop(store));
        }
        result
    }

    /// An instance slot for a call of `loaded`, waiting for one at most its
    /// deadline (or `slot_wait`, when shorter).
    fn enter(
        &self,
        loaded: &Loaded,
        slot_wait: Option<Duration>,
    ) -> Result<pool::Permit<'_>, CallError> {
        // Adapters have their own slots: an API call holding one may call an adapter.
        let gate = match loaded.kind {
            Kind::Adapter => &self.adapter_slots,
            _ => &self.api_slots,
        };
        let wait = self
            .deadline_for(loaded)
            .min(
                self.limits
                    .slot_wait_ms
                    .map_or(Duration::MAX, Duration::from_millis),
            )
            .min(slot_wait.unwrap_or(Duration::MAX));
        if inline::hit() {
            // The request is moving to a blocking thread: nothing more runs here.
            return Err(CallError::InlineBudget(loaded.name.clone()));
        }
        let slot = gate
            .enter(Duration::ZERO)
            .or_else(|| inline::may_block(|| gate.enter(wait)));
        slot.ok_or_else(|| {
            let e = CallError::Busy(loaded.name.clone());
            self.services
                .metrics
                .component_call(&loaded.name, e.outcome(), Duration::ZERO);
            e
        })
    }

    /// A fresh Store for `loaded`, under its memory cap, in which the
    /// caller instantiates the component once.
    fn new_store(self: &Arc<Self>, loaded: &Loaded) -> Store<HostState> {
        let memory =
            loaded.config.memory_mib.unwrap_or(self.limits.memory_mib) as usize * 1024 * 1024;
        let state = HostState::new(
            self.clone(),
            loaded.name.as_str().into(),
            loaded.config.clone(),
            memory,
            self.deadline_for(loaded),
        );
        let mut store = Store::new(&self.engine, state);
        self.services.metrics.component_instantiated(&loaded.name);
        store.limiter(|s| &mut s.limiter);
        store.epoch_deadline_callback(|mut ctx| {
            if inline::stop_for_budget() {
                return Err(wasmtime::Error::new(DeadlineExceeded));
            }
            let state = ctx.data_mut();
            if Instant::now() >= state.deadline.until {
                state.deadline.hit = true;
                return Err(wasmtime::Error::new(DeadlineExceeded));
            }
            Ok(UpdateDeadline::Continue(1))
        });
        store
    }

    /// Runs one call in `store` under a deadline of its own and turns any
    /// failure into a [`CallError`]. After a failure the Store's instance may
    /// be broken (a trap leaves it unusable): the caller drops the Store.
    fn run<R>(
        &self,
        loaded: &Loaded,
        store: &mut Store<HostState>,
        f: impl FnOnce(&mut Store<HostState>) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        store.data_mut().deadline = Deadline::after(self.deadline_for(loaded));
        store.set_epoch_deadline(1);
        let started = Instant::now();
        let result = f(store);
        let elapsed = started.elapsed();
        let result = result.map_err(|e| {
            let state = store.data();
            if inline::hit() {
                CallError::InlineBudget(loaded.name.clone())
            } else if state.deadline.hit {
                CallError::Deadline(loaded.name.clone())
            } else if state.limiter.exceeded {
                CallError::Memory(loaded.name.clone())
            } else {
                CallError::Trap {
                    component: loaded.name.clone(),
                    message: format!("{e:#}")
                        .lines()
                        .next()
                        .unwrap_or_default()
                        .to_string(),
                }
            }
        });
        let outcome = match &result {
            Ok(_) => "ok",
            Err(e @ CallError::InlineBudget(_)) => e.outcome(),
            Err(e) => {
                tracing::error!(component = %loaded.name, error = %e, "component call failed");
                e.outcome()
            }
        };
        self.services
            .metrics
            .component_call(&loaded.name, outcome, elapsed);
        result
    }

    /// One HTTP request into an API component.
    pub fn handle(
        self: &Arc<Self>,
        component: &str,
        caller: Option<&Caller>,
        req: &Request,
    ) -> Result<Response, CallError> {
        let loaded = self
            .get(component)
            .ok_or_else(|| CallError::NotLoaded(component.into()))?;
        let handler = loaded.handler.as_ref();
        self.invoke(&loaded, |store, pre| {
            let pre = match pre {
                Pre::Collect(p) => p.instance_pre(),
                Pre::Service(p) => p.instance_pre(),
                Pre::Surface(p) => p.instance_pre(),
                Pre::Adapter(_) => return Err(wasmtime::format_err!("not an API component")),
            };
            let handler =
                handler.ok_or_else(|| wasmtime::format_err!("no mmc:api/handler#handle export"))?;
            // Only the handler is looked up and type-checked: the generated
            // `instantiate` checks every export (payments, jobs) on every call.
            let instance = pre.instantiate(&mut *store)?;
            let handle = instance
                .get_typed_func::<(Option<&Caller>, &Request), (Response,)>(&mut *store, handler)?;
            Ok(handle.call(&mut *store, (caller, req))?.0)
        })
    }

    /// One unit of background work (expiry, reconciliation...) in a component that has jobs.
    pub fn run_job(
        self: &Arc<Self>,
        component: &str,
        job: &str,
        limit: u32,
    ) -> Result<u32, CallError> {
        let loaded = self
            .get(component)
            .ok_or_else(|| CallError::NotLoaded(component.into()))?;
        if !matches!(loaded.kind, Kind::Collect | Kind::Service) {
            return Err(CallError::WrongKind(component.into()));
        }
        self.invoke(&loaded, |store, pre| match pre {
            Pre::Collect(p) => {
                p.instantiate(&mut *store)?
                    .mmc_api_jobs()
                    .call_run(&mut *store, job, limit)
            }
            Pre::Service(p) => {
                p.instantiate(&mut *store)?
                    .mmc_api_jobs()
                    .call_run(&mut *store, job, limit)
            }
            _ => unreachable!("kind checked above"),
        })
    }

    /// The JSON bodies of events `collect` stored in its compact form (its
    /// `events` export), for webhook deliveries and the events API.
    pub fn render_events(
        self: &Arc<Self>,
        payloads: Vec<Vec<u8>>,
    ) -> Result<Vec<Option<Vec<u8>>>, CallError> {
        self.call_collect(|store, collect| {
            collect.mmc_api_events().call_render(&mut *store, &payloads)
        })
    }

    /// Calls an export of the `collect` component in a Store of its own: its
    /// `payments` (for facades such as legacy), its `events`.
    pub fn call_collect<R>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Store<HostState>, &Collect) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let loaded = self
            .get(PAYMENTS_COMPONENT)
            .ok_or_else(|| CallError::NotLoaded(PAYMENTS_COMPONENT.into()))?;
        self.invoke(&loaded, |store, pre| match pre {
            Pre::Collect(p) => {
                let instance = p.instantiate(&mut *store)?;
                f(store, &instance)
            }
            _ => Err(wasmtime::format_err!(
                "{PAYMENTS_COMPONENT} is not the collect world (payments, events)"
            )),
        })
    }

    /// `/metrics`: the counters, then the routes' health.
    pub fn render_metrics(&self) -> String {
        let mut out = self.services.metrics.render();
        self.health.render(&mut out, crate::clock::system_now_ms());
        out
    }

    /// The routes in force.
    pub fn routes(&self) -> Arc<crate::routing::RouteTable> {
        self.routes.read().clone()
    }

    /// Puts `table` in force: operations from now on are routed by it (those
    /// already sent stay on their routes).
    pub fn set_routes(&self, table: crate::routing::RouteTable) {
        *self.routes.write() = Arc::new(table);
    }

    /// The operator's first route in `environment`: the first adapter its
    /// entry (else the environment's `*`) lists that is loaded and
    /// describes the slug.
    pub fn adapter_for(&self, environment: &str, operator: &str) -> Option<Arc<Loaded>> {
        let routes = self.routes();
        routes
            .default_routes(environment, operator)
            .iter()
            .find_map(|c| self.serving(c.adapter(), operator))
    }

    /// Adapter `name`, if it is loaded and describes `operator`.
    pub fn serving(&self, name: &str, operator: &str) -> Option<Arc<Loaded>> {
        let loaded = self.get(name)?;
        (loaded.kind == Kind::Adapter && loaded.operators.iter().any(|o| o.slug == operator))
            .then_some(loaded)
    }

    /// The adapter a call about an operation goes to: the route it was sent
    /// through (`via`), else the operator's first route.
    pub fn adapter_via(
        &self,
        environment: &str,
        operator: &str,
        via: Option<&str>,
    ) -> Option<Arc<Loaded>> {
        match via {
            Some(name) => self.serving(name, operator),
            None => self.adapter_for(environment, operator),
        }
    }

    /// The route a new operation takes now, explained (see [`crate::routing`]).
    pub fn choose_route(
        &self,
        ask: &crate::routing::Ask,
    ) -> Result<crate::routing::Choice, serde_json::Value> {
        let offer = |adapter: &str| {
            let loaded = self.serving(adapter, ask.operator)?;
            let info = loaded.operators.iter().find(|o| o.slug == ask.operator)?;
            Some(crate::routing::Offer {
                status: info.status.clone(),
                min_amount: info.min_amount,
                max_amount: info.max_amount,
            })
        };
        let now = crate::clock::system_now_ms();
        self.routes().choose(&self.health, ask, offer, now)
    }

    /// Calls the adapter serving (environment, operator).
    pub fn call_adapter<R>(
        self: &Arc<Self>,
        environment: &str,
        operator: &str,
        f: impl FnOnce(&mut Store<HostState>, &Adapter) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        self.call_adapter_traced(environment, operator, f).0
    }

    /// As [`Runtime::call_adapter`], also returning the version that served
    /// the call (for the audit trail). The version is pinned for the call:
    /// a hot swap meanwhile affects only later calls.
    pub fn call_adapter_traced<R>(
        self: &Arc<Self>,
        environment: &str,
        operator: &str,
        f: impl FnOnce(&mut Store<HostState>, &Adapter) -> wasmtime::Result<R>,
    ) -> (Result<R, CallError>, Option<Arc<Loaded>>) {
        self.call_adapter_waiting((environment, operator), None, None, f)
    }

    /// As [`Runtime::call_adapter_traced`], waiting at most `slot_wait` (when
    /// shorter than the usual wait) for a free instance: for callers that
    /// must answer sooner than a payment waits (an operator's callback).
    /// The adapter is `via` when given (the route an operation was sent
    /// through), else the operator's first route.
    pub fn call_adapter_waiting<R>(
        self: &Arc<Self>,
        (environment, operator): (&str, &str),
        via: Option<&str>,
        slot_wait: Option<Duration>,
        f: impl FnOnce(&mut Store<HostState>, &Adapter) -> wasmtime::Result<R>,
    ) -> (Result<R, CallError>, Option<Arc<Loaded>>) {
        let Some(loaded) = self.adapter_via(environment, operator, via) else {
            let e = CallError::NoRoute {
                environment: environment.into(),
                operator: operator.into(),
            };
            return (Err(e), None);
        };
        let result = self.invoke_waiting(&loaded, slot_wait, |store, pre| match pre {
            Pre::Adapter(p) => {
                let instance = p.instantiate(&mut *store)?;
                f(store, &instance)
            }
            _ => unreachable!("adapter_for checks the kind"),
        });
        (result, Some(loaded))
    }
}

/// Used by the sandbox and the admin API to call an adapter directly.
pub type AdapterInstance = Adapter;
pub type CollectInstance = Collect;
pub type SurfaceInstance = Surface;
