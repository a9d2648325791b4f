//! Values a page shows once (recovery codes, a new key's secret): kept
//! sealed for the one browser that asked, until its next page reads them.

use sha2::Sha256;

use super::{UserError, Users, sha256_hex};
use mmc_common::clock::system_now_ms;
use mmc_db::StorageError;
use mmc_storage::sql_params;

/// How long a page's shown-once value waits for its page.
const SHOWN_ONCE_TTL_MS: u64 = 10 * 60 * 1000;

/// The cipher of one browser's shown-once values: its key derived from the
/// session token, each value bound to what it is.
struct OnceCipher(chacha20poly1305::ChaCha20Poly1305);

fn once_cipher(token: &str) -> OnceCipher {
    use hmac::Mac;
    let mut mac =
        <hmac::Hmac<Sha256> as Mac>::new_from_slice(token.as_bytes()).expect("HMAC takes any key");
    mac.update(b"console shown once");
    let key = mac.finalize().into_bytes();
    OnceCipher(<chacha20poly1305::ChaCha20Poly1305 as chacha20poly1305::KeyInit>::new(&key))
}

impl OnceCipher {
    fn encrypt_to_hex(&self, what: &str, text: &str) -> Option<String> {
        use chacha20poly1305::aead::{Aead, AeadCore, Payload};
        let nonce =
            chacha20poly1305::ChaCha20Poly1305::generate_nonce(&mut chacha20poly1305::aead::OsRng);
        let payload = Payload {
            msg: text.as_bytes(),
            aad: what.as_bytes(),
        };
        let sealed = self.0.encrypt(&nonce, payload).ok()?;
        Some(hex::encode([nonce.as_slice(), &sealed].concat()))
    }

    fn decrypt_hex(&self, what: &str, sealed: &str) -> Option<String> {
        use chacha20poly1305::aead::{Aead, Payload};
        let bytes = hex::decode(sealed).ok()?;
        if bytes.len() < 12 {
            return None;
        }
        let (nonce, msg) = bytes.split_at(12);
        let payload = Payload {
            msg,
            aad: what.as_bytes(),
        };
        let text = self
            .0
            .decrypt(chacha20poly1305::Nonce::from_slice(nonce), payload)
            .ok()?;
        String::from_utf8(text).ok()
    }
}

impl Users {
    /// Keeps `text` for the browser whose session token is `token`, to be
    /// shown by the page the form redirects to, once ([`Users::take_once`]).
    /// Sealed under a key derived from the token, which only the browser's
    /// cookie holds: the row alone (a backup, a replica) does not open.
    pub fn keep_once(&self, token: &str, what: &str, text: &str) -> Result<(), UserError> {
        let sealed = once_cipher(token)
            .encrypt_to_hex(what, text)
            .ok_or_else(|| StorageError::Unavailable("cannot seal".into()))?;
        let now = system_now_ms();
        self.db.write(|tx| {
            // Rows nobody came back for go as new ones come.
            tx.execute(
                "DELETE FROM console_shown_once WHERE expires_ms <= ?1",
                sql_params![now as i64],
            )?;
            tx.execute(
                "DELETE FROM console_shown_once WHERE token_hash = ?1 AND what = ?2",
                sql_params![sha256_hex(token), what],
            )?;
            tx.execute(
                "INSERT INTO console_shown_once (token_hash, what, sealed, expires_ms) VALUES (?1, ?2, ?3, ?4)",
                sql_params![sha256_hex(token), what, &sealed, (now + SHOWN_ONCE_TTL_MS) as i64],
            )
        })?;
        Ok(())
    }

    /// What [`Users::keep_once`] kept for this browser under `what`, if
    /// still there; it is gone once read.
    pub fn take_once(&self, token: &str, what: &str) -> Result<Option<String>, UserError> {
        let hash = sha256_hex(token);
        let sealed = self.db.write(|tx| {
            let row = tx.query_opt(
                "SELECT sealed FROM console_shown_once WHERE token_hash = ?1 AND what = ?2 AND expires_ms > ?3",
                sql_params![&hash, what, system_now_ms() as i64],
            )?;
            tx.execute(
                "DELETE FROM console_shown_once WHERE token_hash = ?1 AND what = ?2",
                sql_params![&hash, what],
            )?;
            row.map(|r| r.text(0)).transpose()
        })?;
        Ok(sealed.and_then(|s| once_cipher(token).decrypt_hex(what, &s)))
    }
}
