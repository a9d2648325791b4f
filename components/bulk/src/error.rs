//! Errors of the bulk API, in the current generation's shape: the API kit's
//! [`ApiError`] (every code and its JSON, written once for `collect` and
//! `bulk`; a batch's validation lists every problem in `errors`), answered
//! as this component's `Response`, and what a storage failure means.

pub use mmc_api_kit::ApiError;

use crate::mmc::api::http_types::Response;
use crate::mmc::platform::log;
use crate::mmc::platform::types::CapabilityError;

mmc_api_kit::component_errors!(Response, CapabilityError, log);
