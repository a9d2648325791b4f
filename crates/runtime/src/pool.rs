//! Instance slots. Components run in wasmtime's pooling allocator: linear
//! memories are reserved once and reused, so a call does not pay an `mmap`,
//! page faults on fresh pages and an `munmap` (they were a quarter of a GET's
//! CPU). The pool is finite, so calls take a slot from a [`Gate`] first: a
//! burst beyond the pool waits for a slot instead of failing.

use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};
use wasmtime::{Enabled, InstanceAllocationStrategy, PoolingAllocationConfig};

/// Memory kept mapped in a returned slot and reset in place rather than
/// `madvise`d away, so reuse costs no page faults. With the `PAGEMAP_SCAN`
/// ioctl (Linux 6.7+) only the pages the call dirtied are reset; without it
/// the whole region is `memset` on every return, so keep none (`madvise`).
/// 1 MiB, not 4: the scan (5% of a GET's CPU at 4 MiB) reports up to the
/// kept region's worth of dirty pages, and a call dirties less than 1 MiB.
/// (Its cost is not the length of the memory it walks: a 256 KiB Wasm stack
/// instead of 1 MiB, a shorter memory, changed nothing: docs/benchmarks.md.)
/// Alternating builds (`bench/ab.sh`): CPU per GET 54.0 → 52.7 µs and per
/// create 440–456 → 413–424 µs, lower in every pair.
fn keep_resident() -> usize {
    if PoolingAllocationConfig::is_pagemap_scan_available() {
        1024 * 1024
    } else {
        0
    }
}

/// Idle slots that keep their memory for the module that last ran in them.
/// A returned slot stays resident (see [`keep_resident`]); wasmtime's default
/// (100) lets the set of resident slots creep towards 100 more than the
/// busiest moment, a slot at a time, so memory grew through a long soak.
/// With a few, a new instance reuses another module's idle slot before it
/// touches a cold one: resident slots follow the peak of concurrent calls.
/// A module still finds its own warm slot first, so the hot path is unchanged.
const MAX_UNUSED_WARM_SLOTS: u32 = 16;

/// The allocation strategy for an engine whose instances may grow to
/// `max_memory_mib`, with `slots` calls at once into API components and as
/// many into adapters.
/// `slots`: API and adapter slots and idle warm instances together.
pub fn strategy(max_memory_mib: u64, slots: u32) -> InstanceAllocationStrategy {
    let instances = slots + 16; // + load-time describes and smoke tests
    let mut pool = PoolingAllocationConfig::new();
    pool.total_component_instances(instances)
        // A wit-bindgen component is a main module plus a few adapter shims.
        .total_core_instances(instances * 8)
        .total_memories(instances * 2)
        .total_tables(instances * 4)
        .max_memories_per_component(4)
        .max_tables_per_component(8)
        .max_memory_size((max_memory_mib as usize) << 20)
        .pagemap_scan(Enabled::Auto)
        .linear_memory_keep_resident(keep_resident())
        .table_keep_resident(64 * 1024)
        .max_unused_warm_slots(MAX_UNUSED_WARM_SLOTS)
        // Fiber stacks, for async calls: this engine makes none, but the pool
        // reserves them all the same (2 GiB for wasmtime's default 1,000).
        .total_stacks(instances);
    InstanceAllocationStrategy::Pooling(pool)
}

/// A counting semaphore for blocking threads.
pub struct Gate {
    free: Mutex<u32>,
    freed: Condvar,
}

pub struct Permit<'a>(&'a Gate);

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        *self.0.free.lock() += 1;
        self.0.freed.notify_one();
    }
}

impl Gate {
    pub fn new(slots: u32) -> Gate {
        Gate {
            free: Mutex::new(slots),
            freed: Condvar::new(),
        }
    }

    /// A slot, or `None` if none frees up within `wait`.
    pub fn enter(&self, wait: Duration) -> Option<Permit<'_>> {
        let until = Instant::now() + wait;
        let mut free = self.free.lock();
        while *free == 0 {
            if self.freed.wait_until(&mut free, until).timed_out() && *free == 0 {
                return None;
            }
        }
        *free -= 1;
        Some(Permit(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_gate_waits_then_times_out_and_frees_on_drop() {
        let gate = Gate::new(1);
        let first = gate.enter(Duration::from_millis(10)).expect("a free slot");
        assert!(gate.enter(Duration::from_millis(20)).is_none());
        drop(first);
        assert!(gate.enter(Duration::from_millis(10)).is_some());
    }
}
