//! Providers cap how often they may be asked where an operation stands (MTN:
//! 10 status requests a second). An adapter declares its provider's cap
//! (`operator-info.status-per-second`); the host spaces that adapter's
//! status queries on this node evenly to it. A query that would wait longer
//! than [`MAX_WAIT`] for its turn is not sent: its outcome stays unknown and
//! it is asked again on the next round, so a large reconciliation round
//! never holds a request (or a thread) for long.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The longest a status query waits for its turn.
pub const MAX_WAIT: Duration = Duration::from_secs(1);

/// The next free turn of each paced adapter (keyed by adapter name: the
/// platform team's configuration, never a client's choice).
#[derive(Default)]
pub struct StatusPacer {
    next: Mutex<HashMap<String, Instant>>,
}

impl StatusPacer {
    /// Takes a turn of `adapter` at `per_second` (0: no cap), waiting for it
    /// on this thread; false when the turn is further than `max_wait` away
    /// (nothing is taken then).
    pub fn take(&self, adapter: &str, per_second: u32, max_wait: Duration) -> bool {
        if per_second == 0 {
            return true;
        }
        let wait = {
            let interval = Duration::from_secs(1) / per_second;
            let now = Instant::now();
            let mut next = self.next.lock();
            let turn = next.get(adapter).map_or(now, |t| (*t).max(now));
            if turn - now > max_wait {
                return false;
            }
            next.insert(adapter.to_string(), turn + interval);
            turn - now
        };
        if !wait.is_zero() {
            std::thread::sleep(wait);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turns_are_spaced_to_the_cap_and_far_ones_are_refused() {
        let pacer = StatusPacer::default();
        let started = Instant::now();
        for _ in 0..5 {
            assert!(pacer.take("momo", 10, MAX_WAIT));
        }
        // Five turns at 10 a second: the fifth starts 400 ms after the first.
        let took = started.elapsed();
        assert!(took >= Duration::from_millis(390), "{took:?}");
        // Turns more than the wait away are refused, and take nothing.
        assert!(!pacer.take("momo", 10, Duration::ZERO));
        assert!(pacer.take("momo", 10, Duration::from_millis(200)));
        // Another adapter, or no cap, is not held up.
        let at = Instant::now();
        assert!(pacer.take("wave", 10, MAX_WAIT));
        assert!(pacer.take("pawapay", 0, Duration::ZERO));
        assert!(at.elapsed() < Duration::from_millis(50));
    }
}
