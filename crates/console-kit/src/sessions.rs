//! Console sessions, kept in the database: the cookie holds a random token,
//! the table its SHA-256. Every request reads its session with its user, so
//! a sign-out or a removed user ends the session on every node of a fleet
//! at the next request, with no cache to wait out.

use mmc_accounts::Environment;
use mmc_common::clock::system_now_ms;
use mmc_db::{SqlDb, StorageError};
use mmc_storage::sql_params;

use crate::format::Zone;
use crate::users::{Role, random_hex, sha256_hex};

/// A session lasts this long from sign-in, however active.
pub const SESSION_TTL_MS: u64 = 12 * 3600 * 1000;
pub const COOKIE: &str = "mmc_console";

/// A signed-in person, as a request sees them.
#[derive(Debug, Clone)]
pub struct Session {
    pub token_hash: String,
    pub user_id: String,
    pub email: String,
    pub role: Role,
    pub merchant_id: String,
    pub merchant_name: String,
    pub environment: Environment,
    /// Signed in with a second factor.
    pub mfa: bool,
    pub totp_enabled: bool,
    pub csrf: String,
    /// The merchant's maker-checker rule in the session's environment.
    pub require_second_approver: bool,
    /// Until when the person may approve no payout (their access was
    /// reset); 0: no hold.
    pub approvals_held_until_ms: u64,
    /// May enrol a second factor: opened by an invitation or reset link
    /// (the person who chose the password), or passed the current factor.
    pub may_enrol: bool,
    /// The merchant's time zone, that every time on the console is shown in.
    pub zone: Zone,
}

impl Session {
    /// The id components see as the caller's key: one per person, so
    /// maker-checker tells two people apart as it tells two keys apart.
    pub fn actor_id(&self) -> String {
        mmc_accounts::actor_id(&self.user_id)
    }

    /// The person, as maker-checker knows them: the same one behind the
    /// keys they made.
    pub fn person(&self) -> mmc_accounts::Person {
        mmc_accounts::Person {
            id: self.actor_id(),
            approvals_held_until_ms: self.approvals_held_until_ms,
        }
    }
}

/// A live session, as the Team page lists it (never its token).
#[derive(Debug, Clone)]
pub struct SessionView {
    pub token_hash: String,
    pub email: String,
    pub environment: String,
    pub client: Option<String>,
    pub created_ms: u64,
}

#[derive(Clone)]
pub struct Sessions {
    db: SqlDb,
}

impl Sessions {
    pub fn new(db: SqlDb) -> Sessions {
        Sessions { db }
    }

    /// A new session for `user_id`; returns the cookie's token.
    pub fn open(
        &self,
        user_id: &str,
        mfa: bool,
        client: Option<&str>,
    ) -> Result<String, StorageError> {
        self.insert(user_id, mfa, false, client)
    }

    /// The session a one-time link opens once its password is chosen: the
    /// only password-only session that may enrol a second factor.
    pub fn open_from_link(
        &self,
        user_id: &str,
        client: Option<&str>,
    ) -> Result<String, StorageError> {
        self.insert(user_id, false, true, client)
    }

    fn insert(
        &self,
        user_id: &str,
        mfa: bool,
        may_enrol: bool,
        client: Option<&str>,
    ) -> Result<String, StorageError> {
        let token = random_hex(32);
        let now = system_now_ms();
        self.db.write(|tx| {
            // Expired sessions go as a new one comes (sign-ins are rare
            // next to requests, and the index finds only the expired ones).
            tx.execute(
                "DELETE FROM console_sessions WHERE expires_ms <= ?1",
                sql_params![now as i64],
            )?;
            tx.execute(
                "INSERT INTO console_sessions (token_hash, user_id, csrf, environment, mfa, client, created_ms, expires_ms, may_enrol)
                 VALUES (?1, ?2, ?3, 'test', ?4, ?5, ?6, ?7, ?8)",
                sql_params![sha256_hex(&token), user_id, random_hex(16), mfa, client, now as i64, (now + SESSION_TTL_MS) as i64, may_enrol],
            )
        })?;
        Ok(token)
    }

    /// The live session a cookie's token names, with its user and merchant.
    pub fn find(&self, token: &str) -> Result<Option<Session>, StorageError> {
        if token.len() != 64 || !token.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let row = self.db.read(|c| {
            c.query_opt(
                "SELECT s.token_hash, u.id, u.email, u.role, u.merchant_id, m.name, s.environment, s.mfa,
                        u.totp_enabled, s.csrf, m.second_approver_test, m.second_approver_live,
                        u.approvals_held_until_ms, s.may_enrol, m.time_zone
                 FROM console_sessions s
                 JOIN console_users u ON u.id = s.user_id AND u.removed_ms IS NULL
                 JOIN merchants m ON m.id = u.merchant_id
                 WHERE s.token_hash = ?1 AND s.expires_ms > ?2",
                sql_params![sha256_hex(token), system_now_ms() as i64],
            )
        })?;
        let Some(r) = row else { return Ok(None) };
        let environment = Environment::parse(&r.text(6)?).unwrap_or(Environment::Test);
        let (test, live) = (
            r.opt_int(10)?.map(|v| v != 0),
            r.opt_int(11)?.map(|v| v != 0),
        );
        Ok(Some(Session {
            token_hash: r.text(0)?,
            user_id: r.text(1)?,
            email: r.text(2)?,
            role: Role::parse(&r.text(3)?).unwrap_or(Role::Support),
            merchant_id: r.text(4)?,
            merchant_name: r.text(5)?,
            environment,
            mfa: r.int(7)? != 0,
            totp_enabled: r.int(8)? != 0,
            csrf: r.text(9)?,
            // The API's default: off in test, on in live.
            require_second_approver: match environment {
                Environment::Test => test.unwrap_or(false),
                Environment::Live => live.unwrap_or(true),
            },
            approvals_held_until_ms: r.opt_int(12)?.unwrap_or(0).max(0) as u64,
            may_enrol: r.int(13)? != 0,
            zone: r
                .opt_text(14)?
                .and_then(|z| Zone::parse(&z))
                .unwrap_or(Zone::Utc),
        }))
    }

