//! Sign-in attempts, limited per account and per client address. An
//! attempt is reserved before its password is checked: one write counts it
//! for the account and for the client, and an attempt past either limit is
//! refused without a password check. So simultaneous guesses cannot all
//! slip in between a check and the count of its failure: however many
//! arrive at once, on however many nodes, at most the limit reach the
//! password. Attempts are counted in the database, so a fleet's nodes share
//! one count. A success gives its reservation back. Keys are SHA-256
//! digests (the table holds no email or address); a key's count starts
//! again once its window has ended, and rows whose window ended are deleted
//! after the next reservation, so the table holds at most one window's
//! attempts.

use std::time::Duration;

use mmc_storage::sql_params;

use crate::users::sha256_hex;
use mmc_common::clock::system_now_ms;
use mmc_db::{SqlConn, SqlDb, StorageError};

pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// Attempts within [`WINDOW`] an account is allowed (successes given back).
pub const PER_ACCOUNT: i64 = 5;
/// Attempts within [`WINDOW`] a client address is allowed (successes given back).
pub const PER_CLIENT: i64 = 20;

#[derive(Clone)]
pub struct Throttle {
    db: SqlDb,
}

impl Throttle {
    pub fn new(db: SqlDb) -> Throttle {
        Throttle { db }
    }

    /// Reserves one attempt for `account` (an email) from `client`, or says
    /// how long they must wait. The attempt counts as a failure until
    /// [`Throttle::succeeded`] or [`Throttle::release`] gives it back.
    pub fn reserve(&self, account: &str, client: &str) -> Result<Option<Duration>, StorageError> {
        let now = system_now_ms() as i64;
        let window = WINDOW.as_millis() as i64;
        let keys = [
            (account_key(account), PER_ACCOUNT),
            (client_key(client), PER_CLIENT),
        ];
        // Already refused: said from a read, so a flood of refused attempts
        // writes nothing.
        if let Some(wait) = self.refused(&keys, now)? {
            return Ok(Some(wait));
        }
        let wait = self.db.write(|tx| {
            let mut wait = None;
            // Account first, then client, in every transaction: row locks
            // are always taken in one order.
            for (key, limit) in &keys {
                let r = tx.query_one(
                    "INSERT INTO console_sign_in_failures (key_hash, failures, since_ms) VALUES (?1, 1, ?2)
                     ON CONFLICT (key_hash) DO UPDATE SET
                       failures = CASE WHEN console_sign_in_failures.since_ms <= ?3 THEN 1
                                       ELSE console_sign_in_failures.failures + 1 END,
                       since_ms = CASE WHEN console_sign_in_failures.since_ms <= ?3 THEN ?2
                                       ELSE console_sign_in_failures.since_ms END
                     RETURNING failures, since_ms",
                    sql_params![key, now, now - window],
                )?;
                if r.int(0)? > *limit {
                    let left = Duration::from_millis((r.int(1)? + window - now).max(0) as u64);
                    wait = wait.max(Some(left));
                }
            }
            // A refused attempt is not one: nothing it counted stays.
            if wait.is_some() {
                for (key, _) in &keys {
                    give_back(tx, key)?;
                }
            }
            Ok(wait)
        })?;
        if wait.is_none() {
            // Ended windows, in a write of their own (a failure here costs nothing).
            let ended = self.db.write(|tx| {
                tx.execute(
                    "DELETE FROM console_sign_in_failures WHERE since_ms <= ?1",
                    sql_params![now - window],
                )
            });
            if let Err(e) = ended {
                tracing::debug!(error = %e, "ended sign-in windows not deleted");
            }
        }
        Ok(wait)
    }

    /// The wait of the first of `keys` at its limit, read without a write.
    fn refused(
        &self,
        keys: &[(String, i64); 2],
        now: i64,
    ) -> Result<Option<Duration>, StorageError> {
        let window = WINDOW.as_millis() as i64;
        let rows = self.db.read(|q| {
            q.query(
                "SELECT key_hash, failures, since_ms FROM console_sign_in_failures
                 WHERE key_hash IN (?1, ?2) AND since_ms > ?3",
                sql_params![&keys[0].0, &keys[1].0, now - window],
            )
        })?;
        let mut wait = None;
        for r in rows {
            let key = r.text(0)?;
            let limit = keys.iter().find(|(k, _)| *k == key).map_or(0, |(_, l)| *l);
            if r.int(1)? >= limit {
                let left = Duration::from_millis((r.int(2)? + window - now).max(0) as u64);
                wait = wait.max(Some(left));
            }
        }
        Ok(wait)
    }

    /// An attempt reserved and not made (the password was not checked):
    /// its count given back to the account and to the client.
    pub fn release(&self, account: &str, client: &str) -> Result<(), StorageError> {
        self.db.write(|tx| {
            give_back(tx, &account_key(account))?;
            give_back(tx, &client_key(client))
        })
    }

    /// A successful sign-in clears its account's count and gives its
    /// client its one attempt back (people behind one address sign in
    /// every day without using up its limit).
    pub fn succeeded(&self, account: &str, client: &str) -> Result<(), StorageError> {
        self.db.write(|tx| {
            tx.execute(
                "DELETE FROM console_sign_in_failures WHERE key_hash = ?1",
                sql_params![account_key(account)],
            )?;
            give_back(tx, &client_key(client))
        })
    }
}

