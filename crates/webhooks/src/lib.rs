//! Events and webhooks that are never lost. Components write events into the
//! outbox in the same transaction as the change (see `db`); here the host
//! fans them out to the merchant's endpoints (and a payment's `callback_url`)
//! as delivery rows, and a worker delivers them with signed POSTs, retrying
//! on a stored schedule, so a restart or a crash loses nothing.
//!
//! Here: the endpoint and error types, the service itself and the bodies of
//! stored events. By concern: [`endpoints`] and [`manage`] (what the API
//! changes), [`outbox`] (events to delivery rows), [`delivery`] (the
//! worker), [`events`] (reading and resending), [`destination`] (where a
//! delivery may go), [`sealing`] and [`signature`] (secrets and signatures).
//! Their endpoints on the API (`/api/v1/webhook-endpoints`, `/api/v1/events`)
//! are served by the HTTP front, which stands above this module.

mod delivery;
pub mod destination;
mod endpoints;
mod events;
mod manage;
mod outbox;
pub mod sealing;
pub mod signature;

pub use delivery::{CLAIM_DUE_POSTGRES, spawn};

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Semaphore;

use mmc_config::WebhookConfig;
use mmc_db::{SqlConn, SqlDb, StorageError};
use mmc_storage::sql_params;

/// A delivery row to send (`?1` event, `?2` endpoint or NULL for a
/// payment's `callback_url`, `?3` url, `?4` environment, `?5` merchant, `?6` now).
const INSERT_DELIVERY: &str = "INSERT INTO deliveries (event_id, endpoint_id, url, environment, merchant_id, status, next_attempt_ms, created_ms)
     VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6, ?6)";

/// Endpoints per merchant and environment (each event is fanned out to every
/// one of them: unbounded, one key could multiply the delivery work).
pub const MAX_ENDPOINTS: i64 = 16;

pub const EVENT_TYPES: &[&str] = &[
    "collect.payment.created",
    "collect.payment.processing",
    "collect.payment.awaiting_otp",
    "collect.payment.awaiting_payment",
    "collect.payment.completed",
    "collect.payment.failed",
    "collect.payment.cancelled",
    "collect.payment.expired",
    "collect.payment.refunded",
    "collect.payment.review_required",
    "collect.refund.completed",
    "collect.refund.failed",
    "collect.refund.review_required",
    "collect.initiated",
    "collect.updated",
    "collect.completed",
    "collect.failed",
    "collect.cancelled",
    "bulk.batch.completed",
    "bulk.batch.partially_completed",
    "bulk.batch.failed",
    "bulk.batch.rejected",
    "bulk.item.review_required",
    "reconciliation.case.opened",
    "reconciliation.case.resolved",
];

