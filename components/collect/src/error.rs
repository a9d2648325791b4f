//! Errors of the current generation: the API kit's [`ApiError`] (every code
//! and its JSON, written once for `collect` and `bulk`), answered as this
//! component's `Response`, and what a storage failure means to a client.

pub use mmc_api_kit::ApiError;

use crate::mmc::api::http_types::Response;
use crate::mmc::platform::log;
use crate::mmc::platform::types::CapabilityError;

mmc_api_kit::response_from_answer!(Response);

/// `e` as this component answers it to a client of `base_url`.
pub fn respond(e: ApiError, base_url: &str) -> Response {
    e.into_answer(base_url).into()
}

impl From<CapabilityError> for ApiError {
    fn from(e: CapabilityError) -> Self {
        log::log(log::Level::Error, &format!("storage: {e:?}"));
        ApiError::storage(matches!(e, CapabilityError::Unavailable(_)))
    }
}
