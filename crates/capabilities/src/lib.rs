//! The host's implementations of the WIT capability imports, one module
//! each, as Spin keeps one factor per capability: a module owns the state
//! its capability needs (the cache's entries, the journal's buffer, the
//! HTTP client) and implements the WIT `Host` trait on a `View` of exactly
//! that plus the call's own facts (component name, settings, fence, open
//! transaction). The runtime builds a module's view from a Store's state
//! when it links the interface (`add_to_linker` with the module's
//! [`wasmtime::component::HasData`] marker), so no capability can reach
//! another's state, or the runtime.
//!
//! Refusals come back to the component as `capability-error` values; only
//! host bugs trap. The `router` and the facade's `payments` are the
//! runtime's own: they call other components.

pub mod cache;
pub mod clock;
pub mod config;
pub mod journal;
pub mod log;
pub mod node;
pub mod outbound_http;
pub mod signing;
pub mod storage;

pub use mmc_world as bindings;

use bindings::host::mmc;

/// The interfaces that hold only types (`mmc:platform/types`,
/// `mmc:adapter/types`): linked so components that import them resolve.
pub struct Types;

impl wasmtime::component::HasData for Types {
    type Data<'a> = Types;
}

impl mmc::platform::types::Host for Types {}
impl mmc::adapter::types::Host for Types {}