#[derive(Debug, Clone, Serialize)]
pub struct Endpoint {
    pub id: String,
    pub object: &'static str,
    pub url: String,
    pub enabled_events: Vec<String>,
    pub description: Option<String>,
    pub environment: String,
    pub created: u64,
    /// Receives nothing new while disabled (deliveries already queued go on).
    pub disabled: bool,
    /// Shown only in the creation (and secret rotation) response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("{0}")]
    Invalid(String, &'static str),
    #[error("no such {0}")]
    NotFound(&'static str),
    #[error(
        "at most {MAX_ENDPOINTS} webhook endpoints per merchant and environment: delete one first"
    )]
    TooManyEndpoints,
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Sealing(#[from] sealing::SealError),
    /// The call that builds stored events' bodies failed (no `collect`
    /// loaded, no free instance, a trap): may pass (see [`EventBodies`]).
    #[error("event body: {0}")]
    Body(String),
    /// A stored event this version cannot build the body of.
    #[error("this event's stored body cannot be read by this version")]
    Unreadable,
}

/// Builds the JSON bodies of events a component stored in its own compact
/// form (collect's payment events; the server gives the runtime, which calls
/// collect's `events` export). A JSON body is stored as it is sent.
pub trait EventBodies: Send + Sync {
    /// The body of each payload, in order; none for one that cannot be read.
    fn render(&self, payloads: Vec<Vec<u8>>) -> Result<Vec<Option<Vec<u8>>>, String>;
}

/// A payload stored as the JSON body it is (every event but collect's compact ones).
fn is_json(payload: &[u8]) -> bool {
    payload.first() == Some(&b'{')
}

/// Longest endpoint description, in characters.
pub const MAX_DESCRIPTION: usize = 500;

pub struct Webhooks {
    db: SqlDb,
    pub config: WebhookConfig,
    client: reqwest::Client,
    in_flight: Arc<Semaphore>,
    /// Deliveries in flight per destination; an entry lives only while one is.
    per_endpoint: mmc_common::permits::KeyedPermits,
    sealer: sealing::Sealer,
    bodies: std::sync::OnceLock<Arc<dyn EventBodies>>,
    /// Where delivery attempts are counted (set once, by the server).
    metrics: std::sync::OnceLock<Arc<mmc_metrics::Metrics>>,
}

/// The row a callback secret is sealed for.
fn callback_row(merchant_id: &str, environment: &str) -> String {
    format!("callback:{merchant_id}:{environment}")
}

/// An endpoint's (id, url, enabled event types).
/// The columns an [`Endpoint`] is read from, in [`endpoint_from_row`]'s order.
const ENDPOINT_COLUMNS: &str =
    "id, url, enabled_events, description, environment, created_ms, disabled_ms";

fn endpoint_from_row(r: &mmc_db::Row) -> Result<Endpoint, StorageError> {
    Ok(Endpoint {
        id: r.text(0)?,
        object: "webhook_endpoint",
        url: r.text(1)?,
        enabled_events: serde_json::from_str(&r.text(2)?).unwrap_or_default(),
        description: r.opt_text(3)?,
        environment: r.text(4)?,
        created: r.int(5)? as u64 / 1000,
        disabled: r.opt_int(6)?.is_some(),
        secret: None,
    })
}

type Subscription = (String, String, Vec<String>);

/// A claimed delivery's body and secret (None: its endpoint is gone).
type Loaded = Result<Option<(Vec<u8>, String)>, WebhookError>;

/// The live endpoints of a merchant in an environment: (id, url, enabled events).
fn subscriptions(
    tx: &mut dyn SqlConn,
    merchant: &str,
    env: &str,
) -> Result<Vec<Subscription>, StorageError> {
    tx.query(
        "SELECT id, url, enabled_events FROM webhook_endpoints WHERE merchant_id = ?1 AND environment = ?2 AND deleted_ms IS NULL AND disabled_ms IS NULL",
        sql_params![merchant, env],
    )?
    .iter()
    .map(|r| {
        Ok((
            r.text(0)?,
            r.text(1)?,
            serde_json::from_str(&r.text(2)?).unwrap_or_default(),
        ))
    })
    .collect()
}

/// Seals, under the current key, every secret stored in plaintext (rows
/// from before sealing) or under a previous key. Once per start; a key that
/// opens nothing stops the start rather than every delivery later.
fn reseal(db: &SqlDb, sealer: &sealing::Sealer) -> Result<(), WebhookError> {
    let rows = |sql: &str| -> Result<Vec<(String, String, String)>, StorageError> {
        db.read(|c| {
            c.query(sql, &[])?
                .iter()
                .map(|r| Ok((r.text(0)?, r.text(1)?, r.text(2)?)))
                .collect()
        })
    };
    let mut updates = Vec::new();
    for (id, _, stored) in rows("SELECT id, '', secret FROM webhook_endpoints")? {
        if let Some(v) = sealer.needs_resealing(&id, &stored)? {
            updates.push((
                "UPDATE webhook_endpoints SET secret = ?2 WHERE id = ?1",
                vec![id, v],
            ));
        }
    }
    for (merchant, env, stored) in
        rows("SELECT merchant_id, environment, secret FROM callback_secrets")?
    {
        if let Some(v) = sealer.needs_resealing(&callback_row(&merchant, &env), &stored)? {
            updates.push((
                "UPDATE callback_secrets SET secret = ?3 WHERE merchant_id = ?1 AND environment = ?2",
                vec![merchant, env, v],
            ));
        }
    }
    if !updates.is_empty() {
        tracing::info!(
            rows = updates.len(),
            "webhook secrets sealed under the current key"
        );
        db.write(|tx| {
            for (sql, values) in &updates {
                let values: Vec<mmc_db::Value> = values.iter().map(Into::into).collect();
                tx.execute(sql, &values)?;
            }
            Ok(())
        })?;
    }
    Ok(())
}

fn matches(enabled: &[String], event_type: &str) -> bool {
    enabled.iter().any(|e| e == "*" || e == event_type)
}

impl Webhooks {
    pub fn new(
        db: SqlDb,
        config: WebhookConfig,
        sealer: sealing::Sealer,
    ) -> Result<Arc<Webhooks>, WebhookError> {
        reseal(&db, &sealer)?;
        let timeout = Duration::from_millis(config.timeout_ms);
        Ok(Arc::new(Webhooks {
            db,
            client: delivery::client(config.allow_private_destinations, timeout),
            in_flight: Arc::new(Semaphore::new(config.concurrency.max(1))),
            per_endpoint: mmc_common::permits::KeyedPermits::new(config.per_endpoint_concurrency),
            config,
            sealer,
            bodies: std::sync::OnceLock::new(),
            metrics: std::sync::OnceLock::new(),
        }))
    }

