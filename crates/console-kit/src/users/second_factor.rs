//! A user's second factor: an authenticator's codes (TOTP), each step
//! spent once, and recovery codes, kept as hashes.

use argon2::password_hash::rand_core::{OsRng, RngCore};

use super::{Factor, UserError, Users, sha256_hex};
use mmc_common::clock::system_now_ms;
use mmc_db::StorageError;
use mmc_storage::sql_params;

/// How many recovery codes a set has.
pub const RECOVERY_CODES: usize = 10;
/// Characters of a recovery code (base32: 5 bits each, 60 bits in all).
const RECOVERY_CODE_CHARS: usize = 12;

/// Ten random codes, `xxxx-xxxx-xxxx` in lowercase base32.
fn new_recovery_codes() -> Vec<String> {
    (0..RECOVERY_CODES)
        .map(|_| {
            let mut bytes = [0u8; 8];
            OsRng.fill_bytes(&mut bytes);
            let chars = crate::totp::base32(&bytes).to_lowercase();
            let chars = &chars[..RECOVERY_CODE_CHARS];
            format!("{}-{}-{}", &chars[..4], &chars[4..8], &chars[8..])
        })
        .collect()
}

/// A typed recovery code as stored: lowercase, without hyphens or spaces;
/// None if it cannot be one (an authenticator's six digits, say).
pub fn recovery_code_shape(code: &str) -> Option<String> {
    let code: String = code
        .chars()
        .filter(|c| !c.is_whitespace() && *c != '-')
        .map(|c| c.to_ascii_lowercase())
        .collect();
    let valid = code.len() == RECOVERY_CODE_CHARS
        && code.bytes().all(|b| matches!(b, b'a'..=b'z' | b'2'..=b'7'));
    valid.then_some(code)
}

/// The stored form of a recovery code: 60 random bits need no slow hash.
fn recovery_code_hash(shaped: &str) -> String {
    sha256_hex(&format!("recovery code {shaped}"))
}

fn replace_recovery_codes(
    tx: &mut dyn mmc_storage::sql::SqlConn,
    user_id: &str,
    codes: &[String],
) -> Result<(), StorageError> {
    tx.execute(
        "DELETE FROM console_recovery_codes WHERE user_id = ?1",
        sql_params![user_id],
    )?;
    let now = system_now_ms() as i64;
    for code in codes {
        let shaped = recovery_code_shape(code).expect("a code made here has the shape of one");
        tx.execute(
            "INSERT INTO console_recovery_codes (user_id, code_hash, created_ms) VALUES (?1, ?2, ?3)",
            sql_params![user_id, recovery_code_hash(&shaped), now],
        )?;
    }
    Ok(())
}

impl Users {
    /// Records the step of a code just accepted; false if a code of that
    /// step or a later one was already used (a replayed code).
    pub fn spend_totp_step(&self, user_id: &str, step: u64) -> Result<bool, UserError> {
        let changed = self.db.write(|tx| {
            tx.execute(
                "UPDATE console_users SET totp_last_step = ?2
                 WHERE id = ?1 AND (totp_last_step IS NULL OR totp_last_step < ?2)",
                sql_params![user_id, step as i64],
            )
        })?;
        Ok(changed == 1)
    }

    /// The enabled second factor of a user.
    pub fn current_totp(&self, user_id: &str) -> Result<Option<Factor>, UserError> {
        let row = self.db.read(|c| {
            c.query_opt(
                "SELECT totp_secret, totp_last_step FROM console_users
                 WHERE id = ?1 AND totp_enabled = 1 AND removed_ms IS NULL",
                sql_params![user_id],
            )
        })?;
        let Some(r) = row else { return Ok(None) };
        let secret = r.opt_text(0)?.and_then(|s| crate::totp::from_base32(&s));
        let last_step = r.opt_int(1)?.map(|s| s as u64);
        Ok(secret.map(|secret| Factor { secret, last_step }))
    }

    /// [`Users::spend_totp_step`] for one request (`purpose`): the same
    /// request sent again with the same code (a double submit) is let
    /// through, as the first one was; any other use of the code is not.
    pub fn spend_totp_step_for(
        &self,
        user_id: &str,
        step: u64,
        purpose: &str,
    ) -> Result<bool, UserError> {
        let changed = self.db.write(|tx| {
            tx.execute(
                "UPDATE console_users SET totp_last_step = ?2, totp_last_purpose = ?3
                 WHERE id = ?1 AND (totp_last_step IS NULL OR totp_last_step < ?2
                                    OR (totp_last_step = ?2 AND totp_last_purpose = ?3))",
                sql_params![user_id, step as i64, purpose],
            )
        })?;
        Ok(changed == 1)
    }

