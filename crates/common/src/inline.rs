//! Reads served on the tokio worker that accepted them. Handing a GET
//! to a blocking thread and back cost two thread wake-ups per request, a
//! fifth of a GET's CPU; a GET's component call is ~50 µs of CPU and, on
//! SQLite, waits on nothing, so it runs where its request was read.
//!
//! A worker must never block, so every place the host may wait — a storage
//! write's fsync, outbound HTTP, a full instance pool, a WASI stream that
//! blocks — goes through [`may_block`], which hands the worker's core to
//! another thread (`block_in_place`) for the wait. And a call that computes
//! for longer than [`BUDGET`] on the worker (a hostile or a heavy component)
//! is stopped at the next epoch tick and started again on a blocking thread
//! (the runtime's `CallError::InlineBudget`): it may hold a worker for a few
//! milliseconds, never for its whole deadline.

use std::cell::Cell;
use std::time::{Duration, Instant};

/// Worker time one inline request may take before it moves to a blocking thread.
pub const BUDGET: Duration = Duration::from_millis(20);

thread_local! {
    /// Set while this thread serves a request inline: when its worker time started.
    static SINCE: Cell<Option<Instant>> = const { Cell::new(None) };
    /// A call of the inline request on this thread was stopped for its budget.
    static HIT: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` as an inline request on this (worker) thread. Returns `None` if
/// a call was stopped for the budget: whatever `f` answered then is not the
/// request's answer, and the caller runs it again on a blocking thread.
pub fn run<R>(f: impl FnOnce() -> R) -> Option<R> {
    /// Leaves the thread as it found it, even if `f` panics.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            SINCE.set(None);
            HIT.set(false);
        }
    }
    SINCE.set(Some(Instant::now()));
    HIT.set(false);
    let reset = Reset;
    let r = f();
    let stopped = HIT.get();
    drop(reset);
    (!stopped).then_some(r)
}

/// Called by the epoch check of a call on this thread: stops it (true) if the
/// inline request is over its budget. Every later call of the request is then
/// refused at once ([`hit`]).
pub fn stop_for_budget() -> bool {
    let over = over_budget();
    if over {
        HIT.set(true);
    }
    over
}

/// Whether the inline request on this thread has been stopped for its budget.
pub fn hit() -> bool {
    HIT.get()
}

/// Whether this thread is serving a request inline.
pub fn active() -> bool {
    SINCE.get().is_some()
}

/// Whether the inline request on this thread has used up its worker time.
pub fn over_budget() -> bool {
    SINCE.get().is_some_and(|since| since.elapsed() > BUDGET)
}

/// Runs `f`, which may block: off the worker's core when inline. The wait
/// does not count against the budget.
pub fn may_block<R>(f: impl FnOnce() -> R) -> R {
    if !active() {
        return f();
    }
    SINCE.set(None);
    // Inline again afterwards, even if `f` panics (`run` resets it at its end).
    struct Resume;
    impl Drop for Resume {
        fn drop(&mut self) {
            SINCE.set(Some(Instant::now()));
        }
    }
    let _resume = Resume;
    tokio::task::block_in_place(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_a_request_nothing_is_inline() {
        assert!(!active());
        assert_eq!(may_block(|| 7), 7);
        assert!(!over_budget());
    }

    #[test]
    fn a_request_stopped_for_its_budget_has_no_answer() {
        assert_eq!(run(|| 1), Some(1));
        let stopped = run(|| {
            assert!(!stop_for_budget());
            std::thread::sleep(BUDGET + Duration::from_millis(5));
            assert!(stop_for_budget() && hit());
            2
        });
        assert_eq!(stopped, None);
        assert!(!hit() && !active(), "the next request starts clean");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_wait_inside_an_inline_request_leaves_the_worker_and_restarts_the_budget() {
        let done = run(|| {
            assert!(active());
            std::thread::sleep(BUDGET + Duration::from_millis(5));
            assert!(over_budget());
            // Blocking inside `may_block` is allowed on a worker (block_in_place)...
            may_block(|| {
                assert!(!active());
                tokio::runtime::Handle::current().block_on(async { 1 })
            });
            // ...and the worker time starts again after it.
            assert!(active() && !over_budget());
        });
        assert_eq!(done, Some(()));
        assert!(!active());
    }
}