    /// Where delivery attempts are counted (set once, by the server).
    pub fn set_metrics(&self, metrics: Arc<mmc_metrics::Metrics>) {
        let _ = self.metrics.set(metrics);
    }

    /// Who builds the bodies of compact events (set once, by the server).
    pub fn set_event_bodies(&self, bodies: Arc<dyn EventBodies>) {
        let _ = self.bodies.set(bodies);
    }

    /// The JSON body of each stored payload: JSON ones as they are, the
    /// others built in one call. None for a payload that cannot be read.
    fn bodies(&self, mut payloads: Vec<Vec<u8>>) -> Result<Vec<Option<Vec<u8>>>, WebhookError> {
        let compact: Vec<usize> = (0..payloads.len())
            .filter(|&i| !is_json(&payloads[i]))
            .collect();
        let mut rendered = Vec::new();
        if !compact.is_empty() {
            let bodies = self.bodies.get().ok_or_else(|| {
                WebhookError::Body("no component to build compact event bodies".into())
            })?;
            let asked = compact
                .iter()
                .map(|&i| std::mem::take(&mut payloads[i]))
                .collect();
            rendered = bodies.render(asked).map_err(WebhookError::Body)?;
            if rendered.len() != compact.len() {
                return Err(WebhookError::Body(format!(
                    "{} bodies for {} events",
                    rendered.len(),
                    compact.len()
                )));
            }
        }
        let mut out: Vec<Option<Vec<u8>>> = payloads.into_iter().map(Some).collect();
        for (i, body) in compact.into_iter().zip(rendered) {
            if body.is_none() {
                tracing::error!(
                    index = i,
                    "a stored event's body could not be built: not a form this version reads"
                );
            }
            out[i] = body;
        }
        Ok(out)
    }

    /// The JSON body of one stored payload.
    fn body(&self, payload: Vec<u8>) -> Result<Vec<u8>, WebhookError> {
        if is_json(&payload) {
            return Ok(payload);
        }
        self.bodies(vec![payload])?
            .pop()
            .flatten()
            .ok_or(WebhookError::Unreadable)
    }
}