fn give_back(tx: &mut dyn SqlConn, key: &str) -> Result<(), StorageError> {
    tx.execute(
        "UPDATE console_sign_in_failures SET failures = failures - 1
         WHERE key_hash = ?1 AND failures > 0",
        sql_params![key],
    )?;
    Ok(())
}

fn account_key(email: &str) -> String {
    sha256_hex(&format!("account {}", crate::users::lookup_email(email)))
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
            mmc_db::Sqlite::open(&dir.path().join("a.db")).unwrap(),
        ));
        (Throttle::new(db.clone()), db)
    }

    #[test]
    fn an_account_is_refused_past_its_attempts_and_cleared_by_a_success() {
        let dir = tempfile::tempdir().unwrap();
        let (t, _) = throttle(&dir);
        for _ in 0..PER_ACCOUNT {
            assert!(t.reserve("A@x.bj", "1.2.3.4").unwrap().is_none());
        }
        let wait = t.reserve("a@x.bj", "5.6.7.8").unwrap();
        assert!(
            wait.is_some_and(|w| w > WINDOW - Duration::from_secs(60) && w <= WINDOW),
            "per account, from anywhere: {wait:?}"
        );
        assert!(t.reserve("b@x.bj", "5.6.7.8").unwrap().is_none());
        t.succeeded("a@x.bj", "1.2.3.4").unwrap();
        assert!(t.reserve("a@x.bj", "5.6.7.8").unwrap().is_none());
    }

    #[test]
    fn a_client_is_refused_past_its_attempts_on_any_account_and_gets_successes_back() {
        let dir = tempfile::tempdir().unwrap();
        let (t, _) = throttle(&dir);
        for i in 0..PER_CLIENT {
            assert!(
                t.reserve(&format!("{i}@x.bj"), "1.2.3.4")
                    .unwrap()
                    .is_none()
            );
        }
        assert!(t.reserve("new@x.bj", "1.2.3.4").unwrap().is_some());
        assert!(t.reserve("new@x.bj", "9.9.9.9").unwrap().is_none());
        // One of the twenty signed in: the client has one attempt again.
        t.succeeded("0@x.bj", "1.2.3.4").unwrap();
        assert!(t.reserve("other@x.bj", "1.2.3.4").unwrap().is_none());
        assert!(t.reserve("another@x.bj", "1.2.3.4").unwrap().is_some());
    }

    #[test]
    fn a_released_attempt_is_given_back_and_a_refused_one_counts_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let (t, db) = throttle(&dir);
        for _ in 0..PER_ACCOUNT {
            assert!(t.reserve("a@x.bj", "1.2.3.4").unwrap().is_none());
        }
        for _ in 0..10 {
            assert!(t.reserve("a@x.bj", "1.2.3.4").unwrap().is_some());
        }
        let counts = db
            .read(|c| {
                c.query(
                    "SELECT failures FROM console_sign_in_failures ORDER BY failures",
                    &[],
                )
            })
            .unwrap();
        let counts: Vec<i64> = counts.iter().map(|r| r.int(0).unwrap()).collect();
        assert_eq!(counts, [PER_ACCOUNT, PER_ACCOUNT], "account and client");
        t.release("a@x.bj", "1.2.3.4").unwrap();
        assert!(t.reserve("a@x.bj", "1.2.3.4").unwrap().is_none());
        assert!(t.reserve("a@x.bj", "1.2.3.4").unwrap().is_some());
    }

    #[test]
    fn simultaneous_attempts_reserve_no_more_than_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let (t, _) = throttle(&dir);
        let granted: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..40)
                .map(|i| {
                    let t = t.clone();
                    s.spawn(move || {
                        t.reserve("a@x.bj", &format!("10.0.0.{i}"))
                            .unwrap()
                            .is_none()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap() as usize)
                .sum()
        });
        assert_eq!(granted, PER_ACCOUNT as usize);
    }

    #[test]
    fn ended_windows_count_nothing_and_their_rows_go_after_the_next_reservation() {
        let dir = tempfile::tempdir().unwrap();
        let (t, db) = throttle(&dir);
        for i in 0..PER_CLIENT {
            t.reserve(&format!("{i}@x.bj"), "1.2.3.4").unwrap();
        }
        // Every window began long ago.
        db.write(|tx| tx.execute("UPDATE console_sign_in_failures SET since_ms = 1", &[]))
            .unwrap();
        assert!(t.reserve("0@x.bj", "1.2.3.4").unwrap().is_none());
        t.reserve("other@x.bj", "5.6.7.8").unwrap();
        let rows = db
            .read(|c| {
                c.query(
                    "SELECT key_hash, failures FROM console_sign_in_failures",
                    &[],
                )
            })
            .unwrap();
        assert_eq!(
            rows.len(),
            4,
            "only the new reservations' accounts and clients remain"
        );
        assert!(
            rows.iter().all(|r| r.int(1).unwrap() == 1),
            "a count starts again after its window"
        );
        assert!(
            rows.iter()
                .all(|r| !r.text(0).unwrap().contains('@') && !r.text(0).unwrap().contains('.')),
            "digests, not emails or addresses"
        );
    }
}
