//! Events and webhooks that are never lost. Components write events into the
//! outbox in the same transaction as the change (see `db`); here the host
//! fans them out to the merchant's endpoints (and a payment's `callback_url`)
//! as delivery rows, and a worker delivers them with signed POSTs, retrying
//! on a stored schedule, so a restart or a crash loses nothing.

pub mod api;
pub mod destination;
mod manage;
pub mod sealing;
pub mod signature;

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::accounts::Environment;
use crate::clock::system_now_ms;
use crate::config::WebhookConfig;
use crate::db::{SqlConn, SqlDb, StorageError};
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
    per_endpoint: crate::permits::KeyedPermits,
    sealer: sealing::Sealer,
    bodies: std::sync::OnceLock<Arc<dyn EventBodies>>,
}

/// The row a callback secret is sealed for.
fn callback_row(merchant_id: &str, environment: &str) -> String {
    format!("callback:{merchant_id}:{environment}")
}

fn client(allow_private: bool, timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(timeout)
        .dns_resolver(Arc::new(destination::SafeResolver { allow_private }))
        // Through a proxy the proxy resolves names, not SafeResolver: never use one.
        .no_proxy()
        .user_agent(concat!("mmc-webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
        .expect("reqwest client")
}

/// What a failed delivery attempt records: `timeout`, `destination_refused`
/// (the connect-time resolver refused every address), `connect_failed`,
/// `request_failed`; non-2xx answers record `http_status` with the code.
fn error_class(e: &reqwest::Error) -> &'static str {
    if e.is_timeout() {
        "timeout"
    } else if e.is_connect() {
        // The resolver's refusal surfaces as a connect error caused by it.
        let mut cause = std::error::Error::source(e);
        while let Some(c) = cause {
            if c.downcast_ref::<destination::Refused>().is_some() {
                return "destination_refused";
            }
            cause = c.source();
        }
        "connect_failed"
    } else {
        "request_failed"
    }
}

/// An endpoint's (id, url, enabled event types).
/// The columns an [`Endpoint`] is read from, in [`endpoint_from_row`]'s order.
const ENDPOINT_COLUMNS: &str =
    "id, url, enabled_events, description, environment, created_ms, disabled_ms";

fn endpoint_from_row(r: &crate::db::Row) -> Result<Endpoint, StorageError> {
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
                let values: Vec<crate::db::Value> = values.iter().map(Into::into).collect();
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
            client: client(config.allow_private_destinations, timeout),
            in_flight: Arc::new(Semaphore::new(config.concurrency.max(1))),
            per_endpoint: crate::permits::KeyedPermits::new(config.per_endpoint_concurrency),
            config,
            sealer,
            bodies: std::sync::OnceLock::new(),
        }))
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

    /// A description is a line of text a person reads in a dashboard: bounded,
    /// and without control characters (a NUL is no text PostgreSQL stores).
    pub fn validate_description(description: Option<&str>) -> Result<(), WebhookError> {
        let Some(d) = description else { return Ok(()) };
        if d.chars().count() > MAX_DESCRIPTION {
            return Err(WebhookError::Invalid(
                format!("description must be at most {MAX_DESCRIPTION} characters."),
                "description",
            ));
        }
        if d.chars().any(char::is_control) {
            return Err(WebhookError::Invalid(
                "description must be text without control characters.".into(),
                "description",
            ));
        }
        Ok(())
    }

    pub fn validate_events(events: &[String]) -> Result<(), WebhookError> {
        if events.is_empty() {
            return Err(WebhookError::Invalid(
                "enabled_events must list at least one event type, or \"*\"".into(),
                "enabled_events",
            ));
        }
        match events
            .iter()
            .find(|e| *e != "*" && !EVENT_TYPES.contains(&e.as_str()))
        {
            Some(bad) => Err(WebhookError::Invalid(
                format!("unknown event type '{bad}'"),
                "enabled_events",
            )),
            None => Ok(()),
        }
    }

    /// Registers an endpoint after checking its destination. The secret is returned once.
    pub async fn create_endpoint(
        &self,
        merchant_id: &str,
        environment: Environment,
        url: &str,
        enabled_events: Vec<String>,
        description: Option<String>,
    ) -> Result<Endpoint, WebhookError> {
        Self::validate_events(&enabled_events)?;
        Self::validate_description(description.as_deref())?;
        destination::check(url, environment, self.config.allow_private_destinations)
            .await
            .map_err(|e| WebhookError::Invalid(e.to_string(), "url"))?;
        let e = Endpoint {
            id: format!("we_{}", uuid::Uuid::new_v4().simple()),
            object: "webhook_endpoint",
            url: url.to_string(),
            enabled_events,
            description,
            environment: environment.as_str().into(),
            created: system_now_ms() / 1000,
            disabled: false,
            secret: Some(signature::new_secret()),
        };
        let sealed = self
            .sealer
            .seal(&e.id, e.secret.as_deref().expect("made just above"));
        let events_json = serde_json::to_string(&e.enabled_events).expect("strings serialise");
        // Counted and inserted under the writer: parallel creates cannot pass the bound.
        let created = self.db.write(|tx| {
            tx.lock(&format!("webhook_endpoints:{merchant_id}:{}", e.environment))?;
            let existing = tx.query_one(
                "SELECT COUNT(*) FROM webhook_endpoints WHERE merchant_id = ?1 AND environment = ?2 AND deleted_ms IS NULL",
                sql_params![merchant_id, &e.environment],
            )?.int(0)?;
            if existing >= MAX_ENDPOINTS {
                return Ok(false);
            }
            tx.execute(
                "INSERT INTO webhook_endpoints (id, merchant_id, environment, url, secret, enabled_events, description, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                sql_params![&e.id, merchant_id, &e.environment, &e.url, sealed, events_json, &e.description, (e.created * 1000) as i64],
            )?;
            Ok(true)
        })?;
        if !created {
            return Err(WebhookError::TooManyEndpoints);
        }
        Ok(e)
    }

    pub fn list_endpoints(
        &self,
        merchant_id: &str,
        environment: Environment,
    ) -> Result<Vec<Endpoint>, WebhookError> {
        Ok(self.db.read(|c| {
            c.query(
                &format!(
                    "SELECT {ENDPOINT_COLUMNS} FROM webhook_endpoints
                     WHERE merchant_id = ?1 AND environment = ?2 AND deleted_ms IS NULL ORDER BY created_ms, id"
                ),
                sql_params![merchant_id, environment.as_str()],
            )?
            .iter()
            .map(endpoint_from_row)
            .collect::<Result<Vec<_>, StorageError>>()
        })?)
    }

    pub fn delete_endpoint(
        &self,
        merchant_id: &str,
        environment: Environment,
        id: &str,
    ) -> Result<(), WebhookError> {
        let changed = self.db.write(|tx| {
            tx.execute(
                "UPDATE webhook_endpoints SET deleted_ms = ?4 WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3 AND deleted_ms IS NULL",
                sql_params![id, merchant_id, environment.as_str(), system_now_ms() as i64],
            )
        })?;
        if changed == 0 {
            return Err(WebhookError::NotFound("webhook endpoint"));
        }
        Ok(())
    }

    /// The secret that signs deliveries to payments' `callback_url`s (created on first use).
    pub fn callback_secret(
        &self,
        merchant_id: &str,
        environment: &str,
    ) -> Result<String, WebhookError> {
        let row = callback_row(merchant_id, environment);
        let read = |c: &mut dyn SqlConn| -> Result<Option<String>, StorageError> {
            c.query_opt(
                "SELECT secret FROM callback_secrets WHERE merchant_id = ?1 AND environment = ?2",
                sql_params![merchant_id, environment],
            )?
            .map(|r| r.text(0))
            .transpose()
        };
        // Made once per merchant and environment: later reads skip the writer.
        let stored = match self.db.read(read)? {
            Some(s) => s,
            None => {
                let fresh = self.sealer.seal(&row, &signature::new_secret());
                self.db.write(|tx| {
                    tx.execute(
                        "INSERT INTO callback_secrets (merchant_id, environment, secret) VALUES (?1, ?2, ?3)
                         ON CONFLICT DO NOTHING",
                        sql_params![merchant_id, environment, &fresh],
                    )?;
                    Ok(read(tx)?.expect("inserted or already there"))
                })?
            }
        };
        Ok(self.sealer.open(&row, &stored)?)
    }

    /// Fans new outbox events out into delivery rows, in one transaction with
    /// moving the outbox cursor past them. Returns how many events were dispatched.
    pub fn dispatch_outbox(&self, limit: u32) -> Result<usize, WebhookError> {
        let now = system_now_ms() as i64;
        Ok(self.db.write(|tx| {
            // One dispatcher at a time across the fleet: the cursor is read,
            // fanned out past and moved in one transaction. Another node
            // dispatching now: this round has nothing to do.
            if !tx.try_lock("outbox_dispatch")? {
                return Ok(0);
            }
            let events = tx.query(
                "SELECT seq, id, event_type, merchant_id, environment, extra_url FROM outbox
                 WHERE seq > (SELECT seq FROM outbox_cursor WHERE id = 1) ORDER BY seq LIMIT ?1",
                sql_params![limit],
            )?;
            let Some(last) = events.last().map(|e| e.int(0)).transpose()? else {
                return Ok(0);
            };
            // A round's events are mostly one merchant's: look its endpoints up once.
            let mut endpoints_of: HashMap<(String, String), Vec<Subscription>> = HashMap::new();
            for e in &events {
                let (id, event_type, merchant, env, extra_url) = (
                    e.text(1)?,
                    e.text(2)?,
                    e.text(3)?,
                    e.text(4)?,
                    e.opt_text(5)?,
                );
                let endpoints = match endpoints_of.entry((merchant.clone(), env.clone())) {
                    Entry::Occupied(e) => e.into_mut(),
                    Entry::Vacant(e) => e.insert(subscriptions(tx, &merchant, &env)?),
                };
                for (eid, url, enabled) in endpoints.iter() {
                    if matches(enabled, &event_type) {
                        tx.execute(
                            INSERT_DELIVERY,
                            sql_params![&id, eid, url, &env, &merchant, now],
                        )?;
                    }
                }
                if let Some(url) = extra_url {
                    tx.execute(
                        INSERT_DELIVERY,
                        sql_params![&id, Option::<String>::None, url, &env, &merchant, now],
                    )?;
                }
            }
            tx.execute(
                "UPDATE outbox_cursor SET seq = ?1 WHERE id = 1",
                sql_params![last],
            )?;
            Ok(events.len())
        })?)
    }

    /// Deletes the oldest events past the retention with their deliveries and
    /// attempts, at most `limit` in one transaction (the writer is shared with
    /// payments: the caller repeats while a whole batch went). Returns how many
    /// went. Only a prefix of the outbox in `seq` order goes, up to the first
    /// event that is too young, not yet fanned out, or still has a delivery
    /// pending (a resend of an old event): each round costs one bounded scan
    /// from the front instead of a search of the whole table.
    pub fn prune_events(&self, now_ms: u64, limit: u32) -> Result<usize, WebhookError> {
        let Some(retention) = self.config.event_retention_ms() else {
            return Ok(0);
        };
        let cutoff = now_ms.saturating_sub(retention) as i64;
        Ok(self.db.write(|tx| {
            // One pruner at a time across the fleet; another node pruning: nothing to do here.
            if !tx.try_lock("outbox_prune")? {
                return Ok(0);
            }
            let front = tx.query(
                "SELECT o.seq, o.created_ms,
                        CAST(CASE WHEN EXISTS (SELECT 1 FROM deliveries d
                                               WHERE d.event_id = o.id AND d.status = 'pending')
                             THEN 1 ELSE 0 END AS BIGINT)
                 FROM outbox o WHERE o.seq <= (SELECT seq FROM outbox_cursor WHERE id = 1)
                 ORDER BY o.seq LIMIT ?1",
                sql_params![limit as i64],
            )?;
            let mut prefix = Vec::new();
            for r in &front {
                if r.int(1)? >= cutoff || r.int(2)? != 0 {
                    break;
                }
                prefix.push(r.int(0)?);
            }
            let (Some(&first), Some(&last)) = (prefix.first(), prefix.last()) else {
                return Ok(0);
            };
            let of_events = "SELECT id FROM outbox WHERE seq BETWEEN ?1 AND ?2";
            tx.execute(
                &format!(
                    "DELETE FROM delivery_attempts WHERE delivery_id IN
                     (SELECT id FROM deliveries WHERE event_id IN ({of_events}))"
                ),
                sql_params![first, last],
            )?;
            tx.execute(
                &format!("DELETE FROM deliveries WHERE event_id IN ({of_events})"),
                sql_params![first, last],
            )?;
            tx.execute(
                "DELETE FROM outbox WHERE seq BETWEEN ?1 AND ?2",
                sql_params![first, last],
            )?;
            Ok(prefix.len())
        })?)
    }

    /// One round of [`Webhooks::prune_events`]: up to 20 batches of 500.
    /// Returns whether more may be left. A failure is logged: events are kept
    /// and the next round tries again.
    fn prune_round(&self) -> bool {
        for _ in 0..20 {
            match self.prune_events(system_now_ms(), 500) {
                Ok(500) => {}
                Ok(_) => return false,
                Err(e) => {
                    tracing::warn!(error = %e, "pruning old events failed");
                    return false;
                }
            }
        }
        true
    }

    /// Claims due deliveries with a lease (a crash mid-attempt retries after it).
    fn claim_due(&self, limit: usize) -> Result<Vec<Claimed>, WebhookError> {
        let now = system_now_ms() as i64;
        // Longer than an attempt can take; after a crash the delivery is retried when it ends.
        let lease = (self.config.timeout_ms * 2 + 1_000) as i64;
        Ok(self.db.write(|tx| {
            // Claims are taken one node at a time: the next claimer's
            // statement sees these leases and skips what they cover. Another
            // node claiming now: this one claims at its next poll.
            if !tx.try_lock("deliveries_claim")? {
                return Ok(Vec::new());
            }
            tx.query(
                "UPDATE deliveries SET next_attempt_ms = CAST(?2 AS BIGINT) + CAST(?3 AS BIGINT)
                 WHERE id IN (SELECT id FROM deliveries WHERE status = 'pending' AND next_attempt_ms <= ?2 ORDER BY next_attempt_ms LIMIT ?1)
                 RETURNING id, event_id, endpoint_id, url, environment, merchant_id, attempts, created_ms, next_attempt_ms",
                sql_params![limit as i64, now, lease],
            )?
            .iter()
            .map(|r| {
                Ok(Claimed {
                    id: r.int(0)?,
                    event_id: r.text(1)?,
                    endpoint_id: r.opt_text(2)?,
                    url: r.text(3)?,
                    environment: r.text(4)?,
                    merchant_id: r.text(5)?,
                    attempts: r.int(6)? as u32,
                    created_ms: r.int(7)? as u64,
                    lease_until: r.int(8)?,
                })
            })
            .collect::<Result<_, StorageError>>()
        })?)
    }

    /// Gives a claimed delivery back, unattempted (only while the claim is ours).
    fn release(&self, d: &Claimed) -> Result<(), WebhookError> {
        self.db.write(|tx| {
            tx.execute(
                "UPDATE deliveries SET next_attempt_ms = ?2 WHERE id = ?1 AND status = 'pending' AND next_attempt_ms = ?3",
                sql_params![d.id, system_now_ms() as i64, d.lease_until],
            )
        })?;
        Ok(())
    }

    /// Stored payload and secret of a claimed delivery; None when its endpoint is gone.
    fn load_stored(&self, d: &Claimed) -> Result<Option<(Vec<u8>, String)>, WebhookError> {
        let payload = self.db.read(|c| {
            c.query_opt(
                "SELECT payload FROM outbox WHERE id = ?1",
                sql_params![&d.event_id],
            )?
            .map(|r| r.blob(0))
            .transpose()
        })?;
        let Some(payload) = payload else {
            return Ok(None);
        };
        let secret = match &d.endpoint_id {
            Some(eid) => {
                let stored = self.db.read(|c| {
                    c.query_opt(
                        "SELECT secret FROM webhook_endpoints WHERE id = ?1 AND deleted_ms IS NULL",
                        sql_params![eid],
                    )?
                    .map(|r| r.text(0))
                    .transpose()
                })?;
                stored.map(|s| self.sealer.open(eid, &s)).transpose()?
            }
            None => Some(self.callback_secret(&d.merchant_id, &d.environment)?),
        };
        // After the secret: a deleted endpoint's delivery ends, readable or not.
        Ok(secret.map(|s| (payload, s)))
    }

    /// Body and secret of each of a round's claimed deliveries, the compact
    /// bodies built in one component call: one instance per round rather than
    /// one per delivery, so a burst of deliveries holds one instance slot
    /// (each slot used keeps memory resident) and pays one instantiation.
    fn load_all(&self, claimed: &[Claimed]) -> Vec<Loaded> {
        let mut loaded: Vec<Loaded> = claimed.iter().map(|d| self.load_stored(d)).collect();
        let mut payloads = Vec::new();
        for (payload, _) in loaded.iter_mut().flatten().flatten() {
            payloads.push(std::mem::take(payload));
        }
        let mut bodies = match self.bodies(payloads) {
            Ok(bodies) => bodies.into_iter(),
            Err(e) => {
                let message = e.to_string();
                return loaded
                    .into_iter()
                    .map(|l| match l {
                        Ok(Some(_)) => Err(WebhookError::Body(message.clone())),
                        other => other,
                    })
                    .collect();
            }
        };
        loaded
            .into_iter()
            .map(|l| match l {
                Ok(Some((_, secret))) => match bodies.next().flatten() {
                    Some(body) => Ok(Some((body, secret))),
                    None => Err(WebhookError::Unreadable),
                },
                other => other,
            })
            .collect()
    }

    fn record(&self, d: &Claimed, outcome: &Attempt) -> Result<(), WebhookError> {
        let now = system_now_ms();
        let attempts = d.attempts + 1;
        let (status, next) = if outcome.delivered() {
            ("delivered", now)
        } else {
            let schedule = &self.config.retry_schedule_ms;
            let wait = schedule
                .get(attempts as usize - 1)
                .or(schedule.last())
                .copied()
                .unwrap_or(60_000);
            if outcome.give_up || now + wait > d.created_ms + self.config.max_age_ms {
                ("failed", now)
            } else {
                ("pending", now + wait)
            }
        };
        self.db.write(|tx| {
            tx.execute(
                "INSERT INTO delivery_attempts (delivery_id, at_ms, status_code, latency_ms, error) VALUES (?1, ?2, ?3, ?4, ?5)",
                sql_params![d.id, now as i64, outcome.status_code, outcome.latency_ms as i64, &outcome.error],
            )?;
            // Fenced by the claim: a node that outlived its lease (another
            // claimed the delivery since) records its attempt, not the state.
            tx.execute(
                "UPDATE deliveries SET status = ?2, attempts = attempts + 1, next_attempt_ms = ?3, last_error = ?4,
                 delivered_ms = CASE WHEN ?2 = 'delivered' THEN CAST(?3 AS BIGINT) ELSE NULL END
                 WHERE id = ?1 AND status = 'pending' AND next_attempt_ms = ?5",
                sql_params![d.id, status, next as i64, &outcome.error, d.lease_until],
            )?;
            Ok(())
        })?;
        Ok(())
    }

    async fn attempt(&self, d: &Claimed, payload: Vec<u8>, secret: &str) -> Attempt {
        let started = Instant::now();
        let allowed = reqwest::Url::parse(&d.url).ok().filter(|u| {
            destination::literal_allowed(u, self.config.allow_private_destinations)
                && (u.scheme() == "https"
                    || d.environment == "test"
                    || self.config.allow_private_destinations)
        });
        let Some(url) = allowed else {
            return Attempt {
                status_code: None,
                latency_ms: 0,
                error: Some("destination_refused".into()),
                give_up: false,
            };
        };
        let t = system_now_ms() / 1000;
        let result = self
            .client
            .post(url)
            .header("content-type", "application/json")
            .header(
                "x-service-signature",
                signature::header(secret, t, &payload),
            )
            .header("x-service-event-id", &d.event_id)
            .body(payload)
            .send()
            .await;
        let latency_ms = started.elapsed().as_millis() as u64;
        match result {
            Ok(resp) => {
                let code = resp.status().as_u16();
                let error = (!resp.status().is_success()).then(|| "http_status".to_string());
                Attempt {
                    status_code: Some(code),
                    latency_ms,
                    error,
                    give_up: false,
                }
            }
            // A class, never the remote's text: a delivery record must not
            // tell a merchant what answers where (a probe of our network).
            Err(e) => Attempt {
                status_code: None,
                latency_ms,
                error: Some(error_class(&e).into()),
                give_up: false,
            },
        }
    }

    fn endpoint_permit(&self, d: &Claimed) -> Option<crate::permits::KeyedPermit> {
        self.per_endpoint
            .try_acquire(d.endpoint_id.as_deref().unwrap_or(&d.url))
    }

    /// Queues every current destination of an event again (manual resend).
    pub fn resend(
        &self,
        merchant_id: &str,
        environment: Environment,
        event_id: &str,
    ) -> Result<usize, WebhookError> {
        let now = system_now_ms() as i64;
        let count = self.db.write(|tx| {
            let event = tx.query_opt(
                "SELECT event_type, extra_url FROM outbox WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3",
                sql_params![event_id, merchant_id, environment.as_str()],
            )?;
            let Some(event) = event else { return Ok(None) };
            let (event_type, extra_url) = (event.text(0)?, event.opt_text(1)?);
            let mut n = 0;
            for (eid, url, enabled) in subscriptions(tx, merchant_id, environment.as_str())? {
                if matches(&enabled, &event_type) {
                    tx.execute(
                        INSERT_DELIVERY,
                        sql_params![event_id, eid, url, environment.as_str(), merchant_id, now],
                    )?;
                    n += 1;
                }
            }
            if let Some(url) = extra_url {
                tx.execute(
                    INSERT_DELIVERY,
                    sql_params![event_id, Option::<String>::None, url, environment.as_str(), merchant_id, now],
                )?;
                n += 1;
            }
            Ok(Some(n))
        })?;
        count.ok_or(WebhookError::NotFound("event"))
    }

    /// Events of a merchant and environment, newest first.
    pub fn list_events(
        &self,
        merchant_id: &str,
        environment: Environment,
        event_type: Option<&str>,
        subject: Option<&str>,
        starting_after: Option<&str>,
        limit: u32,
    ) -> Result<(Vec<Value>, bool), WebhookError> {
        let page = self.db.read(|c| {
            let after_seq = match starting_after {
                Some(id) => match c
                    .query_opt(
                        "SELECT seq FROM outbox WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3",
                        sql_params![id, merchant_id, environment.as_str()],
                    )?
                    .map(|r| r.int(0))
                    .transpose()?
                {
                    Some(seq) => seq,
                    None => return Ok(None),
                },
                None => i64::MAX,
            };
            let rows = c.query(
                "SELECT payload FROM outbox WHERE merchant_id = ?1 AND environment = ?2 AND seq < ?3
                 AND (CAST(?4 AS TEXT) IS NULL OR event_type = ?4) AND (CAST(?5 AS TEXT) IS NULL OR subject_id = ?5)
                 ORDER BY seq DESC LIMIT ?6",
                sql_params![merchant_id, environment.as_str(), after_seq, event_type, subject, limit as i64 + 1],
            )?;
            let mut payloads: Vec<Vec<u8>> =
                rows.iter().filter_map(|r| r.blob(0).ok()).collect();
            let more = payloads.len() > limit as usize;
            payloads.truncate(limit as usize);
            Ok(Some((payloads, more)))
        })?;
        // An id this merchant has no event under is refused, not read as
        // "from the newest": a mistyped cursor would restart the walk.
        let (payloads, more) = page.ok_or_else(|| {
            WebhookError::Invalid(
                format!(
                    "starting_after: no event {} in this environment.",
                    starting_after.unwrap_or_default()
                ),
                "starting_after",
            )
        })?;
        let events = self
            .bodies(payloads)?
            .into_iter()
            .flatten()
            .filter_map(|b| serde_json::from_slice(&b).ok())
            .collect();
        Ok((events, more))
    }

    /// One event with its deliveries and their attempts.
    pub fn event(
        &self,
        merchant_id: &str,
        environment: Environment,
        id: &str,
    ) -> Result<Value, WebhookError> {
        let found = self
            .db
            .read(|c| {
                let payload = c.query_opt(
                    "SELECT payload FROM outbox WHERE id = ?1 AND merchant_id = ?2 AND environment = ?3",
                    sql_params![id, merchant_id, environment.as_str()],
                )?;
                let Some(payload) = payload else { return Ok(None) };
                let payload = payload.blob(0)?;
                let deliveries = c.query(
                    "SELECT id, endpoint_id, url, status, attempts, next_attempt_ms, delivered_ms, last_error FROM deliveries WHERE event_id = ?1 ORDER BY id",
                    sql_params![id],
                )?;
                let mut out = Vec::new();
                for r in deliveries {
                    let attempts = c
                        .query(
                            "SELECT at_ms, status_code, latency_ms, error FROM delivery_attempts WHERE delivery_id = ?1 ORDER BY id",
                            sql_params![r.int(0)?],
                        )?
                        .iter()
                        .map(|a| {
                            Ok(json!({"at_ms": a.int(0)?, "status_code": a.opt_int(1)?,
                                      "latency_ms": a.int(2)?, "error": a.opt_text(3)?}))
                        })
                        .collect::<Result<Vec<Value>, StorageError>>()?;
                    out.push(json!({
                        "endpoint_id": r.opt_text(1)?,
                        "url": r.text(2)?,
                        "status": r.text(3)?,
                        "attempt_count": r.int(4)?,
                        "next_attempt_ms": r.int(5)?,
                        "delivered_ms": r.opt_int(6)?,
                        "last_error": r.opt_text(7)?,
                        "attempts": attempts,
                    }));
                }
                Ok(Some((payload, out)))
            })?
            .ok_or(WebhookError::NotFound("event"))?;
        let (payload, deliveries) = found;
        let mut event: Value = serde_json::from_slice(&self.body(payload)?).unwrap_or(Value::Null);
        event["deliveries"] = Value::Array(deliveries);
        Ok(event)
    }
}

