//! Password checks, a few at a time. An Argon2id check takes 7 MiB and
//! tens of milliseconds of a core; unbounded, a burst of sign-ins would
//! take a node's memory and CPU. A sign-in takes one of a few places before
//! it does anything else (its attempt's count, a database write, included),
//! so a flood reaches neither the database nor the hash beyond those
//! places; a sign-in that finds none free within a short wait is answered
//! 429 with Retry-After at once, its password never hashed.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use mmc_config::ConsoleConfig;
use mmc_metrics::Metrics;

pub struct PasswordChecks {
    permits: Arc<Semaphore>,
    /// One Argon2 run's blocks per place, kept from check to check.
    memory: Memory,
    wait: Duration,
    metrics: Arc<Metrics>,
}

type Memory = Arc<Mutex<Vec<Vec<argon2::Block>>>>;

/// No permit was free within the wait: the password was not checked.
#[derive(Debug, thiserror::Error)]
#[error("password checks busy")]
pub struct Busy;

/// A place for one password check, taken before anything else of a
/// sign-in is done; dropping it frees the place.
pub struct Permit {
    _held: OwnedSemaphorePermit,
    memory: Memory,
    metrics: Arc<Metrics>,
}

impl Permit {
    /// Runs `check` (which hashes, in the memory it is given) on a
    /// blocking thread, holding the place.
    pub async fn check<T: Send + 'static>(
        self,
        check: impl FnOnce(&mut Vec<argon2::Block>) -> T + Send + 'static,
    ) -> Result<T, Busy> {
        self.metrics.console_password_check();
        let done = tokio::task::spawn_blocking(move || {
            let mut memory = self.memory.lock().pop().unwrap_or_default();
            let out = check(&mut memory);
            self.memory.lock().push(memory);
            out
        })
        .await;
        match done {
            Ok(out) => Ok(out),
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            // The runtime is shutting down: nothing was answered.
            Err(_) => Err(Busy),
        }
    }

    /// Runs `check` (which hashes) on this thread, holding the place.
    pub fn check_here<T>(&self, check: impl FnOnce() -> T) -> T {
        self.metrics.console_password_check();
        crate::blocking(check)
    }
}

impl PasswordChecks {
    pub fn new(config: &ConsoleConfig, metrics: Arc<Metrics>) -> PasswordChecks {
        PasswordChecks {
            permits: Arc::new(Semaphore::new(config.password_checks_at_once.max(1))),
            memory: Memory::default(),
            wait: Duration::from_millis(config.password_check_wait_ms),
            metrics,
        }
    }

    /// A place for one check, if one is free within the wait (if not, the
    /// sign-in is counted as refused busy).
    pub async fn permit(&self) -> Result<Permit, Busy> {
        let acquired = tokio::time::timeout(self.wait, self.permits.clone().acquire_owned()).await;
        match acquired {
            Ok(Ok(held)) => Ok(Permit {
                _held: held,
                memory: self.memory.clone(),
                metrics: self.metrics.clone(),
            }),
            _ => {
                self.metrics.console_sign_in_refused("busy");
                Err(Busy)
            }
        }
    }
}
