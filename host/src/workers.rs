//! Background workers: timers that ask components to do what is due. The
//! state they work on (deadlines, schedules) is stored, never held in
//! memory, so a restart loses nothing.

use std::sync::Arc;
use std::time::Duration;

use crate::runtime::{CallError, Runtime};

/// (component, job, period, batch size).
const JOBS: &[(&str, &str, Duration, u32)] = &[
    ("collect", "expire", Duration::from_millis(500), 100),
    ("collect", "reconcile", Duration::from_millis(1000), 200),
    ("bulk", "payouts", Duration::from_millis(500), 50),
];

const MAX_ROUNDS: usize = 20;

/// How often adapters are asked to describe themselves again (the catalogue's
/// limits and availability follow their providers').
const DESCRIBE_EVERY: Duration = Duration::from_secs(60);

pub fn spawn(runtime: Arc<Runtime>) {
    {
        let runtime = runtime.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(DESCRIBE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await; // the first: they were just described at load
            loop {
                tick.tick().await;
                let rt = runtime.clone();
                if let Err(e) = tokio::task::spawn_blocking(move || rt.refresh_descriptions()).await
                {
                    tracing::error!(error = %e, "describe refresh panicked");
                }
            }
        });
    }
    for &(component, job, period, limit) in JOBS {
        let runtime = runtime.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let rt = runtime.clone();
                // Drain: keep going while full batches come back.
                let result = tokio::task::spawn_blocking(move || {
                    let mut total = 0;
                    // Bounded rounds: entries that keep failing cannot pin a thread.
                    for _ in 0..MAX_ROUNDS {
                        let done = rt.run_job(component, job, limit)?;
                        total += done;
                        if done < limit {
                            break;
                        }
                    }
                    Ok::<u32, CallError>(total)
                })
                .await;
                match result {
                    // A component that is not deployed has nothing to do.
                    Ok(Ok(0)) | Ok(Err(CallError::NotLoaded(_) | CallError::WrongKind(_))) => {}
                    Ok(Ok(n)) => tracing::debug!(component, job, n, "job done"),
                    Ok(Err(e)) => tracing::warn!(component, job, error = %e, "job failed"),
                    Err(e) => tracing::error!(component, job, error = %e, "job task panicked"),
                }
            }
        });
    }
}
