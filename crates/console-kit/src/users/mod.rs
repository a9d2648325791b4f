//! Console users: people of one merchant, each with a role. A user starts
//! as an invitation (a one-time sign-in link, stored as its SHA-256 and
//! valid [`INVITE_TTL_MS`]) and chooses a password there; passwords are kept
//! as Argon2id hashes. Removing a user ends their sessions in the same
//! transaction, so every node refuses them from the next request.

use argon2::Argon2;
use argon2::password_hash::rand_core::{OsRng, RngCore};
use argon2::password_hash::{PasswordHash, PasswordHasher, SaltString};
use serde::Serialize;
use sha2::{Digest, Sha256};

use mmc_accounts::scopes::{Scope, Scopes};
use mmc_common::clock::system_now_ms;
use mmc_db::{Row, SqlConn, SqlDb, StorageError};
use mmc_storage::sql::Value;
use mmc_storage::sql_params;

mod email;
mod second_factor;
mod shown_once;
#[cfg(test)]
mod tests;

use email::normalize_email;
pub use email::{canonical_email, lookup_email};
pub use second_factor::{RECOVERY_CODES, recovery_code_shape};

/// How long an invitation link signs in.
pub const INVITE_TTL_MS: u64 = 72 * 3600 * 1000;
/// How long a person whose access was reset approves no payout: whoever
/// received the new link in their place has no time to pay out with it
/// before the person notices they are locked out.
pub const APPROVAL_HOLD_MS: u64 = 24 * 3600 * 1000;
pub const MIN_PASSWORD_CHARS: usize = 12;
const MAX_PASSWORD_CHARS: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Owner,
    Developer,
    Finance,
    Support,
}

impl Role {
    pub const ALL: [Role; 4] = [Role::Owner, Role::Developer, Role::Finance, Role::Support];

    pub fn parse(s: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == s)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::Developer => "developer",
            Role::Finance => "finance",
            Role::Support => "support",
        }
    }

    /// What the role may do, as the API scopes of a key: the console's
    /// actions pass the same scope check a key's requests do.
    pub fn scopes(self) -> Scopes {
        let list: &[Scope] = match self {
            Role::Owner => &Scope::ALL,
            // Keys, webhooks and their deliveries; no money movement.
            Role::Developer => &[Scope::PaymentsRead, Scope::WebhooksManage],
            Role::Finance => &[
                Scope::PaymentsRead,
                Scope::PaymentsWrite,
                Scope::BulkCreate,
                Scope::BulkApprove,
            ],
            // Reads, and resending a notification the merchant's system missed.
            Role::Support => &[Scope::PaymentsRead, Scope::WebhooksResend],
        };
        let names: Vec<&str> = list.iter().map(|s| s.as_str()).collect();
        Scopes::parse(&names.join(",")).expect("every role has a scope")
    }

    /// Roles that move money sign in with a second factor to work in live.
    pub fn needs_second_factor_in_live(self) -> bool {
        matches!(self, Role::Owner | Role::Finance)
    }

    pub fn manages_users(self) -> bool {
        self == Role::Owner
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct User {
    pub id: String,
    pub merchant_id: String,
    pub email: String,
    pub role: Role,
    pub totp_enabled: bool,
    /// Still an invitation: no password chosen yet.
    pub invited: bool,
    pub created_ms: u64,
}

/// Returned once: the only time the link exists outside the invitee's hands.
#[derive(Debug, Clone, Serialize)]
pub struct Invitation {
    pub user: User,
    /// The path of the one-time link (`/console/invite/<token>`).
    pub path: String,
    pub expires_ms: u64,
    /// After a reset: until when the person approves no payout.
    pub approvals_held_until_ms: Option<u64>,
}

#[derive(Debug, thiserror::Error)]
pub enum UserError {
    #[error("email must look like name@example.com (at most 254 characters)")]
    InvalidEmail,
    #[error("a console user with this email already exists")]
    EmailTaken,
    #[error("no merchant with id {0}")]
    UnknownMerchant(String),
    #[error("role must be one of owner, developer, finance, support")]
    InvalidRole,
    #[error("the password must be {MIN_PASSWORD_CHARS} to {MAX_PASSWORD_CHARS} characters")]
    WeakPassword,
    #[error("this invitation link is unknown, used or expired")]
    InvalidInvitation,
    #[error("no such user")]
    UnknownUser,
    #[error("the last owner cannot be removed")]
    LastOwner,
    #[error("the current password is wrong")]
    WrongPassword,
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// Random bytes as hex: session tokens, CSRF tokens, invitation tokens.
pub fn random_hex(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    OsRng.fill_bytes(&mut buf);
    hex::encode(buf)
}

pub fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// Argon2id, v19, m = 7 MiB, t = 5, p = 1: the configuration OWASP's
/// password storage guide gives as equal in strength to m = 19 MiB, t = 2
/// (the argon2 crate's default). A check costs about the same CPU and a
/// third of the memory, so the few checks a node runs at once fit in it.
/// A hash keeps its own parameters: one made with others still verifies.
fn hasher() -> Argon2<'static> {
    let params = argon2::Params::new(7 * 1024, 5, 1, None).expect("valid Argon2 parameters");
    Argon2::new(argon2::Algorithm::Argon2id, argon2::Version::V0x13, params)
}

/// Whether `stored` was made with [`hasher`]'s algorithm and parameters.
fn made_by_hasher(stored: &str) -> bool {
    let current = hasher();
    PasswordHash::new(stored).is_ok_and(|h| {
        h.algorithm == argon2::Algorithm::Argon2id.ident()
            && h.version == Some(argon2::Version::V0x13.into())
            && argon2::Params::try_from(&h).is_ok_and(|p| {
                let want = current.params();
                (p.m_cost(), p.t_cost(), p.p_cost())
                    == (want.m_cost(), want.t_cost(), want.p_cost())
            })
    })
}

pub fn hash_password(password: &str) -> Result<String, UserError> {
    let chars = password.chars().count();
    if !(MIN_PASSWORD_CHARS..=MAX_PASSWORD_CHARS).contains(&chars) {
        return Err(UserError::WeakPassword);
    }
    let salt = SaltString::generate(&mut OsRng);
    hasher()
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| UserError::Storage(StorageError::Unavailable(format!("argon2: {e}"))))
}

