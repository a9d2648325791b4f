//! The `cache` capability: a few values per component in the host's memory,
//! each with a time to live (an operator's OAuth token lasts an hour; asking
//! for a new one before every call doubled the calls per payment). Keyed by
//! component name, so a hot-swapped version of an adapter finds its
//! predecessor's token; bounded, so no component can grow the host.

use std::collections::HashMap;

use parking_lot::Mutex;

use crate::bindings::host::mmc::platform::cache::Host;
use mmc_common::clock::Clock;

/// Entries one component may hold; beyond, expired ones go, then the oldest.
const MAX_ENTRIES: usize = 256;
const MAX_KEY: usize = 256;
const MAX_VALUE: usize = 64 * 1024;
const MAX_TTL_MS: u64 = 24 * 3600 * 1000;

struct Entry {
    value: Vec<u8>,
    expires_ms: u64,
    stored_ms: u64,
}

#[derive(Default)]
pub struct Cache {
    by_component: Mutex<HashMap<String, HashMap<String, Entry>>>,
}

impl Cache {
    pub fn get(&self, component: &str, key: &str, now_ms: u64) -> Option<Vec<u8>> {
        let map = self.by_component.lock();
        let e = map.get(component)?.get(key)?;
        (e.expires_ms > now_ms).then(|| e.value.clone())
    }

    pub fn set(&self, component: &str, key: &str, value: Vec<u8>, ttl_ms: u64, now_ms: u64) {
        let mut map = self.by_component.lock();
        let entries = map.entry(component.to_string()).or_default();
        if ttl_ms == 0 {
            entries.remove(key); // forget it (a token the operator dropped)
            return;
        }
        if key.len() > MAX_KEY || value.len() > MAX_VALUE {
            return; // too big to keep: the component fetches it again
        }
        if entries.len() >= MAX_ENTRIES && !entries.contains_key(key) {
            entries.retain(|_, e| e.expires_ms > now_ms);
            if entries.len() >= MAX_ENTRIES
                && let Some(oldest) = entries
                    .iter()
                    .min_by_key(|(_, e)| e.stored_ms)
                    .map(|(k, _)| k.clone())
            {
                entries.remove(&oldest);
            }
        }
        entries.insert(
            key.to_string(),
            Entry {
                value,
                expires_ms: now_ms.saturating_add(ttl_ms.min(MAX_TTL_MS)),
                stored_ms: now_ms,
            },
        );
    }
}

pub struct View<'a> {
    pub component: &'a str,
    pub cache: &'a Cache,
    pub clock: &'a dyn Clock,
}

/// The marker the runtime links this interface with.
pub type Cap = View<'static>;

impl wasmtime::component::HasData for Cap {
    type Data<'a> = View<'a>;
}

impl Host for View<'_> {
    fn get(&mut self, key: String) -> wasmtime::Result<Option<Vec<u8>>> {
        let now = self.clock.now_ms();
        Ok(self.cache.get(self.component, &key, now))
    }

    fn set(&mut self, key: String, value: Vec<u8>, ttl_ms: u64) -> wasmtime::Result<()> {
        let now = self.clock.now_ms();
        self.cache.set(self.component, &key, value, ttl_ms, now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_live_until_their_ttl_per_component() {
        let c = Cache::default();
        c.set("momo", "token", b"t1".to_vec(), 1_000, 10_000);
        assert_eq!(c.get("momo", "token", 10_999), Some(b"t1".to_vec()));
        assert_eq!(c.get("momo", "token", 11_000), None, "expired");
        assert_eq!(c.get("wave", "token", 10_500), None, "per component");
    }

    #[test]
    fn a_component_cannot_grow_it_without_bound() {
        let c = Cache::default();
        for i in 0..(MAX_ENTRIES + 50) {
            c.set("x", &format!("k{i}"), vec![0; 10], 60_000, i as u64);
        }
        assert_eq!(c.by_component.lock()["x"].len(), MAX_ENTRIES);
        assert_eq!(c.get("x", "k0", 1_000), None, "the oldest went");
        c.set("x", "big", vec![0; MAX_VALUE + 1], 60_000, 0);
        assert_eq!(c.get("x", "big", 1), None);
    }
}
