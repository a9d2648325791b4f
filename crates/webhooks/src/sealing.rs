//! Webhook signing secrets at rest. Whoever holds a secret can sign events a
//! merchant will believe, so a copy of the database (a backup, a replica, a
//! stolen disk) must not be enough: secrets are sealed with ChaCha20-Poly1305
//! under a key kept outside the database — `webhooks.secrets_key`
//! (`MMC_WEBHOOKS__SECRETS_KEY`, 64 hex digits), or one generated once into
//! `<data_dir>/webhook_secrets_key` (mode 0600). Each value is bound to its
//! row (the associated data), so sealed values cannot be swapped between
//! endpoints. Keys listed in `webhooks.previous_secrets_keys` still open
//! values; [`Sealer::needs_resealing`] tells the start-up pass which rows to
//! seal again under the current key (and which rows predate sealing).

use std::path::PathBuf;

use chacha20poly1305::aead::{Aead, AeadCore, KeyInit, OsRng, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};

use mmc_config::Config;

/// Sealed values start with this; anything else predates sealing.
const PREFIX: &str = "sealed:v1:";
const NONCE_LEN: usize = 12;

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error(
        "webhooks.secrets_key must be 64 hexadecimal digits (32 bytes); leave it unset to have one generated into <data_dir>/webhook_secrets_key"
    )]
    BadKey,
    #[error(
        "{path} can be read by other users (mode {mode:o}): run `chmod 600` on it (deleting it would lose every webhook secret sealed with it)"
    )]
    Exposed { path: String, mode: u32 },
    #[error("cannot keep the webhook secrets key in {path}: {source}")]
    File {
        path: String,
        source: std::io::Error,
    },
    #[error(
        "a webhook secret cannot be opened with the configured keys (wrong webhooks.secrets_key, or the value was altered)"
    )]
    CannotOpen,
    #[error(
        "storage.url is PostgreSQL (a fleet): set webhooks.secrets_key (MMC_WEBHOOKS__SECRETS_KEY, 64 hex digits), the same on every node; a key generated per node would not open the secrets another node sealed"
    )]
    FleetNeedsKey,
}

pub struct Sealer {
    current: ChaCha20Poly1305,
    previous: Vec<ChaCha20Poly1305>,
}

fn parse_key(hex_key: &str) -> Result<ChaCha20Poly1305, SealError> {
    let bytes = hex::decode(hex_key.trim()).map_err(|_| SealError::BadKey)?;
    if bytes.len() != 32 {
        return Err(SealError::BadKey);
    }
    Ok(ChaCha20Poly1305::new(Key::from_slice(&bytes)))
}

impl Sealer {
    /// The configured key, else the generated one (made on first start).
    pub fn resolve(config: &Config) -> Result<Sealer, SealError> {
        let previous = config
            .webhooks
            .previous_secrets_keys
            .iter()
            .map(|k| parse_key(k))
            .collect::<Result<Vec<_>, _>>()?;
        let current = match config.webhooks.secrets_key.as_deref() {
            Some(k) => parse_key(k)?,
            None if matches!(
                config.storage_url(),
                Ok(mmc_config::StorageUrl::Postgres(_))
            ) =>
            {
                return Err(SealError::FleetNeedsKey);
            }
            None => parse_key(&generated_key(config.data_dir.join("webhook_secrets_key"))?)?,
        };
        Ok(Sealer { current, previous })
    }

    /// A sealer with the given key (hex): tests and tools.
    pub fn with_key(hex_key: &str) -> Result<Sealer, SealError> {
        Ok(Sealer {
            current: parse_key(hex_key)?,
            previous: Vec::new(),
        })
    }

    /// `secret` sealed for the row named `row`.
    pub fn seal(&self, row: &str, secret: &str) -> String {
        let nonce = ChaCha20Poly1305::generate_nonce(&mut OsRng);
        let sealed = self
            .current
            .encrypt(
                &nonce,
                Payload {
                    msg: secret.as_bytes(),
                    aad: row.as_bytes(),
                },
            )
            .expect("sealing a short secret cannot fail");
        let mut out = nonce.to_vec();
        out.extend_from_slice(&sealed);
        format!("{PREFIX}{}", hex::encode(out))
    }

    /// The secret stored for `row`. A value that predates sealing is refused:
    /// the start-up pass seals every one, so an unsealed value was put there
    /// by something other than this service.
    pub fn open(&self, row: &str, stored: &str) -> Result<String, SealError> {
        self.open_with(row, stored).map(|(secret, _)| secret)
    }

