//! The `config` capability: the calling component's own settings and secrets.

use crate::runtime::bindings::host::mmc::platform::config::Host;
use crate::runtime::state::HostState;

impl Host for HostState {
    fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self.config.settings.get(&key).cloned())
    }

    fn secret(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self.config.secrets.get(&key).cloned())
    }
}
