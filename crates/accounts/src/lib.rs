//! Merchants and their API keys. A key (`mk_test_…` / `mk_live_…`: a prefix
//! secret scanners can find, 122 random bits after it) is shown once at
//! creation and stored only as its SHA-256; it fixes the merchant and the
//! environment. Keys made before the prefixes (bare UUIDs) still work.
//!
//! A key made in the console remembers the person who made it, and acts as
//! that person for maker-checker; a key made with `mmc keys` is a service
//! key, behind which the service knows no one. A console key has a name; every
//! key made now keeps its first characters to be told apart in lists, and
//! when it was last used (to the minute: see [`LAST_USED_EVERY`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use serde::Serialize;
use uuid::Uuid;

use crate::scopes::Scopes;
use mmc_common::clock::system_now_ms;
use mmc_db::{SqlDb, StorageError};
use mmc_storage::sql_params;

mod key_form;
pub mod scopes;
#[cfg(test)]
mod tests;

use key_form::{KEY_PREFIX_LEN, KeyDigest, hash_key, key_digest, key_environment};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Environment {
    Test,
    Live,
}

impl Environment {
    pub fn parse(s: &str) -> Option<Environment> {
        match s {
            "test" => Some(Environment::Test),
            "live" => Some(Environment::Live),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Environment::Test => "test",
            Environment::Live => "live",
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Merchant {
    pub id: String,
    pub name: String,
}

/// Returned once, at creation: the only time the key itself exists outside the caller.
#[derive(Debug, Clone, Serialize)]
pub struct CreatedKey {
    pub id: String,
    pub key: String,
    pub environment: Environment,
    pub merchant_id: String,
    /// What the key may do (see docs/keys.md).
    pub scopes: Vec<&'static str>,
}

/// A key as listed: what it may do and whether it still works.
#[derive(Debug, Clone)]
pub struct KeyInfo {
    pub id: String,
    /// What its maker called it (none: a service key, or one made before names).
    pub name: Option<String>,
    /// The key's first characters (`mk_test_3f9a1c0b`), to tell it apart;
    /// none for keys made before they were kept.
    pub prefix: Option<String>,
    /// When it last authenticated, to within [`LAST_USED_EVERY`]; none: never.
    pub last_used_ms: Option<u64>,
    pub scopes: Scopes,
    /// The console user who made it (`usr_…`); none for a service key.
    pub made_by: Option<String>,
    pub created_ms: u64,
    pub revoked_ms: Option<u64>,
}

/// What a valid key stands for.
#[derive(Debug, Clone)]
pub struct Principal {
    pub key_id: String,
    pub merchant_id: String,
    pub merchant_name: String,
    pub environment: Environment,
    pub scopes: Scopes,
    /// The person behind the key: who made it in the console (none for a
    /// service key made with the command line).
    pub person: Option<Person>,
    /// The merchant's maker-checker rule in this environment: a bulk batch
    /// is approved by another key than the one that created it, and by
    /// another person than the one behind that key.
    pub require_second_approver: bool,
}

/// A person as maker-checker knows them, whether they act in the console or
/// through a key they made there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    /// `user_…` ([`actor_id`] of the console user).
    pub id: String,
    /// Until when (Unix ms) they may approve no payout: their access was
    /// reset. 0: no hold.
    pub approvals_held_until_ms: u64,
}

/// The id the API records for console user `user_id` (`usr_…` → `user_…`),
/// as the caller of what they do in the console and behind their keys.
pub fn actor_id(user_id: &str) -> String {
    format!("user_{}", user_id.trim_start_matches("usr_"))
}

#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("merchant name must be 1 to 200 characters")]
    InvalidName,
    #[error("no merchant with id {0}")]
    UnknownMerchant(String),
    #[error("no API key with id {0}")]
    UnknownKey(String),
    #[error("a key's name must be 1 to {MAX_KEY_NAME_CHARS} characters")]
    InvalidKeyName,
    #[error(transparent)]
    Storage(#[from] StorageError),
}

/// How long a successful key lookup is reused, from the moment the lookup
/// began: a key revoked (from this process or the CLI) is refused by every
/// node within this time, and at once by the node that revoked it.
const KEY_CACHE_TTL: Duration = Duration::from_millis(500);
/// Entries kept at most; the cache is emptied when full.
const KEY_CACHE_MAX: usize = 10_000;

/// Longest name of a key.
pub const MAX_KEY_NAME_CHARS: usize = 64;
/// Characters of a key kept after its environment's prefix to show in
/// lists: 32 of its 128 random bits, too few to help guess the rest.
const SHOWN_KEY_CHARS: usize = 8;
/// A key's last use is written at most this often per node: the API's
/// requests are not each a write.
pub const LAST_USED_EVERY: Duration = Duration::from_secs(60);

/// A key's name as kept: trimmed, 1 to [`MAX_KEY_NAME_CHARS`] characters,
/// no control characters.
pub fn key_name(raw: &str) -> Result<String, AccountError> {
    let name = raw.trim();
    let chars = name.chars().count();
    if chars == 0 || chars > MAX_KEY_NAME_CHARS || name.chars().any(char::is_control) {
        return Err(AccountError::InvalidKeyName);
    }
    Ok(name.to_string())
}

/// What a person asked to make in the console: a key of that name, made by
/// the form whose idempotency key is `request` (a form submitted again
/// makes no second key).
pub struct KeyRequest<'a> {
    pub user_id: &'a str,
    pub name: &'a str,
    pub request: Option<&'a str>,
}

/// A person's key: made now (shown once), or made before by the same form.
#[derive(Debug)]
pub enum PersonKey {
    Made(CreatedKey),
    MadeBefore { id: String },
}

#[derive(Clone)]
pub struct Accounts {
    db: SqlDb,
    /// key digest → principal and when it was read. Only live keys are cached,
    /// so a key created a moment ago works at once. Keyed by the digest, not
    /// its hex: a hit allocates nothing for the key.
    cache: Arc<Mutex<HashMap<KeyDigest, (Principal, Instant)>>>,
    /// key id → when this node last wrote its last use.
    last_use_written: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Accounts {
    pub fn new(db: SqlDb) -> Accounts {
        Accounts {
            db,
            cache: Arc::default(),
            last_use_written: Arc::default(),
        }
    }

    pub fn create_merchant(&self, name: &str) -> Result<Merchant, AccountError> {
        let name = name.trim();
        if name.is_empty() || name.chars().count() > 200 {
            return Err(AccountError::InvalidName);
        }
        let m = Merchant {
            id: Uuid::new_v4().to_string(),
            name: name.to_string(),
        };
        self.db.write(|tx| {
            tx.execute(
                "INSERT INTO merchants (id, name, created_ms) VALUES (?1, ?2, ?3)",
                sql_params![&m.id, &m.name, system_now_ms() as i64],
            )
        })?;
        Ok(m)
    }

    pub fn merchant(&self, id: &str) -> Result<Option<Merchant>, AccountError> {
        let row = self.db.read(|c| {
            c.query_opt(
                "SELECT id, name FROM merchants WHERE id = ?1",
                sql_params![id],
            )
        })?;
        Ok(row.map(|r| merchant(&r)).transpose()?)
    }

    pub fn first_merchant(&self) -> Result<Option<Merchant>, AccountError> {
        let row = self.db.read(|c| {
            c.query_opt(
                "SELECT id, name FROM merchants ORDER BY created_ms LIMIT 1",
                &[],
            )
        })?;
        Ok(row.map(|r| merchant(&r)).transpose()?)
    }

    /// A key with every scope.
    pub fn create_key(
        &self,
        merchant_id: &str,
        environment: Environment,
    ) -> Result<CreatedKey, AccountError> {
        self.create_key_with(merchant_id, environment, None)
    }

    /// A service key limited to `scopes` (`None`: every scope, now and to come).
    pub fn create_key_with(
        &self,
        merchant_id: &str,
        environment: Environment,
        scopes: Option<Scopes>,
    ) -> Result<CreatedKey, AccountError> {
        self.insert_key(merchant_id, environment, scopes, None)
            .map(|made| match made {
                PersonKey::Made(k) => k,
                PersonKey::MadeBefore { .. } => unreachable!("a service key has no request"),
            })
    }

    /// A key made in the console by the user `asked.user_id` (`usr_…`): it
    /// acts as that person for maker-checker.
    pub fn create_person_key(
        &self,
        merchant_id: &str,
        environment: Environment,
        scopes: Scopes,
        asked: &KeyRequest,
    ) -> Result<PersonKey, AccountError> {
        let name = key_name(asked.name)?;
        self.insert_key(
            merchant_id,
            environment,
            Some(scopes),
            Some((asked.user_id, name.as_str(), asked.request)),
        )
    }

    /// The key a person's form (its idempotency key `request`) made, if any.
    pub fn requested_key(
        &self,
        merchant_id: &str,
        user_id: &str,
        request: &str,
    ) -> Result<Option<String>, AccountError> {
        let row = self.db.read(|c| {
            c.query_opt(
                "SELECT id FROM api_keys WHERE merchant_id = ?1 AND created_by_user = ?2 AND request_key = ?3",
                sql_params![merchant_id, user_id, request],
            )
        })?;
        Ok(row.map(|r| r.text(0)).transpose()?)
    }

    /// `person`: (user id, name, form's idempotency key) of a console key.
    fn insert_key(
        &self,
        merchant_id: &str,
        environment: Environment,
        scopes: Option<Scopes>,
        person: Option<(&str, &str, Option<&str>)>,
    ) -> Result<PersonKey, AccountError> {
        let (made_by, name, request) = match person {
            Some((user, name, request)) => (Some(user), Some(name), request),
            None => (None, None, None),
        };
        let key = format!("mk_{}_{}", environment.as_str(), Uuid::new_v4().simple());
        let shown_prefix = key[..KEY_PREFIX_LEN + SHOWN_KEY_CHARS].to_string();
        let hash = hash_key(&key).expect("a key we made has the shape of one");
        let created = CreatedKey {
            id: format!("key_{}", Uuid::new_v4().simple()),
            key,
            environment,
            merchant_id: merchant_id.to_string(),
            scopes: scopes
                .unwrap_or_else(Scopes::all)
                .iter()
                .map(|s| s.as_str())
                .collect(),
        };
        let stored = scopes.map(|s| s.to_string());
        let result = self.db.write(|tx| {
            let exists = tx.query_opt("SELECT 1 FROM merchants WHERE id = ?1", sql_params![merchant_id])?;
            if exists.is_none() {
                return Ok(None);
            }
            if let (Some(user), Some(request)) = (made_by, request) {
                // The same form sent twice at once: the second waits, then finds the first's key.
                tx.lock(&format!("api_keys:{merchant_id}"))?;
                let before = tx.query_opt(
                    "SELECT id FROM api_keys WHERE merchant_id = ?1 AND created_by_user = ?2 AND request_key = ?3",
                    sql_params![merchant_id, user, request],
                )?;
                if let Some(r) = before {
                    return Ok(Some(PersonKey::MadeBefore { id: r.text(0)? }));
                }
            }
            tx.execute(
                "INSERT INTO api_keys (id, key_hash, merchant_id, environment, created_ms, scopes, created_by_user, name, shown_prefix, request_key)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                sql_params![&created.id, &hash, merchant_id, environment.as_str(), system_now_ms() as i64, &stored, made_by, name, &shown_prefix, request],
            )?;
            Ok(Some(PersonKey::Made(created.clone())))
        })?;
        result.ok_or_else(|| AccountError::UnknownMerchant(merchant_id.to_string()))
    }

    /// Turns the maker-checker rule on or off for a merchant's environment.
    /// Cached principals carry the old value for at most [`KEY_CACHE_TTL`].
    pub fn set_require_second_approver(
        &self,
        merchant_id: &str,
        environment: Environment,
        on: bool,
    ) -> Result<(), AccountError> {
        let column = match environment {
            Environment::Test => "second_approver_test",
            Environment::Live => "second_approver_live",
        };
        let changed = self.db.write(|tx| {
            tx.execute(
                &format!("UPDATE merchants SET {column} = ?2 WHERE id = ?1"),
                sql_params![merchant_id, on],
            )
        })?;
        if changed == 0 {
            return Err(AccountError::UnknownMerchant(merchant_id.to_string()));
        }
        self.cache
            .lock()
            .retain(|_, (p, _)| p.merchant_id != merchant_id);
        Ok(())
    }

    /// The IANA zone the console shows the merchant's times in.
    pub fn set_time_zone(&self, merchant_id: &str, zone: &str) -> Result<(), AccountError> {
        let changed = self.db.write(|tx| {
            tx.execute(
                "UPDATE merchants SET time_zone = ?2 WHERE id = ?1",
                sql_params![merchant_id, zone],
            )
        })?;
        if changed == 0 {
            return Err(AccountError::UnknownMerchant(merchant_id.to_string()));
        }
        Ok(())
    }

    pub fn revoke_key(&self, key_id: &str) -> Result<(), AccountError> {
        self.revoke(key_id, None)
    }

    /// [`Accounts::revoke_key`] for a key of `merchant_id` only (the console's).
    pub fn revoke_merchant_key(&self, merchant_id: &str, key_id: &str) -> Result<(), AccountError> {
        self.revoke(key_id, Some(merchant_id))
    }

    fn revoke(&self, key_id: &str, merchant_id: Option<&str>) -> Result<(), AccountError> {
        let now = system_now_ms() as i64;
        let changed = self.db.write(|tx| match merchant_id {
            None => tx.execute(
                "UPDATE api_keys SET revoked_ms = COALESCE(revoked_ms, ?2) WHERE id = ?1",
                sql_params![key_id, now],
            ),
            Some(m) => tx.execute(
                "UPDATE api_keys SET revoked_ms = COALESCE(revoked_ms, ?2) WHERE id = ?1 AND merchant_id = ?3",
                sql_params![key_id, now, m],
            ),
        })?;
        if changed == 0 {
            return Err(AccountError::UnknownKey(key_id.to_string()));
        }
        self.cache.lock().retain(|_, (p, _)| p.key_id != key_id);
        Ok(())
    }

    /// A merchant's keys in one environment, newest first (never the key itself).
    pub fn list_keys(
        &self,
        merchant_id: &str,
        environment: Environment,
    ) -> Result<Vec<KeyInfo>, AccountError> {
        Ok(self.db.read(|c| {
            c.query(
                "SELECT id, scopes, created_ms, revoked_ms, created_by_user, name, shown_prefix, last_used_ms
                 FROM api_keys WHERE merchant_id = ?1 AND environment = ?2 ORDER BY created_ms DESC, id",
                sql_params![merchant_id, environment.as_str()],
            )?
            .iter()
            .map(|r| {
                Ok(KeyInfo {
                    id: r.text(0)?,
                    scopes: Scopes::from_stored(r.opt_text(1)?.as_deref()),
                    created_ms: r.int(2)? as u64,
                    revoked_ms: r.opt_int(3)?.map(|v| v as u64),
                    made_by: r.opt_text(4)?,
                    name: r.opt_text(5)?,
                    prefix: r.opt_text(6)?,
                    last_used_ms: r.opt_int(7)?.map(|v| v as u64),
                })
            })
            .collect::<Result<Vec<_>, StorageError>>()
        })?)
    }

    /// The principal of a presented key, if it is a live (unrevoked) key.
    /// A lookup is reused for [`KEY_CACHE_TTL`] (it was a third of a GET).
    pub fn authenticate(&self, presented: &str) -> Result<Option<Principal>, AccountError> {
        if let Some(known) = self.cached(presented) {
            return Ok(known);
        }
        let Some(digest) = key_digest(presented) else {
            return Ok(None);
        };
        // Read before the lookup: the entry must not outlive a revocation
        // committed while the lookup ran by more than the TTL.
        let read_at = Instant::now();
        let found = self
            .lookup(&hex::encode(digest))?
            // A prefix that names the other environment is not this key.
            .filter(|p| key_environment(presented.trim()).is_none_or(|e| e == p.environment));
        if let Some(p) = &found {
            {
                let mut cache = self.cache.lock();
                if cache.len() >= KEY_CACHE_MAX {
                    cache.clear();
                }
                cache.insert(digest, (p.clone(), read_at));
            }
            // Here, not on a cache hit: a key in use is looked up again
            // every KEY_CACHE_TTL, often enough for a time to the minute.
            self.note_use(&p.key_id);
        }
        Ok(found)
    }

    /// Writes that `key_id` was used now, unless this node wrote it less
    /// than [`LAST_USED_EVERY`] ago; the write runs off the request (on
    /// the runtime's blocking threads when there is one).
    fn note_use(&self, key_id: &str) {
        {
            let mut written = self.last_use_written.lock();
            if written
                .get(key_id)
                .is_some_and(|at| at.elapsed() < LAST_USED_EVERY)
            {
                return;
            }
            if written.len() >= KEY_CACHE_MAX {
                written.clear();
            }
            written.insert(key_id.to_string(), Instant::now());
        }
        let (db, key_id) = (self.db.clone(), key_id.to_string());
        let write = move || {
            let now = system_now_ms() as i64;
            let every = LAST_USED_EVERY.as_millis() as i64;
            // Another node may have written it within the minute.
            let written = db.write(|tx| {
                tx.execute(
                    "UPDATE api_keys SET last_used_ms = ?2 WHERE id = ?1
                     AND (last_used_ms IS NULL OR last_used_ms <= ?3)",
                    sql_params![&key_id, now, now - every],
                )
            });
            if let Err(e) = written {
                // A time of last use is worth no refused request.
                tracing::warn!(key_id, error = %e, "cannot record the key's last use");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => drop(rt.spawn_blocking(write)),
            Err(_) => write(),
        }
    }

    /// What is known of a key without the database: `Some(None)` for a key
    /// that cannot be one, `Some(Some(_))` for one looked up within the
    /// TTL, `None` when only a lookup can tell.
    pub fn cached(&self, presented: &str) -> Option<Option<Principal>> {
        let Some(digest) = key_digest(presented) else {
            return Some(None);
        };
        let cache = self.cache.lock();
        let (p, at) = cache.get(&digest)?;
        (at.elapsed() < KEY_CACHE_TTL).then(|| Some(p.clone()))
    }

    fn lookup(&self, hash: &str) -> Result<Option<Principal>, AccountError> {
        // A key a person made stands for them while they are on the team.
        let row = self.db.read(|c| {
            c.query_opt(
                "SELECT k.id, k.merchant_id, k.environment, m.name, k.scopes,
                        m.second_approver_test, m.second_approver_live,
                        k.created_by_user, u.approvals_held_until_ms
                 FROM api_keys k JOIN merchants m ON m.id = k.merchant_id
                 LEFT JOIN console_users u ON u.id = k.created_by_user
                 WHERE k.key_hash = ?1 AND k.revoked_ms IS NULL AND u.removed_ms IS NULL",
                sql_params![hash],
            )
        })?;
        let Some(r) = row else { return Ok(None) };
        let environment = Environment::parse(&r.text(2)?).unwrap_or(Environment::Test);
        let scopes = r.opt_text(4)?;
        let (test, live) = (r.opt_int(5)?.map(|v| v != 0), r.opt_int(6)?.map(|v| v != 0));
        Ok(Some(Principal {
            key_id: r.text(0)?,
            merchant_id: r.text(1)?,
            merchant_name: r.text(3)?,
            environment,
            scopes: Scopes::from_stored(scopes.as_deref()),
            person: r
                .opt_text(7)?
                .map(|user| -> Result<Person, StorageError> {
                    Ok(Person {
                        id: actor_id(&user),
                        approvals_held_until_ms: r.opt_int(8)?.unwrap_or(0).max(0) as u64,
                    })
                })
                .transpose()?,
            // Off in test, on in live, unless the merchant said otherwise.
            require_second_approver: match environment {
                Environment::Test => test.unwrap_or(false),
                Environment::Live => live.unwrap_or(true),
            },
        }))
    }
}

fn merchant(r: &mmc_db::Row) -> Result<Merchant, StorageError> {
    Ok(Merchant {
        id: r.text(0)?,
        name: r.text(1)?,
    })
}
