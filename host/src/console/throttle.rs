//! Sign-in attempts, limited per account and per client address: a few
//! failures open a window in which further attempts are refused without a
//! password check. Failures are counted in the database, so a fleet's nodes
//! share one count: spreading guesses over the nodes buys nothing. Keys are
//! SHA-256 digests (the table holds no email or address), and rows whose
//! window ended are deleted with the next failure, so the table holds at
//! most one window's failures.

use std::time::Duration;

use mmc_storage::sql_params;

use super::users::sha256_hex;
use crate::clock::system_now_ms;
use crate::db::{SqlDb, StorageError};

pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// Failures within [`WINDOW`] after which an account is refused.
pub const PER_ACCOUNT: i64 = 5;
/// Failures within [`WINDOW`] after which a client address is refused.
pub const PER_CLIENT: i64 = 20;

#[derive(Clone)]
pub struct Throttle {
    db: SqlDb,
}

impl Throttle {
    pub fn new(db: SqlDb) -> Throttle {
        Throttle { db }
    }

    /// How long `account` (an email) from `client` must wait, if it must.
    pub fn wait(&self, account: &str, client: &str) -> Result<Option<Duration>, StorageError> {
        let now = system_now_ms() as i64;
        let window = WINDOW.as_millis() as i64;
        let (a, c) = (account_key(account), client_key(client));
        let rows = self.db.read(|q| {
            q.query(
                "SELECT key_hash, failures, since_ms FROM console_sign_in_failures
                 WHERE key_hash IN (?1, ?2) AND since_ms > ?3",
                sql_params![&a, &c, now - window],
            )
        })?;
        let mut wait = None;
        for r in rows {
            let limit = if r.text(0)? == a {
                PER_ACCOUNT
            } else {
                PER_CLIENT
            };
            if r.int(1)? >= limit {
                let left = Duration::from_millis((r.int(2)? + window - now).max(0) as u64);
                wait = wait.max(Some(left));
            }
        }
        Ok(wait)
    }

    /// One more failure for the account and for the client.
    pub fn failed(&self, account: &str, client: &str) -> Result<(), StorageError> {
        let now = system_now_ms() as i64;
        let window = WINDOW.as_millis() as i64;
        self.db.write(|tx| {
            tx.execute(
                "DELETE FROM console_sign_in_failures WHERE since_ms <= ?1",
                sql_params![now - window],
            )?;
            for key in [account_key(account), client_key(client)] {
                tx.execute(
                    "INSERT INTO console_sign_in_failures (key_hash, failures, since_ms) VALUES (?1, 1, ?2)
                     ON CONFLICT (key_hash) DO UPDATE SET failures = console_sign_in_failures.failures + 1",
                    sql_params![key, now],
                )?;
            }
            Ok(())
        })
    }

    /// A successful sign-in clears its account's count (not its client's).
    pub fn succeeded(&self, account: &str) -> Result<(), StorageError> {
        self.db.write(|tx| {
            tx.execute(
                "DELETE FROM console_sign_in_failures WHERE key_hash = ?1",
                sql_params![account_key(account)],
            )
        })?;
        Ok(())
    }
}

fn account_key(email: &str) -> String {
    sha256_hex(&format!("account {}", email.trim().to_lowercase()))
}

fn client_key(client: &str) -> String {
    sha256_hex(&format!("client {client}"))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn throttle(dir: &tempfile::TempDir) -> (Throttle, SqlDb) {
        let db = SqlDb::new(Arc::new(
            crate::db::Sqlite::open(&dir.path().join("a.db")).unwrap(),
        ));
        (Throttle::new(db.clone()), db)
    }

    #[test]
    fn an_account_is_refused_after_its_failures_and_cleared_by_a_success() {
        let dir = tempfile::tempdir().unwrap();
        let (t, _) = throttle(&dir);
        for _ in 0..PER_ACCOUNT {
            assert!(t.wait("a@x.bj", "1.2.3.4").unwrap().is_none());
            t.failed("A@x.bj", "1.2.3.4").unwrap();
        }
        let wait = t.wait("a@x.bj", "5.6.7.8").unwrap();
        assert!(
            wait.is_some_and(|w| w > WINDOW - Duration::from_secs(60) && w <= WINDOW),
            "per account, from anywhere: {wait:?}"
        );
        assert!(t.wait("b@x.bj", "5.6.7.8").unwrap().is_none());
        t.succeeded("a@x.bj").unwrap();
        assert!(t.wait("a@x.bj", "5.6.7.8").unwrap().is_none());
    }

    #[test]
    fn a_client_is_refused_after_its_failures_on_any_account() {
        let dir = tempfile::tempdir().unwrap();
        let (t, _) = throttle(&dir);
        for i in 0..PER_CLIENT {
            t.failed(&format!("{i}@x.bj"), "1.2.3.4").unwrap();
        }
        assert!(t.wait("new@x.bj", "1.2.3.4").unwrap().is_some());
        assert!(t.wait("new@x.bj", "9.9.9.9").unwrap().is_none());
    }

    #[test]
    fn ended_windows_count_nothing_and_their_rows_go_with_the_next_failure() {
        let dir = tempfile::tempdir().unwrap();
        let (t, db) = throttle(&dir);
        for i in 0..PER_CLIENT {
            t.failed(&format!("{i}@x.bj"), "1.2.3.4").unwrap();
        }
        // Every window began long ago.
        db.write(|tx| tx.execute("UPDATE console_sign_in_failures SET since_ms = 1", &[]))
            .unwrap();
        assert!(t.wait("0@x.bj", "1.2.3.4").unwrap().is_none());
        t.failed("other@x.bj", "5.6.7.8").unwrap();
        let rows = db
            .read(|c| {
                c.query_one("SELECT COUNT(*) FROM console_sign_in_failures", &[])?
                    .int(0)
            })
            .unwrap();
        assert_eq!(rows, 2, "only the new failure's account and client remain");
        let stored = db
            .read(|c| c.query("SELECT key_hash FROM console_sign_in_failures", &[]))
            .unwrap();
        assert!(
            stored
                .iter()
                .all(|r| !r.text(0).unwrap().contains('@') && !r.text(0).unwrap().contains('.')),
            "digests, not emails or addresses"
        );
    }
}
