//! Concurrency limits per key (an API key, a client address, a webhook
//! destination): a small semaphore per key, in a map whose entries exist only
//! while a permit is held or awaited. A client choosing keys (every URL it
//! can think of, every address it has) therefore grows the map by no more
//! than the permits it holds at once, never by the keys it has used.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

type Map = Arc<Mutex<HashMap<String, Arc<Semaphore>>>>;

pub struct KeyedPermits {
    per_key: usize,
    map: Map,
}

/// One permit of one key; dropping it frees the permit, and the key's
/// entry once no one holds or awaits it.
pub struct KeyedPermit {
    permit: Option<OwnedSemaphorePermit>,
    key: String,
    map: Map,
}

impl Drop for KeyedPermit {
    fn drop(&mut self) {
        drop(self.permit.take());
        forget_if_idle(&self.map, &self.key);
    }
}

/// Removes `key`'s entry if nothing but the map refers to its semaphore
/// (every holder and waiter keeps a reference, taken under the same lock).
fn forget_if_idle(map: &Map, key: &str) {
    let mut map = map.lock();
    if map.get(key).is_some_and(|s| Arc::strong_count(s) == 1) {
        map.remove(key);
    }
}

impl KeyedPermits {
    pub fn new(per_key: usize) -> KeyedPermits {
        KeyedPermits {
            per_key: per_key.max(1),
            map: Map::default(),
        }
    }

    fn semaphore(&self, key: &str) -> Arc<Semaphore> {
        let mut map = self.map.lock();
        if let Some(s) = map.get(key) {
            return s.clone();
        }
        let s = Arc::new(Semaphore::new(self.per_key));
        map.insert(key.to_string(), s.clone());
        s
    }

    fn permit(&self, key: &str, permit: Option<OwnedSemaphorePermit>) -> Option<KeyedPermit> {
        match permit {
            Some(permit) => Some(KeyedPermit {
                permit: Some(permit),
                key: key.to_string(),
                map: self.map.clone(),
            }),
            None => {
                forget_if_idle(&self.map, key);
                None
            }
        }
    }

    /// A permit of `key` if one is free now.
    pub fn try_acquire(&self, key: &str) -> Option<KeyedPermit> {
        let permit = self.semaphore(key).try_acquire_owned().ok();
        self.permit(key, permit)
    }

    /// A permit of `key`, waiting at most `wait` for one.
    pub async fn acquire_within(&self, key: &str, wait: Duration) -> Option<KeyedPermit> {
        let semaphore = self.semaphore(key);
        let permit = tokio::time::timeout(wait, semaphore.acquire_owned())
            .await
            .ok()
            .and_then(Result::ok);
        self.permit(key, permit)
    }

    /// Keys with an entry now (held or awaited).
    pub fn keys(&self) -> usize {
        self.map.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_has_its_permits_and_no_more() {
        let permits = KeyedPermits::new(2);
        let a = permits.try_acquire("a").unwrap();
        let _b = permits.try_acquire("a").unwrap();
        assert!(permits.try_acquire("a").is_none(), "two per key");
        assert!(permits.try_acquire("other").is_some(), "per key");
        drop(a);
        assert!(permits.try_acquire("a").is_some());
    }

    #[test]
    fn keys_seen_once_leave_no_entry() {
        let permits = KeyedPermits::new(1);
        for i in 0..10_000 {
            let held = permits.try_acquire(&format!("https://{i}.example/hook"));
            assert!(held.is_some());
        }
        assert_eq!(permits.keys(), 0, "every entry gone with its permit");
        let held: Vec<_> = (0..5)
            .map(|i| permits.try_acquire(&i.to_string()).unwrap())
            .collect();
        // A refused key leaves nothing behind either.
        assert!(permits.try_acquire("0").is_none());
        assert_eq!(permits.keys(), 5, "only the keys holding a permit");
        drop(held);
        assert_eq!(permits.keys(), 0);
    }

    #[tokio::test]
    async fn a_waiter_gets_a_freed_permit_or_gives_up_without_an_entry() {
        let permits = Arc::new(KeyedPermits::new(1));
        let held = permits.try_acquire("k").unwrap();
        let short = permits.acquire_within("k", Duration::from_millis(20)).await;
        assert!(short.is_none(), "none free within the wait");
        let waiter = {
            let permits = permits.clone();
            tokio::spawn(async move {
                permits
                    .acquire_within("k", Duration::from_secs(5))
                    .await
                    .is_some()
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(held);
        assert!(waiter.await.unwrap(), "the freed permit goes to the waiter");
        assert_eq!(permits.keys(), 0);
    }
}
