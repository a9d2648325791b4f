//! Memory the allocator holds free, given back to the system after a burst.

/// glibc's malloc keeps what threads free in their arenas (up to eight per
/// core) rather than give it back. Requests move between tokio's workers
/// and its blocking threads (dozens under load), so a burst (a flood of
/// sign-ins, say) left its garbage spread over every arena: 100 MiB more
/// resident memory for good after `bench/console_abuse.py`'s 14 s. Every
/// `limits.memory_trim_ms`, if the process grew by more than
/// [`TRIM_AFTER_GROWTH`] since it last gave memory back, the free pages are
/// handed back. A steady load does not grow, so it pays nothing: trimming
/// every second regardless cost creates ~7%, and fewer arenas 7–13%.
pub fn give_back_freed_memory(period_ms: u64) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if period_ms == 0 {
            return;
        }
        let period = std::time::Duration::from_millis(period_ms);
        let spawned = std::thread::Builder::new()
            .name("malloc-trim".into())
            .spawn(move || {
                let mut settled = resident_bytes();
                loop {
                    std::thread::sleep(period);
                    let now = resident_bytes();
                    if now > settled + TRIM_AFTER_GROWTH {
                        // SAFETY: malloc_trim only returns free pages to the system.
                        unsafe {
                            libc::malloc_trim(0);
                        }
                        settled = resident_bytes();
                    } else {
                        settled = settled.min(now);
                    }
                }
            });
        if let Err(e) = spawned {
            eprintln!("malloc-trim thread not started: {e}");
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = period_ms;
}

/// Growth of resident memory that makes the allocator give back what it holds free.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_AFTER_GROWTH: u64 = 16 << 20;

/// This process's resident memory (`/proc/self/statm`), 0 if unreadable.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn resident_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64;
    pages * page
}
