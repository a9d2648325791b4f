//! The `config` capability: the calling component's own settings and secrets.

use crate::bindings::host::mmc::platform::config::Host;
use crate::state::HostState;

impl Host for HostState {
    fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        if let Some(v) = self.config.settings.get(&key) {
            return Ok(Some(v.clone()));
        }
        // Platform facts every component may read unless its own settings override them.
        Ok(match key.as_str() {
            "adapter_deadline_ms" => Some(self.runtime.longest_adapter_deadline_ms().to_string()),
            "service_base_url" => self.runtime.service_base_url().map(str::to_string),
            _ => None,
        })
    }

    fn secret(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self.config.secrets.get(&key).cloned())
    }
}
