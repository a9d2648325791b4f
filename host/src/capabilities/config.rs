//! The `config` capability: the calling component's own settings and secrets.

use crate::runtime::bindings::host::mmc::platform::config::Host;
use crate::runtime::state::HostState;

impl Host for HostState {
    fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        if let Some(v) = self.config.settings.get(&key) {
            return Ok(Some(v.clone()));
        }
        // A platform fact every component may read unless its own settings override it.
        Ok((key == "adapter_deadline_ms")
            .then(|| self.runtime.longest_adapter_deadline_ms().to_string()))
    }

    fn secret(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self.config.secrets.get(&key).cloned())
    }
}
