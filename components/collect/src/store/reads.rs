//! Reads outside a transaction, of committed data.

use mmc_domain::record::Payment;

use crate::ApiError;
use crate::mmc::platform::storage;

use super::codec::{decode, decode_payment};
use super::keys::{owner_row, reference_row, scope};
use super::records::Refund;

/// Reads outside a transaction (committed data).
pub fn read_payment(
    env: &str,
    merchant: &str,
    id_or_reference: &str,
) -> Result<Option<Payment>, ApiError> {
    if id_or_reference.is_empty() || id_or_reference.len() > 200 || id_or_reference.contains('/') {
        return Ok(None);
    }
    let by_id = |id: &str| Ok(read_stored_payment(env, merchant, id)?.map(|(p, _)| p));
    if let Some(p) = by_id(id_or_reference)? {
        return Ok(Some(p));
    }
    let (table, key) = reference_row(env, merchant, id_or_reference);
    match storage::get(table, &key)? {
        Some(id) => by_id(&String::from_utf8_lossy(&id)),
        None => Ok(None),
    }
}

/// Payment `id` as stored (committed data): decoded, and the bytes it was
/// decoded from, for a draft to assume exactly ([`Tx::assume_stored_payment`]).
pub fn read_stored_payment(
    env: &str,
    merchant: &str,
    id: &str,
) -> Result<Option<(Payment, Vec<u8>)>, ApiError> {
    let Some(stored) = storage::get("payments", &scope(env, merchant, id))? else {
        return Ok(None);
    };
    Ok(Some((decode_payment(&stored)?, stored)))
}

/// The merchant owning payment `id` in `env`, read outside a transaction.
pub fn read_owner(env: &str, id: &str) -> Result<Option<String>, ApiError> {
    let (table, key) = owner_row(env, id);
    Ok(storage::get(table, &key)?.map(|b| String::from_utf8_lossy(&b).into_owned()))
}

/// Reads a refund outside a transaction (committed data). An id no refund
/// can have (as for payments) is not looked up: storage refuses long keys.
pub fn read_refund(env: &str, merchant: &str, id: &str) -> Result<Option<Refund>, ApiError> {
    if id.is_empty() || id.len() > 200 || id.contains('/') {
        return Ok(None);
    }
    decode(storage::get("refunds", &scope(env, merchant, id))?)
}

/// Refunds of `payment_id`, newest first, older than refund `after`, at most `limit`.
pub fn read_payment_refunds(
    env: &str,
    merchant: &str,
    payment_id: &str,
    after: Option<&str>,
    limit: u32,
) -> Result<Vec<Refund>, ApiError> {
    let prefix = format!("{env}/{merchant}/{payment_id}/");
    let end = match after {
        Some(a) => format!("{prefix}{a}"),
        None => format!("{}0", prefix.trim_end_matches('/')),
    };
    let mut out = Vec::new();
    for storage::Entry { key, .. } in storage::scan_desc("payment_refunds", &prefix, &end, limit)? {
        let id = key.rsplit('/').next().unwrap_or_default();
        if let Some(r) = read_refund(env, merchant, id)? {
            out.push(r);
        }
    }
    Ok(out)
}
