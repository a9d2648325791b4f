//! Sign-in attempts, limited per account and per client address: a few
//! failures open a window in which further attempts are refused without a
//! password check. The map is bounded: entries whose window ended are
//! dropped when it is full, and if it is still full the oldest goes, so a
//! client inventing accounts or addresses cannot grow it past [`MAX_ENTRIES`].
//! Counts are per node; a fleet's nodes each allow their share.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

pub const WINDOW: Duration = Duration::from_secs(15 * 60);
/// Failures within [`WINDOW`] after which an account is refused.
pub const PER_ACCOUNT: u32 = 5;
/// Failures within [`WINDOW`] after which a client address is refused.
pub const PER_CLIENT: u32 = 20;
const MAX_ENTRIES: usize = 10_000;

#[derive(Default)]
pub struct Throttle {
    failures: Mutex<HashMap<String, (u32, Instant)>>,
}

impl Throttle {
    /// How long `account` (an email) from `client` must wait, if it must.
    pub fn wait(&self, account: &str, client: &str) -> Option<Duration> {
        let map = self.failures.lock();
        [
            (account_key(account), PER_ACCOUNT),
            (client_key(client), PER_CLIENT),
        ]
        .into_iter()
        .filter_map(|(k, limit)| {
            let (n, since) = map.get(&k)?;
            let left = WINDOW.checked_sub(since.elapsed())?;
            (*n >= limit).then_some(left)
        })
        .max()
    }

    pub fn failed(&self, account: &str, client: &str) {
        let mut map = self.failures.lock();
        for key in [account_key(account), client_key(client)] {
            if !map.contains_key(&key) && map.len() >= MAX_ENTRIES {
                map.retain(|_, (_, since)| since.elapsed() < WINDOW);
                if map.len() >= MAX_ENTRIES
                    && let Some(oldest) = map
                        .iter()
                        .min_by_key(|(_, (_, s))| *s)
                        .map(|(k, _)| k.clone())
                {
                    map.remove(&oldest);
                }
            }
            let entry = map.entry(key).or_insert((0, Instant::now()));
            if entry.1.elapsed() >= WINDOW {
                *entry = (0, Instant::now());
            }
            entry.0 += 1;
        }
    }

    /// A successful sign-in clears its account's count (not its client's).
    pub fn succeeded(&self, account: &str) {
        self.failures.lock().remove(&account_key(account));
    }

    pub fn entries(&self) -> usize {
        self.failures.lock().len()
    }
}

fn account_key(email: &str) -> String {
    format!("a {}", email.trim().to_lowercase())
}

fn client_key(client: &str) -> String {
    format!("c {client}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_account_is_refused_after_its_failures_and_cleared_by_a_success() {
        let t = Throttle::default();
        for _ in 0..PER_ACCOUNT {
            assert!(t.wait("a@x.bj", "1.2.3.4").is_none());
            t.failed("A@x.bj", "1.2.3.4");
        }
        assert!(
            t.wait("a@x.bj", "5.6.7.8").is_some(),
            "per account, from anywhere"
        );
        assert!(t.wait("b@x.bj", "5.6.7.8").is_none());
        t.succeeded("a@x.bj");
        assert!(t.wait("a@x.bj", "5.6.7.8").is_none());
    }

    #[test]
    fn a_client_is_refused_after_its_failures_on_any_account() {
        let t = Throttle::default();
        for i in 0..PER_CLIENT {
            t.failed(&format!("{i}@x.bj"), "1.2.3.4");
        }
        assert!(t.wait("new@x.bj", "1.2.3.4").is_some());
        assert!(t.wait("new@x.bj", "9.9.9.9").is_none());
    }

    #[test]
    fn the_map_stays_bounded() {
        let t = Throttle::default();
        for i in 0..(MAX_ENTRIES + 500) {
            t.failed(
                &format!("{i}@x.bj"),
                &format!("10.0.{}.{}", i / 256, i % 256),
            );
        }
        assert!(t.entries() <= MAX_ENTRIES, "{}", t.entries());
    }
}
