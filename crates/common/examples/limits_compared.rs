//! The host's token buckets (`mmc_common::rate_limit`) beside governor's
//! keyed limiter, on what decides between them: the time of one check on a
//! key in use, and the memory held after a client cycles through a million
//! addresses (each one a new key). Run by `make bench` (`bench/crates_compared.sh`);
//! prints one JSON object.
//!
//! Both limiters are given the same quota (100 a second, a burst of 200).
//! Live bytes are counted by a global allocator, so the figures are the
//! limiters' own, not the process's resident pages.

use std::alloc::{GlobalAlloc, Layout, System};
use std::num::NonZeroU32;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use governor::{DefaultKeyedRateLimiter, Quota};
use mmc_common::rate_limit::RateLimiter;

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size(), Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(new_size, Ordering::Relaxed);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const PER_SECOND: u32 = 100;
const BURST: u32 = 200;
/// Checks of one key in use, timed.
const CHECKS: u32 = 2_000_000;
/// Distinct keys a client cycles through (addresses, guessed keys).
const ADDRESSES: u32 = 1_000_000;

/// Nanoseconds per check of the same key, and how many were allowed (the
/// same for both: a burst, then the refill).
fn hot(check: impl Fn(&String) -> bool) -> (f64, u32) {
    let key = String::from("mk_live_0123456789abcdef");
    let started = Instant::now();
    let mut allowed = 0;
    for _ in 0..CHECKS {
        allowed += u32::from(check(&key));
    }
    (
        started.elapsed().as_nanos() as f64 / f64::from(CHECKS),
        allowed,
    )
}

/// Bytes still held after one check of each of `ADDRESSES` new keys.
fn cycled(check: impl Fn(&String) -> bool) -> usize {
    let before = LIVE.load(Ordering::Relaxed);
    let mut key = String::with_capacity(24);
    for n in 0..ADDRESSES {
        key.clear();
        key.push_str(&format!("10.{}.{}.{}", n >> 16, (n >> 8) & 255, n & 255));
        check(&key);
    }
    LIVE.load(Ordering::Relaxed).saturating_sub(before)
}

fn governor() -> DefaultKeyedRateLimiter<String> {
    let quota = Quota::per_second(NonZeroU32::new(PER_SECOND).unwrap())
        .allow_burst(NonZeroU32::new(BURST).unwrap());
    DefaultKeyedRateLimiter::keyed(quota)
}

fn ours() -> RateLimiter {
    RateLimiter::with_rate(f64::from(PER_SECOND), f64::from(BURST))
}

fn main() {
    let mib = |b: usize| b as f64 / (1024.0 * 1024.0);

    let limiter = ours();
    let (ours_ns, ours_allowed) = hot(|k| limiter.check(k).is_ok());
    drop(limiter);
    let limiter = governor();
    let (gov_ns, gov_allowed) = hot(|k| limiter.check_key(k).is_ok());
    drop(limiter);

    let limiter = ours();
    let ours_bytes = cycled(|k| limiter.check(k).is_ok());
    let ours_keys = limiter.buckets();
    drop(limiter);
    let limiter = governor();
    let gov_bytes = cycled(|k| limiter.check_key(k).is_ok());
    let gov_keys = limiter.len();
    drop(limiter);

    println!(
        "{{\"check_ns\": {{\"ours\": {ours_ns:.1}, \"governor\": {gov_ns:.1}}}, \
         \"allowed_of_{CHECKS}\": {{\"ours\": {ours_allowed}, \"governor\": {gov_allowed}}}, \
         \"after_{ADDRESSES}_addresses\": {{\"ours\": {{\"keys\": {ours_keys}, \"mib\": {:.1}}}, \
         \"governor\": {{\"keys\": {gov_keys}, \"mib\": {:.1}}}}}}}",
        mib(ours_bytes),
        mib(gov_bytes)
    );
}
