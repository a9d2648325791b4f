//! What a Store carries for one call: the component's identity and
//! configuration, its resource table, a deny-all WASI context (std links WASI
//! even when unused), the memory limiter and the deadline.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::Runtime;
pub use mmc_capabilities::outbound_http::Fence;
pub use mmc_capabilities::storage::LeaseGuard;
use mmc_config::ComponentConfig;

pub struct HostState {
    pub component: Arc<str>,
    pub config: Arc<ComponentConfig>,
    pub runtime: Arc<Runtime>,
    pub table: ResourceTable,
    /// Always `Some` while the state lives; taken back to [`SPARE_WASI`] when it is dropped.
    wasi: Option<WasiCtx>,
    pub limiter: MemoryLimiter,
    pub deadline: Deadline,
    /// An uncommitted storage transaction is open (it holds the writer).
    pub open_txn: bool,
    /// The money movement this adapter call sends: when its attempt stops
    /// being ours (see [`Fence`]), none of its bytes leaves.
    pub fence: Option<Fence>,
    /// The lease of the background job this call runs for: once it is no
    /// longer known to be this node's, nothing the call writes is committed.
    pub lease: Option<Arc<dyn LeaseGuard>>,
}

/// What an import that calls other components (the router, the facade's
/// `payments`) sees of its caller's call: the runtime, whether a storage
/// transaction is open, and the call's deadline.
pub struct Calling<'a> {
    pub(crate) runtime: &'a Arc<Runtime>,
    open_txn: bool,
    deadline: &'a mut Deadline,
}

impl wasmtime::component::HasData for Calling<'static> {
    type Data<'a> = Calling<'a>;
}

impl Calling<'_> {
    /// Runs `calls` (each called component under its own deadline), or
    /// answers `refused()` while a storage transaction is open (the writer
    /// would wait on itself). The time they take is not charged to this call.
    pub(crate) fn call_out<T>(
        &mut self,
        refused: impl FnOnce() -> T,
        calls: impl FnOnce(&Arc<Runtime>) -> T,
    ) -> T {
        if self.open_txn {
            return refused();
        }
        let started = Instant::now();
        let out = calls(self.runtime);
        self.deadline.extend(started.elapsed());
        out
    }
}

impl HostState {
    /// The view the router and `payments` are linked with.
    pub fn calling(&mut self) -> Calling<'_> {
        Calling {
            runtime: &self.runtime,
            open_txn: self.open_txn,
            deadline: &mut self.deadline,
        }
    }

    pub fn new(
        runtime: Arc<Runtime>,
        component: Arc<str>,
        config: Arc<ComponentConfig>,
        memory_bytes: usize,
        deadline: Duration,
    ) -> HostState {
        HostState {
            component,
            config,
            runtime,
            table: ResourceTable::new(),
            wasi: Some(deny_all_wasi()),
            limiter: MemoryLimiter {
                max_bytes: memory_bytes,
                exceeded: false,
            },
            deadline: Deadline::after(deadline),
            open_txn: false,
            fence: None,
            lease: None,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: self.wasi.get_or_insert_with(deny_all_wasi),
            table: &mut self.table,
        }
    }
}

thread_local! {
    /// Deny-all WASI contexts of dropped Stores, for the next Stores of this
    /// thread. Building one seeds two random generators and boxes a dozen
    /// defaults, twice over (`WasiCtxBuilder::build` leaves a fresh builder
    /// behind): ~1.5% of a GET's CPU, for a context every Store needs and no
    /// call changes but for its random generators' state. Its resources live
    /// in the Store's own table, which is not reused.
    static SPARE_WASI: RefCell<Vec<WasiCtx>> = const { RefCell::new(Vec::new()) };
}

/// More than the Stores a thread has alive at once (an API call and the adapter it calls).
const SPARE_WASI_KEPT: usize = 4;

/// No preopens, no environment, no inherited stdio, no sockets.
fn deny_all_wasi() -> WasiCtx {
    SPARE_WASI
        .with_borrow_mut(Vec::pop)
        .unwrap_or_else(|| WasiCtx::builder().build())
}

impl Drop for HostState {
    fn drop(&mut self) {
        if let Some(wasi) = self.wasi.take() {
            // `try_with`: during the thread's own teardown the spare list may be gone.
            let _ = SPARE_WASI.try_with(|spare| {
                let mut spare = spare.borrow_mut();
                if spare.len() < SPARE_WASI_KEPT {
                    spare.push(wasi);
                }
            });
        }
    }
}

/// Wall-clock deadline of the call, checked on every epoch tick.
pub struct Deadline {
    pub until: Instant,
    pub hit: bool,
}

impl Deadline {
    pub fn after(deadline: Duration) -> Deadline {
        Deadline {
            until: Instant::now() + deadline,
            hit: false,
        }
    }

    /// Time spent waiting on another component (an adapter with its own
    /// deadline) is not charged to the caller.
    pub fn extend(&mut self, by: Duration) {
        self.until += by;
    }
}

/// Caps linear memory and tables; remembers that it refused so the failure is
/// reported as a memory blow-up, not a generic trap.
pub struct MemoryLimiter {
    pub max_bytes: usize,
    pub exceeded: bool,
}

#[derive(Debug, thiserror::Error)]
#[error("component exceeded its memory limit of {0} bytes")]
pub struct MemoryExceeded(pub usize);

#[derive(Debug, thiserror::Error)]
#[error("component exceeded its deadline")]
pub struct DeadlineExceeded;

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.max_bytes {
            self.exceeded = true;
            return Err(wasmtime::Error::new(MemoryExceeded(self.max_bytes)));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= 100_000)
    }
}
