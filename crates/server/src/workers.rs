//! Background workers: timers that ask components to do what is due. The
//! state they work on (deadlines, schedules) is stored, never held in
//! memory, so a restart loses nothing. In a fleet each job runs on the node
//! holding its lease (see [`mmc_leases`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use mmc_common::shutdown::Drain;
use mmc_leases::{LEASE_MS, Leases, RENEW_EVERY};
use mmc_runtime::{CallError, Runtime};

/// (component, job, period, batch size).
const JOBS: &[(&str, &str, Duration, u32)] = &[
    ("collect", "expire", Duration::from_millis(500), 100),
    ("collect", "reconcile", Duration::from_millis(1000), 200),
    // Backfills the list's index once (payments stored before it existed).
    ("collect", "index", Duration::from_millis(1000), 500),
    ("bulk", "payouts", Duration::from_millis(500), 50),
];

const MAX_ROUNDS: usize = 20;

/// How often adapters are asked to describe themselves again (the catalogue's
/// limits and availability follow their providers').
const DESCRIBE_EVERY: Duration = Duration::from_secs(60);

pub fn spawn(runtime: Arc<Runtime>, leases: Arc<Leases>, drain: Arc<Drain>) {
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
        let (runtime, leases, drain) = (runtime.clone(), leases.clone(), drain.clone());
        let lease = format!("job:{component}:{job}");
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                // Draining: no new round; a round running holds `_job` to its end.
                let Some(_job) = drain.job() else { break };
                let held = {
                    let (l, name) = (leases.clone(), lease.clone());
                    tokio::task::spawn_blocking(move || l.acquire(&name)).await
                };
                match held {
                    Ok(Ok(true)) => {}
                    Ok(Ok(false)) => continue, // another node's turn
                    Ok(Err(e)) => {
                        tracing::warn!(component, job, error = %e, "job lease not taken");
                        continue;
                    }
                    Err(e) => {
                        tracing::error!(component, job, error = %e, "job lease task panicked");
                        continue;
                    }
                }
                // Renewed while the job runs, however long its calls take.
                let lease_held = Arc::new(Held::new());
                let renewer = {
                    let (l, name, held) = (leases.clone(), lease.clone(), lease_held.clone());
                    tokio::spawn(async move {
                        loop {
                            tokio::time::sleep(RENEW_EVERY).await;
                            let (l, name) = (l.clone(), name.clone());
                            match tokio::task::spawn_blocking(move || l.acquire(&name)).await {
                                Ok(Ok(true)) => held.renewed(),
                                Ok(Ok(false)) => {
                                    // Another node holds it now (ours expired).
                                    held.lost.store(true, Ordering::SeqCst);
                                    break;
                                }
                                _ => {} // not renewed this time: `Held::valid` tells
                            }
                        }
                    })
                };
                let rt = runtime.clone();
                let (drain, held) = (drain.clone(), lease_held.clone());
                // Checked at every commit where another node may take the job over.
                let fenced = leases.shared_with_others();
                // Drain: keep going while full batches come back.
                let result = tokio::task::spawn_blocking(move || {
                    let mut total = 0;
                    // Bounded rounds: entries that keep failing cannot pin a thread.
                    for _ in 0..MAX_ROUNDS {
                        // A round starts only under a lease known to be ours,
                        // and not once the node drains.
                        if !held.valid() || drain.draining() {
                            break;
                        }
                        let lease: Arc<dyn mmc_capabilities::storage::LeaseGuard> = held.clone();
                        let done =
                            rt.run_job_leased(component, job, limit, fenced.then_some(lease))?;
                        total += done;
                        if done < limit {
                            break;
                        }
                    }
                    Ok::<u32, CallError>(total)
                })
                .await;
                renewer.abort();
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

impl mmc_capabilities::storage::LeaseGuard for Held {
    fn held(&self) -> bool {
        self.valid()
    }
}

/// A job's lease as its renewer last saw it.
struct Held {
    /// Taken by another node: stop.
    lost: AtomicBool,
    /// When it was last taken or renewed.
    renewed: parking_lot::Mutex<Instant>,
}

impl Held {
    fn new() -> Held {
        Held {
            lost: AtomicBool::new(false),
            renewed: parking_lot::Mutex::new(Instant::now()),
        }
    }

    fn renewed(&self) {
        *self.renewed.lock() = Instant::now();
    }

    /// Ours, with a margin: a renewal stuck on the database (a full pool, a
    /// slow server) is not counted on past two thirds of the lease.
    fn valid(&self) -> bool {
        !self.lost.load(Ordering::SeqCst)
            && self.renewed.lock().elapsed() < Duration::from_millis(LEASE_MS * 2 / 3)
    }
}

/// What keeps a fleet's nodes in step: adapter versions deployed through
/// another node (polled every [`mmc_admin::SYNC_EVERY`]), and the count of
/// live nodes that share each key's rate limit.
pub fn spawn_fleet(admin: Arc<mmc_admin::Admin>, app: Arc<mmc_http::App>, leases: Arc<Leases>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(mmc_admin::SYNC_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let admin = admin.clone();
            match tokio::task::spawn_blocking(move || admin.sync()).await {
                Ok(Ok(_)) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "adapter versions not synced"),
                Err(e) => tracing::error!(error = %e, "adapter sync panicked"),
            }
        }
    });
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(RENEW_EVERY);
        loop {
            tick.tick().await;
            let l = leases.clone();
            match tokio::task::spawn_blocking(move || l.heartbeat()).await {
                Ok(Ok(nodes)) => app.rate_limiter.share_among(nodes),
                Ok(Err(e)) => tracing::warn!(error = %e, "node heartbeat failed"),
                Err(e) => tracing::error!(error = %e, "node heartbeat panicked"),
            }
        }
    });
}
