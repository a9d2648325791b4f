//! The `clock` capability: the time of the host's [`Clock`](mmc_common::clock::Clock).

use crate::bindings::host::mmc::platform::clock::Host;
use crate::state::HostState;

impl Host for HostState {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(self.runtime.services.clock.now_ms())
    }
}
