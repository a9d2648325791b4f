//! What a presented API key is: its environment by its prefix, and the
//! digest it is stored and cached under.

use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::Environment;

/// The stored form of a presented key, if it has the shape of one: a
/// prefixed key hashes as given, a legacy UUID key in its hyphenated form.
pub(super) fn hash_key(presented: &str) -> Option<String> {
    key_digest(presented).map(hex::encode)
}

/// A key's SHA-256: what the cache is keyed by (the table stores its hex).
pub(super) type KeyDigest = [u8; 32];

/// The digest of a key's canonical form, if it has the shape of a key.
pub(super) fn key_digest(presented: &str) -> Option<KeyDigest> {
    let presented = presented.trim();
    let digest = if key_environment(presented).is_some() {
        let secret = &presented[KEY_PREFIX_LEN..];
        if secret.len() != 32 || !secret.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        Sha256::digest(presented.as_bytes())
    } else {
        let canonical = Uuid::parse_str(presented).ok()?.hyphenated().to_string();
        Sha256::digest(canonical.as_bytes())
    };
    Some(digest.into())
}

pub(super) const KEY_PREFIX_LEN: usize = "mk_test_".len();

/// The environment a prefixed key names (`None`: a legacy key, or no key).
pub(super) fn key_environment(presented: &str) -> Option<Environment> {
    if presented.starts_with("mk_test_") {
        Some(Environment::Test)
    } else if presented.starts_with("mk_live_") {
        Some(Environment::Live)
    } else {
        None
    }
}