/// The argon2 crate's own verification, which [`password_matches_in`] must agree with.
#[cfg(test)]
fn password_matches(stored: &str, password: &str) -> bool {
    use argon2::password_hash::PasswordVerifier;
    PasswordHash::new(stored)
        .is_ok_and(|h| hasher().verify_password(password.as_bytes(), &h).is_ok())
}

/// [`password_matches`], computed in `memory`: one Argon2 run's blocks,
/// kept from check to check, so that checks allocate (and the allocator
/// keeps) no 19 MiB each.
fn password_matches_in(stored: &str, password: &str, memory: &mut Vec<argon2::Block>) -> bool {
    let Ok(h) = PasswordHash::new(stored) else {
        return false;
    };
    let (Some(salt), Some(expected), Ok(params), Ok(algorithm)) = (
        h.salt,
        h.hash,
        argon2::Params::try_from(&h),
        argon2::Algorithm::try_from(h.algorithm),
    ) else {
        return false;
    };
    let Ok(version) = h.version.map(argon2::Version::try_from).transpose() else {
        return false;
    };
    let mut salt_bytes = [0u8; 64];
    let Ok(salt) = salt.decode_b64(&mut salt_bytes) else {
        return false;
    };
    memory.resize(params.block_count(), argon2::Block::default());
    let argon2 = Argon2::new(algorithm, version.unwrap_or_default(), params);
    let computed = argon2::password_hash::Output::init_with(expected.len(), |out| {
        Ok(argon2.hash_password_into_with_memory(
            password.as_bytes(),
            salt,
            out,
            &mut memory[..],
        )?)
    });
    // Output's comparison takes the same time wherever the bytes differ.
    computed.is_ok_and(|c| c == expected)
}

/// A hash to verify against when the account does not exist, so an unknown
/// email costs what a wrong password costs (no timing oracle on accounts).
fn decoy_hash() -> &'static str {
    static DECOY: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DECOY.get_or_init(|| hash_password("decoy password, never used").expect("hashes"))
}

const USER_COLUMNS: &str = "id, merchant_id, email, role, totp_enabled,
     CASE WHEN password_hash IS NULL THEN 1 ELSE 0 END, created_ms";

fn user(r: &Row) -> Result<User, StorageError> {
    Ok(User {
        id: r.text(0)?,
        merchant_id: r.text(1)?,
        email: r.text(2)?,
        // A role this build does not know grants the least.
        role: Role::parse(&r.text(3)?).unwrap_or(Role::Support),
        totp_enabled: r.int(4)? != 0,
        invited: r.int(5)? != 0,
        created_ms: r.int(6)? as u64,
    })
}

/// A user's enabled second factor: its secret, and the last step a code
/// of it was accepted for (a code of that step or an earlier one is spent).
pub struct Factor {
    pub secret: Vec<u8>,
    pub last_step: Option<u64>,
}