    /// A new secret, kept pending until a code from it is confirmed.
    pub fn start_totp(&self, user_id: &str) -> Result<String, UserError> {
        let mut secret = [0u8; 20];
        OsRng.fill_bytes(&mut secret);
        let b32 = crate::totp::base32(&secret);
        // Until a code of the new secret is confirmed there is no second
        // factor, so no code stands in for one either.
        self.db.write(|tx| {
            tx.execute(
                "UPDATE console_users SET totp_secret = ?2, totp_enabled = 0 WHERE id = ?1 AND removed_ms IS NULL",
                sql_params![user_id, &b32],
            )?;
            tx.execute(
                "DELETE FROM console_recovery_codes WHERE user_id = ?1",
                sql_params![user_id],
            )
        })?;
        Ok(b32)
    }

    /// The pending secret of a user (what the setup page shows again).
    pub fn pending_totp(&self, user_id: &str) -> Result<Option<String>, UserError> {
        Ok(self
            .db
            .read(|c| {
                c.query_opt(
                    "SELECT totp_secret FROM console_users WHERE id = ?1 AND totp_enabled = 0",
                    sql_params![user_id],
                )?
                .map(|r| r.opt_text(0))
                .transpose()
            })?
            .flatten())
    }

    /// Turns the pending secret on, with a first set of recovery codes:
    /// returned here in clear, the only time they exist outside the person.
    pub fn enable_totp(&self, user_id: &str, step: u64) -> Result<Vec<String>, UserError> {
        let codes = new_recovery_codes();
        self.db.write(|tx| {
            tx.execute(
                "UPDATE console_users SET totp_enabled = 1, totp_last_step = ?2 WHERE id = ?1",
                sql_params![user_id, step as i64],
            )?;
            replace_recovery_codes(tx, user_id, &codes)
        })?;
        Ok(codes)
    }

    /// A new set of recovery codes in place of the user's current ones
    /// (used or not), for a user whose second factor is on.
    pub fn renew_recovery_codes(&self, user_id: &str) -> Result<Vec<String>, UserError> {
        let codes = new_recovery_codes();
        let renewed = self.db.write(|tx| {
            let on = tx.query_opt(
                "SELECT 1 FROM console_users WHERE id = ?1 AND totp_enabled = 1 AND removed_ms IS NULL",
                sql_params![user_id],
            )?;
            if on.is_none() {
                return Ok(false);
            }
            replace_recovery_codes(tx, user_id, &codes)?;
            Ok(true)
        })?;
        if !renewed {
            return Err(UserError::UnknownUser);
        }
        Ok(codes)
    }

    /// How many of the user's recovery codes are still unused.
    pub fn recovery_codes_left(&self, user_id: &str) -> Result<u64, UserError> {
        Ok(self.db.read(|c| {
            c.query_one(
                "SELECT COUNT(*) FROM console_recovery_codes WHERE user_id = ?1 AND used_ms IS NULL",
                sql_params![user_id],
            )?
            .int(0)
        })? as u64)
    }

    /// Spends one of the user's recovery codes: true if `code` is one not
    /// used before, or used for this same `purpose` (a request submitted
    /// again, as [`Users::spend_totp_step_for`] lets a double submit
    /// through). Found by its hash: nothing is compared character by
    /// character, so timing tells nothing of a code.
    pub fn spend_recovery_code(
        &self,
        user_id: &str,
        code: &str,
        purpose: Option<&str>,
    ) -> Result<bool, UserError> {
        let Some(code) = recovery_code_shape(code) else {
            return Ok(false);
        };
        let hash = recovery_code_hash(&code);
        let now = system_now_ms() as i64;
        let changed = self.db.write(|tx| match purpose {
            None => tx.execute(
                "UPDATE console_recovery_codes SET used_ms = ?3
                 WHERE user_id = ?1 AND code_hash = ?2 AND used_ms IS NULL",
                sql_params![user_id, &hash, now],
            ),
            Some(purpose) => tx.execute(
                "UPDATE console_recovery_codes SET used_ms = COALESCE(used_ms, ?3), used_for = ?4
                 WHERE user_id = ?1 AND code_hash = ?2 AND (used_ms IS NULL OR used_for = ?4)",
                sql_params![user_id, &hash, now, purpose],
            ),
        })?;
        Ok(changed == 1)
    }
}