    /// (secret, opened by the current key).
    fn open_with(&self, row: &str, stored: &str) -> Result<(String, bool), SealError> {
        let raw = stored
            .strip_prefix(PREFIX)
            .and_then(|h| hex::decode(h).ok())
            .filter(|raw| raw.len() > NONCE_LEN)
            .ok_or(SealError::CannotOpen)?;
        let (nonce, sealed) = raw.split_at(NONCE_LEN);
        let payload = || Payload {
            msg: sealed,
            aad: row.as_bytes(),
        };
        let nonce = Nonce::from_slice(nonce);
        let (plain, current) = match self.current.decrypt(nonce, payload()) {
            Ok(p) => (p, true),
            Err(_) => (
                self.previous
                    .iter()
                    .find_map(|k| k.decrypt(nonce, payload()).ok())
                    .ok_or(SealError::CannotOpen)?,
                false,
            ),
        };
        let secret = String::from_utf8(plain).map_err(|_| SealError::CannotOpen)?;
        Ok((secret, current))
    }

    /// What the start-up pass should store instead of `stored` for `row`:
    /// a plaintext value from before sealing, or one sealed under a previous
    /// key, sealed again under the current key. `None`: leave it.
    pub fn needs_resealing(&self, row: &str, stored: &str) -> Result<Option<String>, SealError> {
        if !stored.starts_with(PREFIX) {
            return Ok(Some(self.seal(row, stored)));
        }
        match self.open_with(row, stored)? {
            (_, true) => Ok(None),
            (secret, false) => Ok(Some(self.seal(row, &secret))),
        }
    }
}

/// The generated key: read back, or made now into a 0600 file.
fn generated_key(path: PathBuf) -> Result<String, SealError> {
    let file_err = |source| SealError::File {
        path: path.display().to_string(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(k) => {
            if let Some(mode) = mmc_common::private_file::exposed_mode(&path).map_err(file_err)? {
                return Err(SealError::Exposed {
                    path: path.display().to_string(),
                    mode,
                });
            }
            return Ok(k.trim().to_string());
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(file_err(e)),
    }
    let key = hex::encode(ChaCha20Poly1305::generate_key(&mut OsRng));
    mmc_common::private_file::write(&path, &key).map_err(file_err)?;
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    const K1: &str = "0101010101010101010101010101010101010101010101010101010101010101";
    const K2: &str = "0202020202020202020202020202020202020202020202020202020202020202";

    #[cfg(unix)]
    #[test]
    fn a_key_file_others_can_read_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("webhook_secrets_key");
        let key = generated_key(path.clone()).unwrap();
        assert_eq!(
            generated_key(path.clone()).unwrap(),
            key,
            "kept across starts"
        );
        for mode in [0o640, 0o604, 0o660] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            match generated_key(path.clone()) {
                Err(SealError::Exposed { mode: m, .. }) => assert_eq!(m, mode),
                other => panic!("mode {mode:o}: {:?}", other.map(|_| ())),
            }
        }
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(generated_key(path).unwrap(), key);
    }

    #[test]
    fn sealed_values_open_only_for_their_row_and_key() {
        let s = Sealer::with_key(K1).unwrap();
        let sealed = s.seal("we_1", "whsec_abc");
        assert!(sealed.starts_with(PREFIX) && !sealed.contains("whsec_abc"));
        assert_ne!(
            sealed,
            s.seal("we_1", "whsec_abc"),
            "a fresh nonce each time"
        );
        assert_eq!(s.open("we_1", &sealed).unwrap(), "whsec_abc");
        assert!(s.open("we_2", &sealed).is_err(), "bound to its row");
        assert!(s.open("we_1", "whsec_abc").is_err(), "plaintext is refused");
        let at = PREFIX.len() + 30;
        let flipped = if &sealed[at..=at] == "0" { "1" } else { "0" };
        let tampered = format!("{}{flipped}{}", &sealed[..at], &sealed[at + 1..]);
        assert!(
            s.open("we_1", &tampered).is_err(),
            "altered values do not open"
        );
        assert!(Sealer::with_key(K2).unwrap().open("we_1", &sealed).is_err());
        assert!(Sealer::with_key("abcd").is_err());
    }

    #[test]
    fn rotation_and_plaintext_rows_are_sealed_again() {
        let old = Sealer::with_key(K1).unwrap();
        let sealed_old = old.seal("we_1", "whsec_abc");
        let new = Sealer {
            current: parse_key(K2).unwrap(),
            previous: vec![parse_key(K1).unwrap()],
        };
        assert_eq!(new.open("we_1", &sealed_old).unwrap(), "whsec_abc");
        let resealed = new.needs_resealing("we_1", &sealed_old).unwrap().unwrap();
        assert_eq!(
            Sealer::with_key(K2)
                .unwrap()
                .open("we_1", &resealed)
                .unwrap(),
            "whsec_abc"
        );
        assert_eq!(new.needs_resealing("we_1", &resealed).unwrap(), None);
        let from_plain = new.needs_resealing("we_1", "whsec_plain").unwrap().unwrap();
        assert_eq!(new.open("we_1", &from_plain).unwrap(), "whsec_plain");
    }

    #[test]
    fn a_generated_key_is_kept_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("webhook_secrets_key");
        let first = generated_key(path.clone()).unwrap();
        assert_eq!(first.len(), 64);
        assert_eq!(generated_key(path.clone()).unwrap(), first);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
