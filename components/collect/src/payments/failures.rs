//! What an adapter's error means: for the money, and for the merchant.

use mmc_domain::outcome::CallFailure;

use crate::mmc::adapter::types::AdapterError;

/// What an adapter error means for the money (see `mmc_domain::outcome`).
pub fn failure_kind(e: &AdapterError) -> CallFailure {
    mmc_domain::call_failure!(AdapterError, e)
}

pub fn adapter_failure(e: &AdapterError) -> (&'static str, String) {
    match e {
        AdapterError::NotSupported(m) => ("operator_unavailable", m.clone()),
        AdapterError::Timeout(m) => ("operator_timeout", m.clone()),
        AdapterError::Busy(m) => ("operator_busy", m.clone()),
        AdapterError::NotSent(m)
        | AdapterError::Unavailable(m)
        | AdapterError::InvalidResponse(m)
        | AdapterError::Rejected(m)
        | AdapterError::Unauthenticated(m) => ("operator_error", m.clone()),
    }
}
