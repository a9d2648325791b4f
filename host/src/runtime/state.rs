//! What a Store carries for one call: the component's identity and
//! configuration, its resource table, a deny-all WASI context (std links WASI
//! even when unused), the memory limiter and the deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use wasmtime::component::ResourceTable;
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::Runtime;
use crate::config::ComponentConfig;

pub struct HostState {
    pub component: Arc<str>,
    pub config: Arc<ComponentConfig>,
    pub runtime: Arc<Runtime>,
    pub table: ResourceTable,
    pub wasi: WasiCtx,
    pub limiter: MemoryLimiter,
    pub deadline: Deadline,
    /// An uncommitted storage transaction is open (it holds the writer).
    pub open_txn: bool,
}

impl HostState {
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
            // No preopens, no environment, no inherited stdio, no sockets.
            wasi: WasiCtx::builder().build(),
            limiter: MemoryLimiter {
                max_bytes: memory_bytes,
                exceeded: false,
            },
            deadline: Deadline::after(deadline),
            open_txn: false,
        }
    }
}

impl WasiView for HostState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
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
