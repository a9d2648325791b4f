//! Errors of the current generation: the API kit's [`ApiError`] (every code
//! and its JSON, written once for `collect` and `bulk`), answered as this
//! component's `Response`, and what a storage failure means to a client.

pub use mmc_api_kit::ApiError;

use crate::mmc::api::http_types::Response;
use crate::mmc::platform::log;
use crate::mmc::platform::types::CapabilityError;

mmc_api_kit::component_errors!(Response, CapabilityError, log);
