//! Changing the routes without a restart: each change through the admin API
//! is a new version of the whole table in `route_versions` (who asked is the
//! admin token; when, what and why are kept), put in force on this node at
//! once and on every node of a fleet at its next sync (within
//! [`super::SYNC_EVERY`]). A rollback puts the version before back in force;
//! before the first version, the configuration's routes are in force.

use serde::Serialize;
use serde_json::{Value, json};

use super::{Admin, AdminError};
use mmc_common::clock::system_now_ms;
use mmc_config::RouteSpec;
use mmc_db::StorageError;
use mmc_routing::{RouteTable, Specs, Summary};
use mmc_storage::sql_params;

/// One version of the routes, as the admin API lists it.
#[derive(Debug, Serialize)]
pub struct RouteVersion {
    pub id: i64,
    pub changed_at_ms: u64,
    /// What changed: `set live mtn-bj`, `remove live mtn-bj`.
    pub change: String,
    /// Why, as the person who changed it said.
    pub note: Option<String>,
    pub active: bool,
}

/// A route's health on this node.
#[derive(Debug, Serialize)]
pub struct RouteHealth {
    pub environment: String,
    pub adapter: String,
    pub operator: String,
    #[serde(flatten)]
    pub summary: Summary,
}

const ACTIVE_SQL: &str = "SELECT id, specs FROM route_versions WHERE active = 1";

impl Admin {
    /// The routes in force, the version they come from (None: the
    /// configuration) and what this node observed of each route.
    pub fn routes(&self) -> (Specs, Option<i64>, Vec<RouteHealth>) {
        let specs = self.runtime.routes().specs().clone();
        let health = self
            .runtime
            .health
            .all(system_now_ms())
            .into_iter()
            .map(|((environment, adapter, operator), summary)| RouteHealth {
                environment,
                adapter,
                operator,
                summary,
            })
            .collect();
        (specs, *self.routes_version.lock(), health)
    }

    /// Every version, newest first.
    pub fn route_versions(&self) -> Result<Vec<RouteVersion>, AdminError> {
        Ok(self.db.read(|c| {
            c.query(
                "SELECT id, changed_ms, change, note, active FROM route_versions ORDER BY id DESC",
                &[],
            )?
            .iter()
            .map(|r| {
                Ok(RouteVersion {
                    id: r.int(0)?,
                    changed_at_ms: r.int(1)? as u64,
                    change: r.text(2)?,
                    note: r.opt_text(3)?,
                    active: r.int(4)? == 1,
                })
            })
            .collect::<Result<Vec<_>, StorageError>>()
        })?)
    }

    /// Sets (`Some`) or removes (`None`) the routes of `operator` (a slug
    /// or `*`) in `environment`, as a new version in force at once.
    pub fn set_route(
        &self,
        environment: &str,
        operator: &str,
        spec: Option<RouteSpec>,
        note: Option<String>,
    ) -> Result<Specs, AdminError> {
        check_target(environment, operator)?;
        if let Some(spec) = &spec {
            spec.check(&format!("routing.{environment}.{operator}"))
                .map_err(AdminError::Routes)?;
        }
        let (change, specs) = self.db.write(|tx| {
            tx.lock("route_versions")?;
            let mut specs = match tx.query_opt(ACTIVE_SQL, &[])? {
                Some(row) => parse(&row.text(1)?)?,
                None => self.configured_routes.clone(),
            };
            let env = specs.entry(environment.to_string()).or_default();
            let change = match spec.clone() {
                Some(spec) => {
                    env.insert(operator.to_string(), spec);
                    format!("set {environment} {operator}")
                }
                None => {
                    env.remove(operator);
                    format!("remove {environment} {operator}")
                }
            };
            let text = serde_json::to_string(&specs).expect("routes serialise");
            tx.execute("UPDATE route_versions SET active = 0 WHERE active = 1", &[])?;
            tx.execute(
                "INSERT INTO route_versions (specs, changed_ms, change, note, active) VALUES (?1, ?2, ?3, ?4, 1)",
                sql_params![&text, system_now_ms() as i64, &change, note.as_deref()],
            )?;
            Ok((change, specs))
        })?;
        tracing::info!(%change, note = note.as_deref().unwrap_or(""), "routes changed");
        self.sync_routes()?;
        Ok(specs)
    }

    /// Puts the version before the one in force back in force (before the
    /// first: the configuration's routes).
    pub fn rollback_routes(&self) -> Result<Specs, AdminError> {
        let rolled = self.db.write(|tx| {
            tx.lock("route_versions")?;
            let Some(active) = tx.query_opt(ACTIVE_SQL, &[])? else {
                return Ok(false);
            };
            let id = active.int(0)?;
            tx.execute("UPDATE route_versions SET active = 0 WHERE id = ?1", sql_params![id])?;
            tx.execute(
                "UPDATE route_versions SET active = 1 WHERE id = (SELECT MAX(id) FROM route_versions WHERE id < ?1)",
                sql_params![id],
            )?;
            // The versions after the one restored leave the chain.
            tx.execute("DELETE FROM route_versions WHERE id >= ?1", sql_params![id])?;
            Ok(true)
        })?;
        if !rolled {
            return Err(AdminError::NothingToRollBack("the routes".into()));
        }
        tracing::info!("routes rolled back");
        self.sync_routes()?;
        Ok(self.runtime.routes().specs().clone())
    }

