//! The `clock` capability: the host's time (the sandbox's fake one in tests).

use crate::bindings::host::mmc::platform::clock::Host;
use mmc_common::clock::Clock;

pub struct View<'a>(pub &'a dyn Clock);

/// The marker the runtime links this interface with.
pub type Cap = View<'static>;

impl wasmtime::component::HasData for View<'static> {
    type Data<'a> = View<'a>;
}

impl Host for View<'_> {
    fn now_ms(&mut self) -> wasmtime::Result<u64> {
        Ok(self.0.now_ms())
    }
}
