//! The Mobile Money Collection Service host: a hyper + tokio server that
//! loads Wasm components for the API surfaces and the operator adapters and
//! gives them capabilities (storage, outbound HTTP, signing, clock, log,
//! config). See docs/architecture.md for the map.

pub mod accounts;
pub mod admin;
pub mod audit;
pub mod backlog;
pub mod backup;
pub mod books;
pub mod bundle;
pub mod capabilities;
pub mod clock;
pub mod config;
pub mod conformance;
pub mod console;
pub mod crypto;
pub mod db;
pub mod http;
pub mod leases;
pub mod logging;
pub mod mail;
pub mod metrics;
pub mod paths;
pub mod permits;
pub mod private_file;
pub mod routing;
pub mod runtime;
pub mod sandbox;
pub mod scaffold;
pub mod scopes;
pub mod server;
pub mod shutdown;
pub mod site;
pub mod slo;
pub mod tallies;
pub mod traces;
pub mod webhooks;
pub mod workers;
