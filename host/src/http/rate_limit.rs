//! Per-API-key token buckets (DESIGN: 100 req/s, burst 200 by default).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Sustained requests per second per key; 0 disables limiting.
    pub per_second: f64,
    pub burst: f64,
}

impl Default for RateLimitConfig {
    fn default() -> Self {
        RateLimitConfig {
            per_second: 100.0,
            burst: 200.0,
        }
    }
}

struct Bucket {
    tokens: f64,
    last: Instant,
}

pub struct RateLimiter {
    config: RateLimitConfig,
    buckets: Mutex<HashMap<String, Bucket>>,
}

impl RateLimiter {
    pub fn new(config: RateLimitConfig) -> RateLimiter {
        RateLimiter {
            config,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Takes a token for `key`, or says how long until one is available.
    pub fn check(&self, key: &str) -> Result<(), Duration> {
        if self.config.per_second <= 0.0 {
            return Ok(());
        }
        let now = Instant::now();
        let mut buckets = self.buckets.lock();
        if buckets.len() > 100_000 {
            // Bound memory: forget idle keys (a full bucket is the same as none).
            let full = self.config.burst / self.config.per_second;
            buckets.retain(|_, b| now.duration_since(b.last).as_secs_f64() < full);
        }
        let b = buckets.entry(key.to_string()).or_insert(Bucket {
            tokens: self.config.burst,
            last: now,
        });
        b.tokens = (b.tokens + now.duration_since(b.last).as_secs_f64() * self.config.per_second)
            .min(self.config.burst);
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64(
                (1.0 - b.tokens) / self.config.per_second,
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn burst_then_refuse_with_a_wait() {
        let rl = RateLimiter::new(RateLimitConfig {
            per_second: 10.0,
            burst: 3.0,
        });
        assert!(rl.check("k").is_ok() && rl.check("k").is_ok() && rl.check("k").is_ok());
        let wait = rl.check("k").unwrap_err();
        assert!(
            wait > Duration::ZERO && wait <= Duration::from_millis(100),
            "{wait:?}"
        );
        assert!(rl.check("other").is_ok(), "per key");
    }
}
