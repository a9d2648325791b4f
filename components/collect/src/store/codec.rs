//! How records are encoded in storage: payments in their binary form (or
//! JSON while a fleet is rolled), the others as JSON.

use mmc_domain::record::Payment;
use serde::{Deserialize, Serialize};

use crate::ApiError;

pub(super) fn decode<T: for<'de> Deserialize<'de>>(
    bytes: Option<Vec<u8>>,
) -> Result<Option<T>, ApiError> {
    bytes.map(|b| decode_stored(&b)).transpose()
}

pub(super) fn decode_stored<T: for<'de> Deserialize<'de>>(stored: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(stored).map_err(|e| ApiError::internal(format!("corrupt record: {e}")))
}

/// A payment as stored ([`mmc_domain::record`]: binary, or JSON from before it).
pub fn decode_payment(stored: &[u8]) -> Result<Payment, ApiError> {
    mmc_domain::record::decode(stored)
        .map_err(|e| ApiError::internal(format!("corrupt record: {e}")))
}

/// Binary, unless the setting `payment_records` is `json`: while a fleet is
/// rolled from a version that reads only JSON records (docs/upgrades.md).
/// Read once per instance (one call).
pub(super) fn encode_payment(p: &Payment) -> Vec<u8> {
    if binary_records() {
        mmc_domain::record::encode(p)
    } else {
        encode(p)
    }
}

/// Payments and their events are stored in their compact binary forms (the
/// setting `payment_records` is not `json`).
pub fn binary_records() -> bool {
    static AS_JSON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    !*AS_JSON.get_or_init(|| {
        crate::mmc::platform::config::get("payment_records").is_some_and(|v| v.trim() == "json")
    })
}

pub(super) fn encode<T: Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).expect("records serialise")
}
