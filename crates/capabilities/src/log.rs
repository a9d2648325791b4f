//! The `log` capability: into `tracing`, tagged with the component's name.

use crate::bindings::host::mmc::platform::log::{Host, Level};
use mmc_metrics::Metrics;

pub struct View<'a> {
    pub component: &'a str,
    /// Where `count` goes.
    pub metrics: &'a Metrics,
}

/// The marker the runtime links this interface with.
pub type Cap = View<'static>;

impl wasmtime::component::HasData for Cap {
    type Data<'a> = View<'a>;
}

/// Longest message kept; a component cannot flood the log with one call.
const MAX_MESSAGE: usize = 4096;

impl Host for View<'_> {
    fn log(&mut self, level: Level, message: String) -> wasmtime::Result<()> {
        let mut message = message;
        if message.len() > MAX_MESSAGE {
            let mut cut = MAX_MESSAGE;
            while !message.is_char_boundary(cut) {
                cut -= 1;
            }
            message.truncate(cut);
        }
        let component = self.component;
        match level {
            Level::Trace => tracing::trace!(target: "component", component, "{message}"),
            Level::Debug => tracing::debug!(target: "component", component, "{message}"),
            Level::Info => tracing::info!(target: "component", component, "{message}"),
            Level::Warn => tracing::warn!(target: "component", component, "{message}"),
            Level::Error => tracing::error!(target: "component", component, "{message}"),
        }
        Ok(())
    }

    fn count(&mut self, event: String) -> wasmtime::Result<()> {
        // Event names are a component's fixed vocabulary; a long or odd one is cut, not trusted.
        let event: String = event
            .chars()
            .filter(|c| c.is_ascii_alphanumeric() || *c == '_')
            .take(64)
            .collect();
        self.metrics.component_event(self.component, &event);
        Ok(())
    }
}