/// What signing in with a password found.
pub struct Credentials {
    pub user: User,
    pub totp_secret: Option<Vec<u8>>,
    pub totp_last_step: Option<u64>,
}

#[derive(Clone)]
pub struct Users {
    db: SqlDb,
}

impl Users {
    pub fn new(db: SqlDb) -> Users {
        Users { db }
    }

    /// A new user of `merchant_id`, invited: the link signs them in once.
    /// A person removed from this merchant and invited again is the same
    /// user (the same id), not a second one: whoever they were on a batch
    /// (its maker, say) they still are, so they cannot approve it as
    /// someone else. They come back with nothing of before: no password,
    /// second factor, session or key.
    pub fn invite(
        &self,
        merchant_id: &str,
        email: &str,
        role: Role,
    ) -> Result<Invitation, UserError> {
        let email = normalize_email(email)?;
        let token = random_hex(32);
        let now = system_now_ms();
        let user = User {
            id: format!("usr_{}", uuid::Uuid::new_v4().simple()),
            merchant_id: merchant_id.to_string(),
            email,
            role,
            totp_enabled: false,
            invited: true,
            created_ms: now,
        };
        let expires_ms = now + INVITE_TTL_MS;
        let before = self.db.write(|tx| {
            if tx.query_opt("SELECT 1 FROM merchants WHERE id = ?1", sql_params![merchant_id])?.is_none() {
                return Ok(Err(UserError::UnknownMerchant(merchant_id.to_string())));
            }
            // Invitations of one email through several nodes take turns.
            tx.lock(&format!("console_users:{}", user.email))?;
            if tx.query_opt("SELECT 1 FROM console_users WHERE email = ?1 AND removed_ms IS NULL", sql_params![&user.email])?.is_some() {
                return Ok(Err(UserError::EmailTaken));
            }
            let before = tx.query_opt(
                "SELECT id, created_ms FROM console_users WHERE email = ?1 AND merchant_id = ?2
                 ORDER BY removed_ms DESC, id LIMIT 1",
                sql_params![&user.email, merchant_id],
            )?;
            let Some(before) = before else {
                tx.execute(
                    "INSERT INTO console_users (id, merchant_id, email, role, invite_hash, invite_expires_ms, created_ms)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                    sql_params![&user.id, merchant_id, &user.email, role.as_str(), sha256_hex(&token), expires_ms as i64, now as i64],
                )?;
                return Ok(Ok(None));
            };
            let (id, created_ms) = (before.text(0)?, before.int(1)?);
            tx.execute(
                "UPDATE console_users SET role = ?2, password_hash = NULL, invite_hash = ?3, invite_expires_ms = ?4,
                 totp_secret = NULL, totp_enabled = 0, totp_last_step = NULL, totp_last_purpose = NULL,
                 removed_ms = NULL WHERE id = ?1",
                sql_params![&id, role.as_str(), sha256_hex(&token), expires_ms as i64],
            )?;
            // A session or codes written while the removal ran come back with nothing.
            tx.execute("DELETE FROM console_sessions WHERE user_id = ?1", sql_params![&id])?;
            tx.execute("DELETE FROM console_recovery_codes WHERE user_id = ?1", sql_params![&id])?;
            // Keys made before the removal (by a version that left them) stay ended.
            revoke_keys_of(tx, &id, now)?;
            Ok(Ok(Some((id, created_ms as u64))))
        })??;
        let user = match before {
            Some((id, created_ms)) => User {
                id,
                created_ms,
                ..user
            },
            None => user,
        };
        Ok(Invitation {
            user,
            path: format!("/console/invite/{token}"),
            expires_ms,
            approvals_held_until_ms: None,
        })
    }

    /// A lost password or second factor: both are cleared, every session
    /// of the user ends, a new one-time link lets them choose a password,
    /// and they approve no payout for [`APPROVAL_HOLD_MS`].
    pub fn reset(&self, email: &str) -> Result<Invitation, UserError> {
        let email = normalize_email(email)?;
        self.reset_where("email = ?1", sql_params![&email])
    }

    /// [`Users::reset`] of a member of `merchant_id`, as their owner asks
    /// it from the console (a person of another merchant is unknown here).
    pub fn reset_member(&self, merchant_id: &str, user_id: &str) -> Result<Invitation, UserError> {
        self.reset_where(
            "id = ?1 AND merchant_id = ?2",
            sql_params![user_id, merchant_id],
        )
    }

