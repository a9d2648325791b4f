//! Operating the adapters without a restart: deploy a new version (compiled,
//! linked, described and smoke-tested before it is swapped in atomically),
//! roll back, list; deployed versions persist across restarts. Plus the
//! audit trail of adapter calls. Served under `/admin/v1` with its own token.

pub mod api;
pub mod audit;
pub mod token;

use std::path::PathBuf;
use std::sync::Arc;

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use crate::capabilities::clock::system_now_ms;
use crate::db::{Sqlite, StorageError};
use crate::runtime::bindings::adapter_types::Inbound;
use crate::runtime::{Kind, LoadError, Loaded, Runtime};

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS component_versions (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT NOT NULL,
    hash         TEXT NOT NULL,
    bytes        BLOB NOT NULL,
    deployed_ms  INTEGER NOT NULL,
    active       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS component_versions_name ON component_versions (name, id);
"#;

#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    #[error("adapter name must be 1 to 64 characters of a-z, 0-9, - and _")]
    BadName,
    #[error("the new version was refused: {0}")]
    Refused(String),
    #[error("no adapter named {0}")]
    Unknown(String),
    #[error("{0} has no earlier version to roll back to")]
    NothingToRollBack(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
}

impl From<rusqlite::Error> for AdminError {
    fn from(e: rusqlite::Error) -> Self {
        AdminError::Storage(e.into())
    }
}

#[derive(Debug, Serialize)]
pub struct AdapterView {
    pub name: String,
    pub hash: String,
    pub loaded_at_ms: u64,
    pub operators: Vec<String>,
    pub versions: Vec<VersionView>,
}

#[derive(Debug, Serialize)]
pub struct VersionView {
    pub hash: String,
    pub deployed_at_ms: u64,
    pub active: bool,
}

pub struct Admin {
    pub runtime: Arc<Runtime>,
    db: Arc<Sqlite>,
    components_dir: PathBuf,
    /// Compared in constant time.
    token: String,
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
}

impl Admin {
    pub fn new(
        runtime: Arc<Runtime>,
        db: Arc<Sqlite>,
        components_dir: PathBuf,
        token: String,
    ) -> Result<Admin, StorageError> {
        db.write(|tx| Ok(tx.execute_batch(SCHEMA)?))?;
        Ok(Admin {
            runtime,
            db,
            components_dir,
            token,
        })
    }

    pub fn token_matches(&self, presented: &str) -> bool {
        let (a, b) = (self.token.as_bytes(), presented.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// Re-installs the versions deployed before a restart (over the files).
    pub fn restore(&self) -> Result<Vec<String>, AdminError> {
        let active: Vec<(String, Vec<u8>)> = self.db.read(|c| {
            let mut stmt = c.prepare(
                "SELECT name, bytes FROM component_versions WHERE active = 1 ORDER BY id",
            )?;
            Ok(stmt
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?)
        })?;
        let mut restored = Vec::new();
        for (name, bytes) in active {
            match self.prepare_checked(&name, &bytes) {
                Ok(loaded) => {
                    self.runtime.install(loaded);
                    restored.push(name);
                }
                Err(e) => {
                    tracing::error!(component = %name, error = %e, "deployed version no longer loads; keeping the file version")
                }
            }
        }
        Ok(restored)
    }

    /// Compile, link (an adapter importing anything beyond its world fails
    /// here), describe, and smoke-test — nothing is swapped yet.
    fn prepare_checked(&self, name: &str, bytes: &[u8]) -> Result<Loaded, AdminError> {
        let loaded = self
            .runtime
            .prepare(name, bytes)
            .map_err(|e: LoadError| AdminError::Refused(e.to_string()))?;
        if loaded.kind != Kind::Adapter {
            return Err(AdminError::Refused(
                "the component does not export mmc:adapter/operator".into(),
            ));
        }
        if loaded.operators.is_empty() {
            return Err(AdminError::Refused("describe returned no operator".into()));
        }
        for op in &loaded.operators {
            let known = mmc_domain::operators::find(&op.slug);
            if known.is_none_or(|k| k.slug != op.slug || k.country.code() != op.country) {
                return Err(AdminError::Refused(format!(
                    "describe lists {} in {}, which is not an operator we know",
                    op.slug, op.country
                )));
            }
            if op.min_amount > op.max_amount
                || op.modes.iter().any(|m| m != "direct" && m != "hosted")
            {
                return Err(AdminError::Refused(format!(
                    "describe gives {} inconsistent limits or modes",
                    op.slug
                )));
            }
        }
        // Smoke test: a garbage notification must come back as an error value, not a trap.
        let probe = Inbound {
            operator: loaded.operators[0].slug.clone(),
            environment: "test".into(),
            method: "POST".into(),
            headers: Vec::new(),
            body: b"\x00not json".to_vec(),
        };
        match self.runtime.smoke_parse_callback(&loaded, &probe) {
            Ok(Err(_)) => {}
            Ok(Ok(updates)) if updates.is_empty() => {}
            Ok(Ok(_)) => {
                return Err(AdminError::Refused(
                    "parse-callback accepted a garbage notification".into(),
                ));
            }
            Err(e) => return Err(AdminError::Refused(format!("smoke test failed: {e}"))),
        }
        Ok(loaded)
    }

    /// Deploys a new version of adapter `name`; the old one keeps serving if it is refused.
    pub fn deploy(&self, name: &str, bytes: &[u8]) -> Result<Arc<Loaded>, AdminError> {
        if !valid_name(name) {
            return Err(AdminError::BadName);
        }
        let loaded = self.prepare_checked(name, bytes)?;
        let hash = loaded.hash.clone();
        let base = std::fs::read(self.components_dir.join(format!("{name}.wasm"))).ok();
        self.db.write(|tx| {
            let known: i64 = tx.query_row("SELECT COUNT(*) FROM component_versions WHERE name = ?1", [name], |r| r.get(0))?;
            if known == 0 {
                // Remember the version that came from the components directory, to roll back to.
                if let (Some(base), Some(current)) = (&base, self.runtime.get(name)) {
                    tx.execute(
                        "INSERT INTO component_versions (name, hash, bytes, deployed_ms, active) VALUES (?1, ?2, ?3, ?4, 0)",
                        params![name, current.hash, base, current.loaded_at_ms as i64],
                    )?;
                }
            }
            tx.execute("UPDATE component_versions SET active = 0 WHERE name = ?1", [name])?;
            tx.execute(
                "INSERT INTO component_versions (name, hash, bytes, deployed_ms, active) VALUES (?1, ?2, ?3, ?4, 1)",
                params![name, hash, bytes, system_now_ms() as i64],
            )?;
            Ok(())
        })?;
        self.runtime.install(loaded);
        tracing::info!(component = name, hash = %hash, "adapter deployed");
        Ok(self.runtime.get(name).expect("just installed"))
    }

    /// Goes back to the version before the active one.
    pub fn rollback(&self, name: &str) -> Result<Arc<Loaded>, AdminError> {
        let current = self
            .runtime
            .get(name)
            .ok_or_else(|| AdminError::Unknown(name.into()))?;
        let previous: Option<(i64, Vec<u8>)> = self.db.read(|c| {
            Ok(c.query_row(
                "SELECT id, bytes FROM component_versions WHERE name = ?1 AND hash != ?2
                 AND id < COALESCE((SELECT MAX(id) FROM component_versions WHERE name = ?1 AND active = 1), 1e18)
                 ORDER BY id DESC LIMIT 1",
                params![name, current.hash],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()?)
        })?;
        let (id, bytes) = previous.ok_or_else(|| AdminError::NothingToRollBack(name.into()))?;
        let loaded = self.prepare_checked(name, &bytes)?;
        self.db.write(|tx| {
            tx.execute(
                "UPDATE component_versions SET active = 0 WHERE name = ?1",
                [name],
            )?;
            tx.execute(
                "UPDATE component_versions SET active = 1 WHERE id = ?1",
                [id],
            )?;
            // Versions after the one restored are dropped from the rollback chain.
            tx.execute(
                "DELETE FROM component_versions WHERE name = ?1 AND id > ?2",
                params![name, id],
            )?;
            Ok(())
        })?;
        self.runtime.install(loaded);
        Ok(self.runtime.get(name).expect("just installed"))
    }

    pub fn list(&self) -> Result<Vec<AdapterView>, AdminError> {
        let mut out = Vec::new();
        for l in self
            .runtime
            .list()
            .into_iter()
            .filter(|l| l.kind == Kind::Adapter)
        {
            let versions = self.db.read(|c| {
                let mut stmt = c.prepare_cached("SELECT hash, deployed_ms, active FROM component_versions WHERE name = ?1 ORDER BY id")?;
                Ok(stmt
                    .query_map([&l.name], |r| {
                        Ok(VersionView { hash: r.get(0)?, deployed_at_ms: r.get::<_, i64>(1)? as u64, active: r.get::<_, i64>(2)? == 1 })
                    })?
                    .collect::<Result<Vec<_>, _>>()?)
            })?;
            out.push(AdapterView {
                name: l.name.clone(),
                hash: l.hash.clone(),
                loaded_at_ms: l.loaded_at_ms,
                operators: l.operators.iter().map(|o| o.slug.clone()).collect(),
                versions,
            });
        }
        Ok(out)
    }
}
