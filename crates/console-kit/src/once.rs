//! Forms that do something once: a destructive form carries a random key,
//! claimed when it is carried out, so that a reload (the browser posting
//! the form again) or a second click finds it done and repeats nothing.
//! Kept in the database, so that it holds on every node of a fleet.

use mmc_common::clock::system_now_ms;
use mmc_db::{SqlDb, StorageError};
use mmc_storage::sql_params;

use crate::users::sha256_hex;

/// How long a form's key is remembered: longer than anyone keeps a page open.
const KEEP_MS: u64 = 24 * 3600 * 1000;

#[derive(Clone)]
pub struct Forms {
    db: SqlDb,
}

impl Forms {
    pub fn new(db: SqlDb) -> Forms {
        Forms { db }
    }

    /// A fresh key for a form.
    pub fn key() -> String {
        uuid::Uuid::new_v4().to_string()
    }

    /// True the first time `key` is claimed for the merchant, false after.
    /// Keys older than a day are forgotten in the same write.
    pub fn claim(&self, merchant_id: &str, key: &str) -> Result<bool, StorageError> {
        let now = system_now_ms();
        let hash = sha256_hex(&format!("{merchant_id}/{key}"));
        let claimed = self.db.write(|tx| {
            tx.execute(
                "DELETE FROM console_forms_done WHERE at_ms < ?1",
                sql_params![now.saturating_sub(KEEP_MS) as i64],
            )?;
            tx.execute(
                "INSERT INTO console_forms_done (key_hash, at_ms) VALUES (?1, ?2) ON CONFLICT DO NOTHING",
                sql_params![hash, now as i64],
            )
        })?;
        Ok(claimed == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_form_is_claimed_once_per_merchant() {
        let dir = tempfile::tempdir().unwrap();
        let (db, merchant) = crate::test_shop(&dir);
        let forms = Forms::new(db);
        let key = Forms::key();
        assert!(forms.claim(&merchant.id, &key).unwrap());
        assert!(!forms.claim(&merchant.id, &key).unwrap());
        assert!(forms.claim("another", &key).unwrap());
    }
}
