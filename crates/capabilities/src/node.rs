//! The `node` capability: which process a call runs on, and whether another
//! process is still alive. `collect` records the node that sends a request to
//! pay; a retry of that request finds it in progress only while that node may
//! still be running it (see `leases`, which keeps the liveness).

use crate::bindings::host::mmc::platform::node::Host;

pub trait Nodes: Send + Sync + 'static {
    /// This process, unique per start.
    fn id(&self) -> &str;
    /// False when `id` is presumed stopped (see the WIT `node.alive`).
    fn alive(&self, id: &str) -> bool;
}

/// A process with nobody to share its storage with (the sandbox): every
/// other id is a process that has stopped.
pub struct Alone(String);

impl Alone {
    /// A new id, as for a process start.
    pub fn new(name: &str) -> Alone {
        Alone(format!("{name}:{}", uuid::Uuid::new_v4().simple()))
    }
}

impl Nodes for Alone {
    fn id(&self) -> &str {
        &self.0
    }

    fn alive(&self, id: &str) -> bool {
        id == self.0
    }
}

pub struct View<'a>(pub &'a dyn Nodes);

/// The marker the runtime links this interface with.
pub type Cap = View<'static>;

impl wasmtime::component::HasData for Cap {
    type Data<'a> = View<'a>;
}

impl Host for View<'_> {
    fn id(&mut self) -> wasmtime::Result<String> {
        Ok(self.0.id().to_string())
    }

    fn alive(&mut self, id: String) -> wasmtime::Result<bool> {
        Ok(self.0.alive(&id))
    }
}
