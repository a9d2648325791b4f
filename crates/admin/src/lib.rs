//! Operating the adapters without a restart: deploy a new version (compiled,
//! linked, described and smoke-tested before it is swapped in atomically),
//! roll back, list; deployed versions persist across restarts. The routes,
//! changed and rolled back the same way ([`routes`]). Plus the audit trail
//! of adapter calls (kept by [`mmc_audit`]). Served under `/admin/v1`
//! with its own token.

pub mod api;
pub mod routes;
pub mod token;

use std::sync::Arc;

use serde::Serialize;

use mmc_common::clock::system_now_ms;
use mmc_db::{SqlDb, StorageError};
use mmc_runtime::bindings::adapter_types::Inbound;
use mmc_runtime::{Kind, LoadError, Loaded, Runtime};
use mmc_storage::sql_params;

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
    #[error("the routes were refused: {0}")]
    Routes(String),
    #[error(transparent)]
    Storage(#[from] StorageError),
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
    db: SqlDb,
    /// What the components were started from (a rollback's last resort).
    components: mmc_bundle::ComponentsSource,
    /// Compared in constant time.
    token: String,
    /// Versions that failed to load on this node: not retried every round.
    unloadable: parking_lot::Mutex<std::collections::HashSet<String>>,
    /// The routes of the configuration: in force before any change.
    configured_routes: mmc_routing::Specs,
    /// The version of the routes in force on this node (None: the configuration's).
    routes_version: parking_lot::Mutex<Option<i64>>,
}

/// How often a node looks for deploys and rollbacks made through another.
pub const SYNC_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

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
        db: SqlDb,
        components: mmc_bundle::ComponentsSource,
        token: String,
    ) -> Result<Admin, StorageError> {
        Ok(Admin {
            configured_routes: runtime.routes().specs().clone(),
            runtime,
            db,
            components,
            token,
            unloadable: Default::default(),
            routes_version: Default::default(),
        })
    }

    pub fn token_matches(&self, presented: &str) -> bool {
        let (a, b) = (self.token.as_bytes(), presented.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }

    /// Re-installs the versions deployed before a restart (over the files).
    pub fn restore(&self) -> Result<Vec<String>, AdminError> {
        self.sync()
    }

    /// Serves the active version of every adapter as the database has it:
    /// at start, and every [`SYNC_EVERY`] after, so a deploy or rollback
    /// made through any node of a fleet serves on every node. Returns the
    /// adapters installed by this call.
    pub fn sync(&self) -> Result<Vec<String>, AdminError> {
        self.sync_routes()?;
        let active: Vec<(String, String)> = self.db.read(|c| {
            c.query(
                "SELECT name, hash FROM component_versions WHERE active = 1 ORDER BY id",
                &[],
            )?
            .iter()
            .map(|r| Ok((r.text(0)?, r.text(1)?)))
            .collect()
        })?;
        let mut installed = Vec::new();
        for (name, hash) in active {
            let serving = self.runtime.get(&name).map(|l| l.hash.clone());
            if serving.as_deref() == Some(hash.as_str()) || self.unloadable.lock().contains(&hash) {
                continue;
            }
            let bytes = self.db.read(|c| {
                c.query_opt(
                    "SELECT bytes FROM component_versions WHERE name = ?1 AND hash = ?2 AND active = 1",
                    sql_params![&name, &hash],
                )?
                .map(|r| r.blob(0))
                .transpose()
            })?;
            let Some(bytes) = bytes else { continue }; // changed meanwhile: next round
            match self.prepare_checked(&name, &bytes) {
                Ok(loaded) => {
                    self.runtime.install(loaded);
                    tracing::info!(component = %name, hash = %hash, "adapter version from the database installed");
                    installed.push(name);
                }
                Err(e) => {
                    tracing::error!(component = %name, error = %e, "deployed version does not load here; keeping the version served");
                    self.unloadable.lock().insert(hash);
                }
            }
        }
        Ok(installed)
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
        let base = self.components.original(name);
        self.db.write(|tx| {
            // Deploys of one adapter through several nodes take turns.
            tx.lock(&format!("component_versions:{name}"))?;
            let known = tx
                .query_one("SELECT COUNT(*) FROM component_versions WHERE name = ?1", sql_params![name])?
                .int(0)?;
            if known == 0 {
                // Remember the version that came from the components directory, to roll back to.
                if let (Some(base), Some(current)) = (&base, self.runtime.get(name)) {
                    tx.execute(
                        "INSERT INTO component_versions (name, hash, bytes, deployed_ms, active) VALUES (?1, ?2, ?3, ?4, 0)",
                        sql_params![name, &current.hash, base, current.loaded_at_ms as i64],
                    )?;
                }
            }
            tx.execute("UPDATE component_versions SET active = 0 WHERE name = ?1", sql_params![name])?;
            tx.execute(
                "INSERT INTO component_versions (name, hash, bytes, deployed_ms, active) VALUES (?1, ?2, ?3, ?4, 1)",
                sql_params![name, &hash, bytes, system_now_ms() as i64],
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
        let active_sql = "SELECT MAX(id) FROM component_versions WHERE name = ?1 AND active = 1";
        let (active, previous) = self.db.read(|c| {
            let active = c.query_one(active_sql, sql_params![name])?.opt_int(0)?;
            let previous = c
                .query_opt(
                    "SELECT id, bytes FROM component_versions WHERE name = ?1 AND hash != ?2
                     AND id < COALESCE(?3, 9223372036854775807)
                     ORDER BY id DESC LIMIT 1",
                    sql_params![name, &current.hash, active],
                )?
                .map(|r| Ok::<_, StorageError>((r.int(0)?, r.blob(1)?)))
                .transpose()?;
            Ok((active, previous))
        })?;
        let (id, bytes) = previous.ok_or_else(|| AdminError::NothingToRollBack(name.into()))?;
        let loaded = self.prepare_checked(name, &bytes)?;
        let applied = self.db.write(|tx| {
            tx.lock(&format!("component_versions:{name}"))?;
            // A deploy or rollback through another node since the read above:
            // this rollback would undo it unseen. The caller asks again.
            if tx.query_one(active_sql, sql_params![name])?.opt_int(0)? != active {
                return Ok(false);
            }
            tx.execute(
                "UPDATE component_versions SET active = 0 WHERE name = ?1",
                sql_params![name],
            )?;
            tx.execute(
                "UPDATE component_versions SET active = 1 WHERE id = ?1",
                sql_params![id],
            )?;
            // Versions after the one restored are dropped from the rollback chain.
            tx.execute(
                "DELETE FROM component_versions WHERE name = ?1 AND id > ?2",
                sql_params![name, id],
            )?;
            Ok(true)
        })?;
        if !applied {
            return Err(AdminError::Refused(
                "another deploy or rollback of this adapter happened meanwhile; list the versions and try again".into(),
            ));
        }
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
                c.query(
                    "SELECT hash, deployed_ms, active FROM component_versions WHERE name = ?1 ORDER BY id",
                    sql_params![&l.name],
                )?
                .iter()
                .map(|r| {
                    Ok(VersionView {
                        hash: r.text(0)?,
                        deployed_at_ms: r.int(1)? as u64,
                        active: r.int(2)? == 1,
                    })
                })
                .collect::<Result<Vec<_>, StorageError>>()
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
