//! Storage requests the store could not serve, counted process-wide for
//! `/metrics`: a disk, a database or a connection in trouble shows here
//! before it shows as errors on every route.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::StorageError;

static HOST: AtomicU64 = AtomicU64::new(0);
static COMPONENTS: AtomicU64 = AtomicU64::new(0);

/// Who asked the store.
#[derive(Debug, Clone, Copy)]
pub enum By {
    /// The host's own tables (merchants, keys, deliveries…).
    Host,
    /// A component, through the storage capability.
    Components,
}

/// Counts `e` when it says the store could not serve the request (a refusal
/// of the request itself, `Invalid`, is the caller's and is not counted).
pub fn note(by: By, e: &StorageError) {
    if matches!(e, StorageError::Unavailable(_)) {
        let counter = match by {
            By::Host => &HOST,
            By::Components => &COMPONENTS,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// The counts so far, by who asked.
pub fn counts() -> [(&'static str, u64); 2] {
    [
        ("components", COMPONENTS.load(Ordering::Relaxed)),
        ("host", HOST.load(Ordering::Relaxed)),
    ]
}