    pub fn close(&self, token_hash: &str) -> Result<(), StorageError> {
        self.db.write(|tx| {
            tx.execute(
                "DELETE FROM console_sessions WHERE token_hash = ?1",
                sql_params![token_hash],
            )
        })?;
        Ok(())
    }

    /// The merchant's live sessions, newest first.
    pub fn list(&self, merchant_id: &str) -> Result<Vec<SessionView>, StorageError> {
        self.db.read(|c| {
            c.query(
                "SELECT s.token_hash, u.email, s.environment, s.client, s.created_ms
                 FROM console_sessions s JOIN console_users u ON u.id = s.user_id AND u.removed_ms IS NULL
                 WHERE u.merchant_id = ?1 AND s.expires_ms > ?2 ORDER BY s.created_ms DESC LIMIT 200",
                sql_params![merchant_id, system_now_ms() as i64],
            )?
            .iter()
            .map(|r| {
                Ok(SessionView {
                    token_hash: r.text(0)?,
                    email: r.text(1)?,
                    environment: r.text(2)?,
                    client: r.opt_text(3)?,
                    created_ms: r.int(4)? as u64,
                })
            })
            .collect()
        })
    }

    /// Ends a session of one of the merchant's users: the email of the
    /// person it was, for the log to name; none if there was no such session.
    pub fn end(&self, merchant_id: &str, token_hash: &str) -> Result<Option<String>, StorageError> {
        self.db.write(|tx| {
            let Some(r) = tx.query_opt(
                "SELECT u.email FROM console_sessions s JOIN console_users u ON u.id = s.user_id
                 WHERE s.token_hash = ?1 AND u.merchant_id = ?2",
                sql_params![token_hash, merchant_id],
            )?
            else {
                return Ok(None);
            };
            tx.execute(
                "DELETE FROM console_sessions WHERE token_hash = ?1",
                sql_params![token_hash],
            )?;
            Ok(Some(r.text(0)?))
        })
    }

    pub fn set_environment(&self, token_hash: &str, env: Environment) -> Result<(), StorageError> {
        self.db.write(|tx| {
            tx.execute(
                "UPDATE console_sessions SET environment = ?2 WHERE token_hash = ?1",
                sql_params![token_hash, env.as_str()],
            )
        })?;
        Ok(())
    }

    /// The session passed the current second factor: it may enrol another.
    pub fn allow_enrolment(&self, token_hash: &str) -> Result<(), StorageError> {
        self.db.write(|tx| {
            tx.execute(
                "UPDATE console_sessions SET may_enrol = 1 WHERE token_hash = ?1",
                sql_params![token_hash],
            )
        })?;
        Ok(())
    }

    /// The session has now passed a second factor.
    pub fn mark_mfa(&self, token_hash: &str) -> Result<(), StorageError> {
        self.db.write(|tx| {
            tx.execute(
                "UPDATE console_sessions SET mfa = 1 WHERE token_hash = ?1",
                sql_params![token_hash],
            )
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::users::{Role, Users};

    #[test]
    fn sessions_end_when_expired_closed_or_their_user_removed_and_expired_rows_go() {
        let dir = tempfile::tempdir().unwrap();
        let (db, m) = crate::test_shop(&dir);
        let users = Users::new(db.clone());
        let sessions = Sessions::new(db.clone());
        let a = users.invite(&m.id, "a@shop.bj", Role::Owner).unwrap().user;
        let b = users
            .invite(&m.id, "b@shop.bj", Role::Support)
            .unwrap()
            .user;
        let old = sessions.open(&a.id, false, None).unwrap();
        let s = sessions.find(&old).unwrap().expect("live");
        assert_eq!((s.role, s.environment), (Role::Owner, Environment::Test));
        assert!(s.actor_id().starts_with("user_"));
        db.write(|tx| tx.execute("UPDATE console_sessions SET expires_ms = 1", &[]))
            .unwrap();
        assert!(sessions.find(&old).unwrap().is_none(), "expired");
        let fresh = sessions.open(&b.id, false, Some("10.0.0.1")).unwrap();
        let rows = db
            .read(|c| {
                c.query_one("SELECT COUNT(*) FROM console_sessions", &[])?
                    .int(0)
            })
            .unwrap();
        assert_eq!(rows, 1, "the expired row went with the next sign-in");
        assert_eq!(
            sessions.list(&m.id).unwrap()[0].client.as_deref(),
            Some("10.0.0.1")
        );
        users.remove(&m.id, &b.id).unwrap();
        assert!(sessions.find(&fresh).unwrap().is_none(), "removed user");
        assert!(sessions.find("not a token").unwrap().is_none());
    }
}
