//! Delivering: the worker claims due deliveries under a lease, builds their
//! bodies in one component call per round, POSTs each signed to its
//! destination in a task of its own, and records the attempt fenced by its
//! lease, so a crash or a slow endpoint loses and stalls nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mmc_storage::sql_params;
use tracing::Instrument;

use super::{Loaded, WebhookError, Webhooks, destination, signature};
use mmc_common::clock::system_now_ms;
use mmc_db::StorageError;

/// Claims up to `?1` due deliveries (due at `?2`) with a lease until `?2 +
/// ?3`, returning them; `$lock` closes the choice of rows.
macro_rules! claim_due {
    ($lock:literal) => {
        concat!(
            "UPDATE deliveries SET next_attempt_ms = CAST(?2 AS BIGINT) + CAST(?3 AS BIGINT)
             WHERE id IN (SELECT id FROM deliveries WHERE status = 'pending' AND next_attempt_ms <= ?2
                          ORDER BY next_attempt_ms LIMIT ?1",
            $lock,
            ")
             RETURNING id, event_id, endpoint_id, url, environment, merchant_id, attempts, created_ms, next_attempt_ms"
        )
    };
}

/// The claim on PostgreSQL: each claimed row is locked and rows another
/// node's claim holds are skipped (`FOR UPDATE SKIP LOCKED`), so nodes claim
/// at once without a fleet-wide lock and never the same row; a row another
/// claim committed meanwhile is judged again on its new lease and left out.
pub const CLAIM_DUE_POSTGRES: &str = claim_due!(" FOR UPDATE SKIP LOCKED");

/// The claim on SQLite, whose one writer serialises claims.
const CLAIM_DUE_SQLITE: &str = claim_due!("");

impl Webhooks {
    /// Claims due deliveries with a lease (a crash mid-attempt retries after it).
    fn claim_due(&self, limit: usize) -> Result<Vec<Claimed>, WebhookError> {
        let now = system_now_ms() as i64;
        // Longer than an attempt can take; after a crash the delivery is retried when it ends.
        let lease = (self.config.timeout_ms * 2 + 1_000) as i64;
        let claim = match self.db.engine_name() {
            "postgres" => CLAIM_DUE_POSTGRES,
            _ => CLAIM_DUE_SQLITE,
        };
        Ok(self.db.write(|tx| {
            tx.query(claim, sql_params![limit as i64, now, lease])?
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
        if let Some(m) = self.metrics.get() {
            m.webhook_attempt(match status {
                "delivered" => "delivered",
                "failed" => "given_up",
                _ => "failed",
            });
        }
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
        // Its own trace (the request that caused the event is long answered);
        // the receiver sees it as the caller's `traceparent`.
        let span = tracing::debug_span!(
            "webhook",
            event_id = %d.event_id,
            attempt = d.attempts + 1,
            http.response.status_code = tracing::field::Empty,
        );
        let mut trace_headers = reqwest::header::HeaderMap::new();
        mmc_telemetry::traces::inject(&span, &mut trace_headers);
        let result = self
            .client
            .post(url)
            .headers(trace_headers)
            .header("content-type", "application/json")
            .header(
                "x-service-signature",
                signature::header(secret, t, &payload),
            )
            .header("x-service-event-id", &d.event_id)
            .body(payload)
            .send()
            .instrument(span.clone())
            .await;
        let latency_ms = started.elapsed().as_millis() as u64;
        if let Ok(resp) = &result {
            span.record("http.response.status_code", resp.status().as_u16());
        }
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

    fn endpoint_permit(&self, d: &Claimed) -> Option<mmc_common::permits::KeyedPermit> {
        self.per_endpoint
            .try_acquire(d.endpoint_id.as_deref().unwrap_or(&d.url))
    }
}

pub(super) fn client(allow_private: bool, timeout: Duration) -> reqwest::Client {
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
pub fn spawn(webhooks: Arc<Webhooks>, drain: Arc<mmc_common::shutdown::Drain>) {
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
            let claimed = tokio::task::spawn_blocking(move || w.claim_round(prune)).await;
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
                start_delivery(&webhooks, &drain, d, loaded).await;
            }
        }
    });
}

impl Webhooks {
    /// One round's work on the store: a slice of old events pruned (when
    /// `prune`), the outbox dispatched, and what the worker has room for
    /// claimed with its body loaded. The flag: more is left to prune.
    fn claim_round(&self, prune: bool) -> Result<(Vec<(Claimed, Loaded)>, bool), WebhookError> {
        // A backlog of old events (a first start with retention) goes a
        // slice per round, so deliveries never wait behind all of it.
        let more = prune && self.prune_round();
        while self.dispatch_outbox(500)? == 500 {}
        let room = self.in_flight.available_permits();
        let claimed = if room == 0 {
            Vec::new()
        } else {
            self.claim_due(room)?
        };
        let loaded = self.load_all(&claimed);
        Ok((claimed.into_iter().zip(loaded).collect(), more))
    }
}

/// Starts a claimed delivery in a task of its own, holding a permit of the
/// worker and one of its endpoint.
async fn start_delivery(
    webhooks: &Arc<Webhooks>,
    drain: &Arc<mmc_common::shutdown::Drain>,
    d: Claimed,
    loaded: Loaded,
) {
    let permits = webhooks.endpoint_permit(&d).and_then(|endpoint| {
        let all = webhooks.in_flight.clone().try_acquire_owned().ok()?;
        Some((all, endpoint))
    });
    let (Some(permits), Some(job)) = (permits, drain.job()) else {
        // This endpoint is busy, or the node is draining: the
        // delivery goes back for the next round (here or elsewhere).
        let w = webhooks.clone();
        let _ = tokio::task::spawn_blocking(move || w.release(&d)).await;
        return;
    };
    let w = webhooks.clone();
    tokio::spawn(async move {
        let _held = (permits, job);
        deliver(w, d, loaded).await;
    });
}

/// Attempts one delivery (or records why it cannot be attempted) and
/// records the attempt.
async fn deliver(w: Arc<Webhooks>, d: Claimed, loaded: Loaded) {
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
}
