//! Graceful shutdown, for rolling a fleet node by node without dropping a
//! request: stop accepting connections, let in-flight requests finish
//! (keep-alive connections are closed after their current request), let
//! running jobs finish and start no new one, then release this node's
//! leases so the other nodes take its jobs over at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::watch;

pub struct Drain {
    tx: watch::Sender<bool>,
    jobs: AtomicUsize,
}

/// A job running; dropping it says it finished.
pub struct Job(Arc<Drain>);

impl Drop for Job {
    fn drop(&mut self) {
        self.0.jobs.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Drain {
    pub fn new() -> Arc<Drain> {
        Arc::new(Drain {
            tx: watch::channel(false).0,
            jobs: AtomicUsize::new(0),
        })
    }

    /// From now on: accept nothing new, start no job.
    pub fn start(&self) {
        self.tx.send_replace(true);
    }

    pub fn draining(&self) -> bool {
        *self.tx.borrow()
    }

    /// Resolves once draining has started.
    pub async fn started(&self) {
        let mut rx = self.tx.subscribe();
        let _ = rx.wait_for(|d| *d).await;
    }

    /// Leave to run a job (a round of a worker, a webhook delivery), unless draining.
    pub fn job(self: &Arc<Self>) -> Option<Job> {
        self.jobs.fetch_add(1, Ordering::SeqCst);
        let job = Job(self.clone());
        (!self.draining()).then_some(job)
    }

    /// Waits until `busy()` is false, or `deadline` passed; true when idle.
    pub async fn wait_idle(&self, deadline: Instant, busy: impl Fn() -> bool) -> bool {
        loop {
            if !busy() && self.jobs.load(Ordering::SeqCst) == 0 {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn no_job_starts_once_draining_and_running_ones_are_waited_for() {
        let d = Drain::new();
        let job = d.job().expect("not draining yet");
        d.start();
        assert!(d.job().is_none());
        let soon = Instant::now() + Duration::from_millis(50);
        assert!(!d.wait_idle(soon, || false).await, "a job still runs");
        drop(job);
        assert!(d.wait_idle(Instant::now(), || false).await);
        d.started().await;
    }
}
