//! Webhook delivery settings (`[webhooks]`).

use serde::{Deserialize, Serialize};

/// Delivery settings. The defaults are the documented retry schedule
/// (docs/webhooks.md); tests shorten it.
#[derive(Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebhookConfig {
    /// Wait after the 1st, 2nd, … failed attempt; the last value repeats.
    pub retry_schedule_ms: Vec<u64>,
    /// Give up this long after the event.
    pub max_age_ms: u64,
    /// Events older than this many days are deleted with their deliveries and
    /// attempts (as Stripe keeps 30 days of events); 0 keeps them forever.
    pub event_retention_days: u64,
    pub timeout_ms: u64,
    pub poll_interval_ms: u64,
    /// Deliveries in flight at once, and per endpoint (a slow endpoint cannot take them all).
    pub concurrency: usize,
    pub per_endpoint_concurrency: usize,
    /// Loopback and private destinations (endpoints, `callback_url`) are
    /// refused in every environment unless this is set: development and
    /// tests only (`make run` sets it for its demo).
    pub allow_private_destinations: bool,
    /// Seals signing secrets at rest (64 hex digits); generated into
    /// `<data_dir>/webhook_secrets_key` when unset. See the host's `webhooks::sealing`.
    pub secrets_key: Option<String>,
    /// Earlier keys: values sealed under them still open, and are sealed
    /// again under `secrets_key` at start.
    pub previous_secrets_keys: Vec<String>,
}

// By hand: the sealing keys must never reach a log line.
impl std::fmt::Debug for WebhookConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookConfig")
            .field("retry_schedule_ms", &self.retry_schedule_ms)
            .field("max_age_ms", &self.max_age_ms)
            .field("event_retention_days", &self.event_retention_days)
            .field("timeout_ms", &self.timeout_ms)
            .field("poll_interval_ms", &self.poll_interval_ms)
            .field("concurrency", &self.concurrency)
            .field("per_endpoint_concurrency", &self.per_endpoint_concurrency)
            .field(
                "allow_private_destinations",
                &self.allow_private_destinations,
            )
            .field(
                "secrets_key",
                &self.secrets_key.as_ref().map(|_| "<redacted>"),
            )
            .field("previous_secrets_keys", &self.previous_secrets_keys.len())
            .finish()
    }
}

impl WebhookConfig {
    /// How long events are kept, in ms; `None` for ever (`event_retention_days = 0`).
    pub fn event_retention_ms(&self) -> Option<u64> {
        (self.event_retention_days != 0)
            .then(|| self.event_retention_days.saturating_mul(24 * 3600 * 1000))
    }
}

impl Default for WebhookConfig {
    fn default() -> Self {
        const MIN: u64 = 60_000;
        WebhookConfig {
            retry_schedule_ms: vec![MIN, 5 * MIN, 30 * MIN, 120 * MIN, 300 * MIN, 600 * MIN],
            max_age_ms: 3 * 24 * 3600 * 1000,
            event_retention_days: 30,
            timeout_ms: 30_000,
            poll_interval_ms: 200,
            concurrency: 64,
            per_endpoint_concurrency: 4,
            allow_private_destinations: false,
            secrets_key: None,
            previous_secrets_keys: Vec::new(),
        }
    }
}
