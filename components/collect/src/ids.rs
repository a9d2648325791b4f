//! Identifiers. Payment, refund and event ids are UUIDv7: time-ordered, so
//! records created together sit side by side in the storage B-trees (one page
//! written for a group of inserts instead of one random page each), while
//! still being the UUIDs the contract promises. The timestamp comes from the
//! host's clock capability; the rest is random.

use uuid::{NoContext, Timestamp, Uuid};

use crate::mmc::platform::clock;

/// A fresh time-ordered UUID.
pub fn new() -> Uuid {
    let ms = clock::now_ms();
    let ts = Timestamp::from_unix(NoContext, ms / 1000, ((ms % 1000) * 1_000_000) as u32);
    Uuid::new_v7(ts)
}