    fn reset_where(&self, filter: &str, params: &[Value]) -> Result<Invitation, UserError> {
        let token = random_hex(32);
        let now = system_now_ms();
        let expires_ms = now + INVITE_TTL_MS;
        let held_until = now + APPROVAL_HOLD_MS;
        let found = self.db.write(|tx| {
            let Some(r) = tx.query_opt(
                &format!("SELECT {USER_COLUMNS} FROM console_users WHERE {filter} AND removed_ms IS NULL"),
                params,
            )?
            else {
                return Ok(None);
            };
            let found = user(&r)?;
            tx.execute(
                "UPDATE console_users SET password_hash = NULL, totp_secret = NULL, totp_enabled = 0,
                 totp_last_step = NULL, invite_hash = ?2, invite_expires_ms = ?3,
                 approvals_held_until_ms = ?4 WHERE id = ?1",
                sql_params![&found.id, sha256_hex(&token), expires_ms as i64, held_until as i64],
            )?;
            tx.execute("DELETE FROM console_sessions WHERE user_id = ?1", sql_params![&found.id])?;
            tx.execute("DELETE FROM console_recovery_codes WHERE user_id = ?1", sql_params![&found.id])?;
            Ok(Some(found))
        })?;
        let user = found.ok_or(UserError::UnknownUser)?;
        Ok(Invitation {
            user: User {
                invited: true,
                totp_enabled: false,
                ..user
            },
            path: format!("/console/invite/{token}"),
            expires_ms,
            approvals_held_until_ms: Some(held_until),
        })
    }

    /// The merchant's people who approve no payout until a time after `now`
    /// (their access was reset): user id → until when.
    pub fn approval_holds(
        &self,
        merchant_id: &str,
        now: u64,
    ) -> Result<std::collections::HashMap<String, u64>, UserError> {
        Ok(self.db.read(|c| {
            c.query(
                "SELECT id, approvals_held_until_ms FROM console_users
                 WHERE merchant_id = ?1 AND removed_ms IS NULL AND approvals_held_until_ms > ?2",
                sql_params![merchant_id, now as i64],
            )?
            .iter()
            .map(|r| Ok((r.text(0)?, r.int(1)? as u64)))
            .collect::<Result<_, StorageError>>()
        })?)
    }

    /// The user an invitation token names, if it is still valid.
    pub fn invited(&self, token: &str) -> Result<Option<User>, UserError> {
        let row = self.db.read(|c| {
            c.query_opt(
                &format!("SELECT {USER_COLUMNS} FROM console_users WHERE invite_hash = ?1 AND removed_ms IS NULL AND invite_expires_ms > ?2"),
                sql_params![sha256_hex(token), system_now_ms() as i64],
            )
        })?;
        Ok(row.map(|r| user(&r)).transpose()?)
    }

    /// Sets the password an invitation asked for; the link is spent.
    pub fn accept(&self, token: &str, password: &str) -> Result<User, UserError> {
        let hash = hash_password(password)?;
        let found = self.invited(token)?.ok_or(UserError::InvalidInvitation)?;
        let changed = self.db.write(|tx| {
            tx.execute(
                "UPDATE console_users SET password_hash = ?2, invite_hash = NULL, invite_expires_ms = NULL
                 WHERE id = ?1 AND invite_hash = ?3 AND removed_ms IS NULL",
                sql_params![&found.id, &hash, sha256_hex(token)],
            )
        })?;
        if changed == 0 {
            return Err(UserError::InvalidInvitation);
        }
        Ok(User {
            invited: false,
            ..found
        })
    }

    /// The user whose email and password these are (Argon2id verification
    /// runs whether or not the email is known).
    pub fn check_password(
        &self,
        email: &str,
        password: &str,
    ) -> Result<Option<Credentials>, UserError> {
        self.check_password_in(email, password, &mut Vec::new())
    }