    /// Puts the version the database has in force here, if it is not yet.
    pub(super) fn sync_routes(&self) -> Result<(), AdminError> {
        // Every 250 ms on every node: the id alone, the table only when it changed.
        let active = self.db.read(|c| {
            c.query_opt("SELECT id FROM route_versions WHERE active = 1", &[])?
                .map(|r| r.int(0))
                .transpose()
        })?;
        let mut applied = self.routes_version.lock();
        if active == *applied {
            return Ok(());
        }
        let specs = match active {
            Some(id) => {
                let text = self.db.read(|c| {
                    c.query_opt(
                        "SELECT specs FROM route_versions WHERE id = ?1",
                        sql_params![id],
                    )?
                    .map(|r| r.text(0))
                    .transpose()
                })?;
                // Rolled back meanwhile: the next round sees it.
                let Some(text) = text else { return Ok(()) };
                parse(&text)?
            }
            None => self.configured_routes.clone(),
        };
        self.runtime.set_routes(RouteTable::new(specs));
        *applied = active;
        tracing::info!(version = ?active, "routes in force");
        Ok(())
    }
}

fn parse(text: &str) -> Result<Specs, StorageError> {
    serde_json::from_str(text)
        .map_err(|e| StorageError::Invalid(format!("stored routes unreadable: {e}")))
}

fn check_target(environment: &str, operator: &str) -> Result<(), AdminError> {
    if environment != "test" && environment != "live" {
        return Err(AdminError::Routes(format!(
            "environment must be test or live, not {environment:?}"
        )));
    }
    if operator != "*" && mmc_domain::operators::find(operator).is_none_or(|o| o.slug != operator) {
        return Err(AdminError::Routes(format!(
            "{operator:?} is not an operator slug we know (or *)"
        )));
    }
    Ok(())
}

/// A route spec from an admin request's JSON body.
pub fn spec_from_json(body: &[u8]) -> Result<(RouteSpec, Option<String>), AdminError> {
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| AdminError::Routes(format!("the body is not JSON: {e}")))?;
    let note = v.get("note").and_then(Value::as_str).map(str::to_string);
    let routes = v.get("routes").cloned().ok_or_else(|| {
        AdminError::Routes(
            "the body needs \"routes\": an adapter, a list, or {\"routes\": [...], \"rules\": [...]}".into(),
        )
    })?;
    let spec = serde_json::from_value(routes)
        .map_err(|e| AdminError::Routes(format!("\"routes\" is not a route list: {e}")))?;
    Ok((spec, note))
}

/// The environments a payment id may belong to.
const ENVIRONMENTS: [&str; 2] = ["live", "test"];

impl Admin {
    /// The route a payment was sent through and why, as `collect` recorded
    /// it with the payment (its record read in place, found by id as the
    /// operators' callbacks find it): the rule, the candidates with their
    /// health and verdicts, and the routes tried before. None when no
    /// payment has this id.
    pub fn payment_route(&self, id: &str) -> Result<Option<Value>, AdminError> {
        const ROW: &str = "SELECT v FROM kv WHERE ns = 'collect' AND tbl = ?1 AND k = ?2";
        let key = |k: String| mmc_db::kv_key(&self.db, k);
        let found = self.db.read(|c| {
            for env in ENVIRONMENTS {
                let owner = c.query_opt(ROW, &["owners".into(), key(format!("{env}/{id}"))])?;
                let Some(owner) = owner else {
                    continue;
                };
                let merchant = String::from_utf8_lossy(&owner.blob(0)?).into_owned();
                let payment = key(format!("{env}/{merchant}/{id}"));
                if let Some(row) = c.query_opt(ROW, &["payments".into(), payment])? {
                    return Ok(Some((env, merchant, row.blob(0)?)));
                }
            }
            Ok(None)
        })?;
        let Some((env, merchant, stored)) = found else {
            return Ok(None);
        };
        let p = mmc_domain::record::decode(&stored)
            .map_err(|e| StorageError::Invalid(format!("payment {id}: {e}")))?;
        let mut view = json!({
            "object": "payment.route",
            "payment_id": p.id,
            "environment": env,
            "merchant_id": merchant,
            "operator": p.operator,
        });
        if let Value::Object(o) = &mut view {
            o.extend(mmc_domain::record::Route::fields(p.route.as_ref()));
        }
        Ok(Some(view))
    }
}
