//! What can always be fetched again (an OAuth token, a provider's published
//! configuration), kept in the host's `cache` capability: lost on restart,
//! never anything the money depends on.

use crate::{cache, signing};

/// How long a token that lasts `expires_in_s` is kept: until `margin_s`
/// before it expires (0 when it does not say, i.e. not kept).
pub fn ttl_ms(expires_in_s: Option<u64>, margin_s: u64) -> u64 {
    expires_in_s.unwrap_or(0).saturating_sub(margin_s) * 1000
}

/// A short hash of a secret, to key cached answers per account without
/// putting the secret in the cache.
pub fn account(secret: &str) -> String {
    digest(secret, 8)
}

/// The first `bytes` bytes of `text`'s SHA-256, in hex: a cache key for
/// what must not sit in the cache as it is (a secret, a phone number).
pub fn digest(text: &str, bytes: usize) -> String {
    let hash = signing::sha256(text.as_bytes());
    hex::encode(&hash[..bytes.min(hash.len())])
}

/// A cached token, if one is kept under `key`.
pub fn cached(key: &str) -> Option<String> {
    cache::get(key).map(|t| String::from_utf8_lossy(&t).into_owned())
}

/// Keeps `token` under `key` for `ttl_ms` (0: not kept).
pub fn keep(key: &str, token: &str, ttl_ms: u64) {
    cache::set(key, token.as_bytes(), ttl_ms);
}

/// Forgets the token under `key` (the provider dropped it).
pub fn forget(key: &str) {
    cache::set(key, &[], 0);
}

/// A JSON value kept under `key` for `ttl_ms`, else `fetch`ed (and kept when
/// it gives one). `None` when it cannot be had.
pub fn remember<T: serde::Serialize + serde::de::DeserializeOwned>(
    key: &str,
    ttl_ms: u64,
    fetch: impl FnOnce() -> Option<T>,
) -> Option<T> {
    if let Some(kept) = cache::get(key).and_then(|b| serde_json::from_slice(&b).ok()) {
        return Some(kept);
    }
    let fetched = fetch()?;
    if let Ok(bytes) = serde_json::to_vec(&fetched) {
        cache::set(key, &bytes, ttl_ms);
    }
    Some(fetched)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_kept_until_its_margin() {
        assert_eq!(ttl_ms(Some(3600), 600), 3_000_000);
        assert_eq!(
            ttl_ms(Some(300), 600),
            0,
            "shorter than the margin: not kept"
        );
        assert_eq!(ttl_ms(None, 600), 0, "no lifetime given: not kept");
    }
}