    /// [`Users::check_password`], its Argon2 run computed in `memory`
    /// (kept by the caller from one check to the next).
    pub fn check_password_in(
        &self,
        email: &str,
        password: &str,
        memory: &mut Vec<argon2::Block>,
    ) -> Result<Option<Credentials>, UserError> {
        let email = lookup_email(email);
        let row = self.db.read(|c| {
            c.query_opt(
                &format!("SELECT {USER_COLUMNS}, password_hash, totp_secret, totp_enabled, totp_last_step FROM console_users WHERE email = ?1 AND removed_ms IS NULL"),
                sql_params![&email],
            )
        })?;
        let stored = row.as_ref().and_then(|r| r.opt_text(7).ok().flatten());
        let ok = password_matches_in(stored.as_deref().unwrap_or(decoy_hash()), password, memory);
        let (Some(r), true, Some(stored)) = (row, ok, stored) else {
            return Ok(None);
        };
        let user = user(&r)?;
        if !made_by_hasher(&stored) {
            // Hashed with other parameters (an earlier default): hashed
            // again with the current ones now that the password is known.
            let rehashed = hash_password(password)?;
            self.db.write(|tx| {
                tx.execute(
                    "UPDATE console_users SET password_hash = ?2 WHERE id = ?1 AND password_hash = ?3",
                    sql_params![&user.id, &rehashed, &stored],
                )
            })?;
        }
        let enabled = r.int(9)? != 0;
        Ok(Some(Credentials {
            user,
            totp_secret: if enabled {
                r.opt_text(8)?.and_then(|s| super::totp::from_base32(&s))
            } else {
                None
            },
            totp_last_step: r.opt_int(10)?.map(|s| s as u64),
        }))
    }

    /// A signed-in user's new password, once the current one is checked;
    /// false when it is not theirs. Every other session of the user ends in
    /// the same write: a session someone else holds does not outlive the
    /// change. `keep_session` is the hash of the session that asked.
    pub fn change_password(
        &self,
        user_id: &str,
        email: &str,
        current: &str,
        new: &str,
        keep_session: &str,
    ) -> Result<bool, UserError> {
        // The current password first: a wrong guess costs one Argon2 run, not two.
        match self.check_password(email, current)? {
            Some(cred) if cred.user.id == user_id => {}
            _ => return Ok(false),
        }
        let hash = hash_password(new)?;
        self.db.write(|tx| {
            tx.execute(
                "UPDATE console_users SET password_hash = ?2 WHERE id = ?1 AND removed_ms IS NULL",
                sql_params![user_id, &hash],
            )?;
            tx.execute(
                "DELETE FROM console_sessions WHERE user_id = ?1 AND token_hash <> ?2",
                sql_params![user_id, keep_session],
            )
        })?;
        Ok(true)
    }

    pub fn list(&self, merchant_id: &str) -> Result<Vec<User>, UserError> {
        Ok(self.db.read(|c| {
            c.query(
                &format!("SELECT {USER_COLUMNS} FROM console_users WHERE merchant_id = ?1 AND removed_ms IS NULL ORDER BY created_ms, id"),
                sql_params![merchant_id],
            )?
            .iter()
            .map(user)
            .collect::<Result<Vec<_>, _>>()
        })?)
    }

    /// Removes a user of `merchant_id` and ends every session of theirs.
    pub fn remove(&self, merchant_id: &str, user_id: &str) -> Result<User, UserError> {
        let removed = self.db.write(|tx| {
            tx.lock(&format!("console_owners:{merchant_id}"))?;
            let Some(r) = tx.query_opt(
                &format!("SELECT {USER_COLUMNS} FROM console_users WHERE id = ?1 AND merchant_id = ?2 AND removed_ms IS NULL"),
                sql_params![user_id, merchant_id],
            )?
            else {
                return Ok(Err(UserError::UnknownUser));
            };
            let found = user(&r)?;
            if found.role == Role::Owner {
                let owners = tx
                    .query_one(
                        "SELECT COUNT(*) FROM console_users WHERE merchant_id = ?1 AND role = 'owner' AND removed_ms IS NULL AND password_hash IS NOT NULL",
                        sql_params![merchant_id],
                    )?
                    .int(0)?;
                if owners <= 1 && !found.invited {
                    return Ok(Err(UserError::LastOwner));
                }
            }
            tx.execute(
                "UPDATE console_users SET removed_ms = ?2, invite_hash = NULL WHERE id = ?1",
                sql_params![user_id, system_now_ms() as i64],
            )?;
            tx.execute("DELETE FROM console_sessions WHERE user_id = ?1", sql_params![user_id])?;
            tx.execute("DELETE FROM console_recovery_codes WHERE user_id = ?1", sql_params![user_id])?;
            // The keys this person made stand for them: they end with them.
            revoke_keys_of(tx, user_id, system_now_ms())?;
            Ok(Ok(found))
        })??;
        Ok(removed)
    }
}

/// Revokes every key `user_id` made in the console that is still in use.
fn revoke_keys_of(tx: &mut dyn SqlConn, user_id: &str, now: u64) -> Result<(), StorageError> {
    tx.execute(
        "UPDATE api_keys SET revoked_ms = ?2 WHERE created_by_user = ?1 AND revoked_ms IS NULL",
        sql_params![user_id, now as i64],
    )?;
    Ok(())
}