#[derive(Debug, Clone)]
struct Claimed {
    id: i64,
    event_id: String,
    endpoint_id: Option<String>,
    url: String,
    environment: String,
    merchant_id: String,
    attempts: u32,
    created_ms: u64,
    /// The claim's lease (`next_attempt_ms` as claimed): fences what it writes.
    lease_until: i64,
}

struct Attempt {
    status_code: Option<u16>,
    latency_ms: u64,
    error: Option<String>,
    /// Retrying cannot help (the endpoint was deleted).
    give_up: bool,
}

impl Attempt {
    fn delivered(&self) -> bool {
        self.status_code.is_some_and(|c| (200..300).contains(&c))
    }
}

/// How often the delivery worker deletes events past their retention.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// The delivery worker: dispatches the outbox and delivers what is due,
/// each delivery in its own task so one slow endpoint stalls nothing else.
/// Draining, it claims nothing more; deliveries under way are waited for.
pub fn spawn(webhooks: Arc<Webhooks>, drain: Arc<crate::shutdown::Drain>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(
            webhooks.config.poll_interval_ms.max(10),
        ));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut next_prune = Instant::now();
        loop {
            tick.tick().await;
            let Some(_round) = drain.job() else { break };
            let prune = Instant::now() >= next_prune;
            if prune {
                // Whatever this round's outcome: a failing store is not asked every tick.
                next_prune = Instant::now() + PRUNE_EVERY;
            }
            let w = webhooks.clone();
            let claimed = tokio::task::spawn_blocking(
                move || -> Result<(Vec<(Claimed, Loaded)>, bool), WebhookError> {
                    // A backlog of old events (a first start with retention) goes a
                    // slice per round, so deliveries never wait behind all of it.
                    let more = prune && w.prune_round();
                    while w.dispatch_outbox(500)? == 500 {}
                    let room = w.in_flight.available_permits();
                    let claimed = if room == 0 {
                        Vec::new()
                    } else {
                        w.claim_due(room)?
                    };
                    let loaded = w.load_all(&claimed);
                    Ok((claimed.into_iter().zip(loaded).collect(), more))
                },
            )
            .await;
            let claimed = match claimed {
                Ok(Ok((c, more))) => {
                    if more {
                        next_prune = Instant::now();
                    }
                    c
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "webhook dispatch failed");
                    continue;
                }
                Err(e) => {
                    tracing::error!(error = %e, "webhook dispatch task failed");
                    continue;
                }
            };
            for (d, loaded) in claimed {
                let permits = webhooks.endpoint_permit(&d).and_then(|endpoint| {
                    let all = webhooks.in_flight.clone().try_acquire_owned().ok()?;
                    Some((all, endpoint))
                });
                let (Some(permits), Some(job)) = (permits, drain.job()) else {
                    // This endpoint is busy, or the node is draining: the
                    // delivery goes back for the next round (here or elsewhere).
                    let w = webhooks.clone();
                    let _ = tokio::task::spawn_blocking(move || w.release(&d)).await;
                    continue;
                };
                let w = webhooks.clone();
                tokio::spawn(async move {
                    let _held = (permits, job);
                    let outcome = match loaded {
                        Ok(Some((payload, secret))) => w.attempt(&d, payload, &secret).await,
                        Ok(None) => Attempt {
                            status_code: None,
                            latency_ms: 0,
                            error: Some("endpoint deleted".into()),
                            give_up: true,
                        },
                        // Recorded as a failed attempt: retried on the schedule
                        // (a later `collect` may read it) and given up at its age.
                        Err(WebhookError::Unreadable) => Attempt {
                            status_code: None,
                            latency_ms: 0,
                            error: Some("event_unreadable".into()),
                            give_up: false,
                        },
                        Err(e @ WebhookError::Body(_)) => {
                            tracing::warn!(event = %d.event_id, error = %e, "webhook body not built; retried when the lease expires");
                            return;
                        }
                        _ => return, // storage trouble: the lease expires and the delivery is retried
                    };
                    if !outcome.delivered() {
                        tracing::info!(event = %d.event_id, url = %d.url, error = ?outcome.error, "webhook delivery failed; will retry");
                    }
                    let _ = tokio::task::spawn_blocking(move || w.record(&d, &outcome)).await;
                });
            }
        }
    });
}
