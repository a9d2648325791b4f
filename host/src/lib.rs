//! The Mobile Money Collection Service host: a hyper + tokio server that
//! loads Wasm components for the API surfaces and the operator adapters and
//! gives them capabilities (storage, outbound HTTP, signing, clock, log,
//! config). See docs/architecture.md for the map.

pub mod backlog;
pub mod backup;
pub mod scaffold;
pub mod server;
pub mod site;
pub mod workers;
