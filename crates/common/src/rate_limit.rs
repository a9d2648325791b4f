//! Token buckets: per API key (100 req/s, burst 200 by default), and
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

/// Buckets kept at most per limiter (keys and client addresses are the
/// client's choice: one with many addresses must not grow the host).
const MAX_BUCKETS: usize = 100_000;
/// A full map is swept for idle buckets at most this often (a sweep is a
/// pass over the map: not once per request).
const SWEEP_EVERY: Duration = Duration::from_secs(1);

struct Bucket {
    tokens: f64,
    last: Instant,
}

impl Bucket {
    /// Refills for the time since it was last used, then takes a token or
    /// says how long until one is available.
    fn take(&mut self, now: Instant, per_second: f64, burst: f64) -> Result<(), Duration> {
        self.tokens =
            (self.tokens + now.duration_since(self.last).as_secs_f64() * per_second).min(burst);
        self.last = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            Ok(())
        } else {
            Err(Duration::from_secs_f64((1.0 - self.tokens) / per_second))
        }
    }

    /// Refilled by now: the same as no bucket at all.
    fn idle(&self, now: Instant, per_second: f64, burst: f64) -> bool {
        self.tokens + now.duration_since(self.last).as_secs_f64() * per_second >= burst
    }
}

/// Past [`MAX_BUCKETS`], the buckets that are not yet full stay (forgetting
/// one would hand its owner a new burst) and every newcomer shares one
/// overflow bucket until a sweep frees room: the cap can make newcomers
/// wait, never let anyone past their limit.
struct Buckets {
    map: HashMap<String, Bucket>,
    overflow: Bucket,
    swept: Instant,
}

pub struct RateLimiter {
    per_second: f64,
    burst: f64,
    max_buckets: usize,
    buckets: Mutex<Buckets>,
    /// Live nodes sharing this limit (1 alone).
    nodes: AtomicU32,
}

impl RateLimiter {
    /// `per_second` tokens, up to `burst` held; a rate of 0 is no limit.
    pub fn with_rate(per_second: f64, burst: f64) -> RateLimiter {
        RateLimiter::bounded(per_second, burst, MAX_BUCKETS)
    }

    fn bounded(per_second: f64, burst: f64, max_buckets: usize) -> RateLimiter {
        let now = Instant::now();
        RateLimiter {
            per_second,
            burst,
            max_buckets,
            buckets: Mutex::new(Buckets {
                map: HashMap::new(),
                overflow: Bucket {
                    tokens: burst,
                    last: now,
                },
                swept: now,
            }),
            nodes: AtomicU32::new(1),
        }
    }

    /// Buckets held now.
    pub fn buckets(&self) -> usize {
        self.buckets.lock().map.len()
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
        let buckets = &mut *buckets;
        if let Some(b) = buckets.map.get_mut(key) {
            return b.take(now, per_second, burst);
        }
        if buckets.map.len() >= self.max_buckets && now.duration_since(buckets.swept) >= SWEEP_EVERY
        {
            buckets.swept = now;
            buckets.map.retain(|_, b| !b.idle(now, per_second, burst));
        }
        if buckets.map.len() >= self.max_buckets {
            return buckets.overflow.take(now, per_second, burst);
        }
        let mut b = Bucket {
            tokens: burst,
            last: now,
        };
        let taken = b.take(now, per_second, burst);
        buckets.map.insert(key.to_string(), b);
        taken
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
    fn buckets_are_capped_and_a_flood_of_new_keys_resets_no_one() {
        let rl = RateLimiter::bounded(1.0, 2.0, 100);
        // A client drains its bucket.
        assert!(rl.check("drained").is_ok() && rl.check("drained").is_ok());
        assert!(rl.check("drained").is_err());
        for i in 0..10_000 {
            let _ = rl.check(&format!("10.0.{}.{}", i / 256, i % 256));
        }
        assert_eq!(rl.buckets(), 100, "never more than the cap");
        assert!(
            rl.check("drained").is_err(),
            "its bucket was not forgotten to make room"
        );
        // Newcomers past the cap share one bucket: a few get through, then none.
        let through = (0..50)
            .filter(|i| rl.check(&format!("new-{i}")).is_ok())
            .count();
        assert!(through <= 2, "{through} newcomers past the cap got through");
    }

    #[test]
    fn idle_buckets_are_swept_to_make_room() {
        let rl = RateLimiter::bounded(1000.0, 2.0, 10);
        for i in 0..10 {
            rl.check(&i.to_string()).unwrap();
        }
        assert_eq!(rl.buckets(), 10);
        // Refilled (idle) after 2 ms; the map is swept once a second at most.
        std::thread::sleep(SWEEP_EVERY + Duration::from_millis(10));
        rl.check("newcomer").unwrap();
        assert_eq!(
            rl.buckets(),
            1,
            "the idle ones went, the newcomer has its own"
        );
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
