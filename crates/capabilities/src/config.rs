//! The `config` capability: the calling component's own settings and secrets.

use crate::bindings::host::mmc::platform::config::Host;
use mmc_config::ComponentConfig;

pub struct View<'a> {
    /// The calling component's own settings and secrets.
    pub own: &'a ComponentConfig,
    /// Platform facts every component may read unless its own settings override them.
    pub facts: &'a Facts,
}

/// The marker the runtime links this interface with.
pub type Cap = View<'static>;

impl wasmtime::component::HasData for Cap {
    type Data<'a> = View<'a>;
}

/// What the platform tells every component of itself.
#[derive(Debug, Default)]
pub struct Facts {
    /// The longest an adapter call may take: a request to the operator
    /// counts as in flight for at least this long.
    pub adapter_deadline_ms: u64,
    /// The address the service is reached at, once it listens.
    pub service_base_url: std::sync::OnceLock<String>,
}

impl Host for View<'_> {
    fn get(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        if let Some(v) = self.own.settings.get(&key) {
            return Ok(Some(v.clone()));
        }
        Ok(match key.as_str() {
            "adapter_deadline_ms" => Some(self.facts.adapter_deadline_ms.to_string()),
            "service_base_url" => self.facts.service_base_url.get().cloned(),
            _ => None,
        })
    }

    fn secret(&mut self, key: String) -> wasmtime::Result<Option<String>> {
        Ok(self.own.secrets.get(&key).cloned())
    }
}
