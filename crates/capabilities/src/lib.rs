//! Host implementations of the WIT capability imports, one module each
//! (as Spin keeps one crate per factor). Refusals come back to the component
//! as `capability-error` values; only host bugs trap.

pub mod cache;
pub mod clock;
pub mod config;
pub mod journal;
pub mod log;
pub mod node;
pub mod outbound_http;
pub mod payments;
pub mod router;
pub mod signing;
pub mod storage;

use crate::bindings::host::mmc;
use crate::state::HostState;

impl mmc::platform::types::Host for HostState {}
impl mmc::adapter::types::Host for HostState {}
impl crate::bindings::surface::mmc::api::http_types::Host for HostState {}
