//! Token buckets: per API key (DESIGN: 100 req/s, burst 200 by default), and
//! per client address on the anonymous surfaces (the checkout page, the
//! operators' callbacks), where there is no key to count by.
//!
//! In a fleet a key's limit is shared: each of N live nodes allows 1/N of it
//! (the load balancer spreads a key's requests over the nodes), so the
//! fleet allows the limit, not N times it, with no database write per request.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Sustained requests per second per key; 0 disables limiting.
    pub per_second: f64,
    pub burst: f64,
    /// Requests without a key (checkout page, operators' callbacks) per
    /// client address and surface; 0 disables. Behind a load balancer every
    /// client is the balancer: raise it there (or limit at the balancer).
    pub per_client_per_second: f64,
    pub per_client_burst: f64,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            per_second: 100.0,
            burst: 200.0,
            per_client_per_second: 50.0,
            per_client_burst: 200.0,
        }
    }
}

struct Bucket {
    tokens: f64,
    last: Instant,
}

pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    buckets: Mutex<HashMap<String, Bucket>>,
    /// Live nodes sharing this limit (1 alone).
    nodes: AtomicU32,
}

impl RateLimiter {
    /// Per API key.
    pub fn new(config: RateLimitConfig) -> RateLimiter {
        RateLimiter::with_rate(config.per_second, config.burst)
    }

    /// Per client address, for requests without a key.
    pub fn per_client(config: &RateLimitConfig) -> RateLimiter {
        RateLimiter::with_rate(config.per_client_per_second, config.per_client_burst)
    }

    pub fn with_rate(per_second: f64, burst: f64) -> RateLimiter {
        RateLimiter {
            per_second,
            burst,
            buckets: Mutex::new(HashMap::new()),
            nodes: AtomicU32::new(1),
        }
    }

    /// How many nodes share the limit from now on.
    pub fn share_among(&self, nodes: u32) {
        self.nodes.store(nodes.max(1), Ordering::Relaxed);
    }

    /// Takes a token for `key`, or says how long until one is available.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        if self.per_second <= 0.0 {
            return Ok(());
        }
        let share = f64::from(self.nodes.load(Ordering::Relaxed));
        let (per_second, burst) = (self.per_second / share, (self.burst / share).max(1.0));
        let now = Instant::now();
        let mut buckets = self.buckets.lock();
        if buckets.len() > 100_000 {
            // Bound memory: forget idle keys (a full bucket is the same as none).
            let full = burst / per_second;
            buckets.retain(|_, b| now.duration_since(b.last).as_secs_f64() < full);
        }
        let b = buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: burst,
            last: now,
        });
        b.tokens = (b.tokens + now.duration_since(b.last).as_secs_f64() * per_second).min(burst);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - b.tokens) / per_second))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refuse_with_a_wait() {
        let rl = RateLimiter::with_rate(10.0, 3.0);
        assert!(rl.check("k").is_ok() && rl.check("k").is_ok() && rl.check("k").is_ok());
        let wait = rl.check("k").unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_millis(100),
            "{wait:?}"
        );
        assert!(rl.check("other").is_ok(), "per key");
    }

    #[test]
    fn a_fleet_shares_the_limit() {
        let rl = RateLimiter::with_rate(10.0, 4.0);
        rl.share_among(2);
        assert!(rl.check("k").is_ok() && rl.check("k").is_ok());
        assert!(
            rl.check("k").is_err(),
            "half the burst on each of two nodes"
        );
    }
}
