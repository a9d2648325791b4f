//! Background workers: timers that ask components to do what is due. The
//! state they work on (deadlines, schedules) is stored, never held in
//! memory, so a restart loses nothing. In a fleet each job runs on the node
//! holding its lease (see [`mmc_leases`]).

use std::sync::Arc;
use std::time::Duration;

use mmc_common::shutdown::Drain;
use mmc_leases::{Leases, RENEW_EVERY};
use mmc_runtime::{CallError, Runtime};

/// A job a component runs on a timer.
struct Job {
    component: &'static str,
    name: &'static str,
    /// How often it is asked while it has work.
    every: Duration,
    /// The longest wait after rounds with nothing to do: the wait doubles
    /// from `every` up to this (equal to `every`: no backing off).
    idle_every: Duration,
    /// Entries a round takes at most.
    batch: u32,
}

const JOBS: &[Job] = &[
    Job::steady("collect", "expire", Duration::from_millis(500), 100),
    Job::steady("collect", "reconcile", Duration::from_millis(1000), 200),
    // Backfills the list's indexes once (payments stored before them): once
    // it reports nothing left, asked less often, every 10 s at the least, so
    // that a backfill started again (`mmc reindex`) is still taken up soon.
    Job {
        idle_every: Duration::from_secs(10),
        ..Job::steady("collect", "index", Duration::from_millis(1000), 500)
    },
    Job::steady("bulk", "payouts", Duration::from_millis(500), 50),
];

impl Job {
    const fn steady(
        component: &'static str,
        name: &'static str,
        every: Duration,
        batch: u32,
    ) -> Job {
        Job {
            component,
            name,
            every,
            idle_every: every,
            batch,
        }
    }

    fn pace(&self) -> Pace {
        Pace {
            every: self.every,
            idle_every: self.idle_every,
            idle: self.every,
        }
    }
}

/// When a job's holder asks it next, after a round.
struct Pace {
    every: Duration,
    idle_every: Duration,
    /// The wait after the next round with nothing to do.
    idle: Duration,
}

/// What a job's round came to.
#[derive(Clone, Copy)]
enum Round {
    /// It did this many entries (none: nothing was due).
    Did(u32),
    /// It failed: asked again at its pace, not backed off, since what is due
    /// is still due.
    Failed,
}

impl Pace {
    /// The wait after `round`.
    fn after(&mut self, round: Round) -> Duration {
        if let Round::Did(0) = round {
            let wait = self.idle;
            self.idle = (self.idle * 2).min(self.idle_every);
            return wait;
        }
        self.idle = self.every;
        self.every
    }
}

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
    for job in JOBS {
        let (runtime, leases, drain) = (runtime.clone(), leases.clone(), drain.clone());
        tokio::spawn(run_job(job, runtime, leases, drain));
    }
}

/// Runs `job` whenever it is due while this node holds its lease.
async fn run_job(job: &'static Job, runtime: Arc<Runtime>, leases: Arc<Leases>, drain: Arc<Drain>) {
    let (component, name, limit) = (job.component, job.name, job.batch);
    let lease = format!("job:{component}:{name}");
    let mut pace = job.pace();
    let mut next = tokio::time::Instant::now(); // the first round at once
    loop {
        tokio::time::sleep_until(next).await;
        let started = tokio::time::Instant::now();
        next = started + job.every;
        // Draining: no new round; a round running holds `_job` to its end.
        let Some(_job) = drain.job() else { break };
        // Taken here; renewed from then on by the node's heartbeat, however
        // long the job's calls take (`spawn_fleet`).
        if !leases.holds(&lease) {
            let (l, lease) = (leases.clone(), lease.clone());
            match tokio::task::spawn_blocking(move || l.acquire(&lease)).await {
                Ok(Ok(true)) => {}
                Ok(Ok(false)) => continue, // another node's turn
                Ok(Err(e)) => {
                    tracing::warn!(component, job = name, error = %e, "job lease not taken");
                    continue;
                }
                Err(e) => {
                    tracing::error!(component, job = name, error = %e, "job lease task panicked");
                    continue;
                }
            }
        }
        let rt = runtime.clone();
        let (drain, guard) = (drain.clone(), leases.guard(&lease));
        // Checked at every commit where another node may take the job over.
        let fenced = leases.shared_with_others();
        // Drain: keep going while full batches come back.
        let result = tokio::task::spawn_blocking(move || {
            let mut total = 0;
            // Bounded rounds: entries that keep failing cannot pin a thread.
            for _ in 0..MAX_ROUNDS {
                // A round starts only under a lease known to be ours,
                // and not once the node drains.
                if !guard.held() || drain.draining() {
                    break;
                }
                let lease = fenced.then(|| guard.clone());
                let done = rt.run_job_leased(component, name, limit, lease)?;
                total += done;
                if done < limit {
                    break;
                }
            }
            Ok::<u32, CallError>(total)
        })
        .await;
        let round = match result {
            Ok(Ok(done)) => {
                if done > 0 {
                    tracing::debug!(component, job = name, done, "job round");
                }
                Round::Did(done)
            }
            // A component that is not deployed has nothing to do.
            Ok(Err(CallError::NotLoaded(_) | CallError::WrongKind(_))) => Round::Did(0),
            Ok(Err(e)) => {
                tracing::warn!(component, job = name, error = %e, "job failed");
                Round::Failed
            }
            Err(e) => {
                tracing::error!(component, job = name, error = %e, "job task panicked");
                Round::Failed
            }
        };
        next = started + pace.after(round);
    }
}

/// What keeps a fleet's nodes in step: adapter versions deployed through
/// another node (polled every [`mmc_admin::SYNC_EVERY`]), the count of live
/// nodes that share each key's rate limit, and the renewal of the leases
/// this node holds (with its heartbeat).
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

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str) -> &'static Job {
        JOBS.iter().find(|j| j.name == name).unwrap()
    }

    #[test]
    fn a_steady_job_is_asked_at_its_pace_whatever_it_finds() {
        let mut pace = job("expire").pace();
        for round in [0, 0, 5, 0, 0, 0]
            .map(Round::Did)
            .into_iter()
            .chain([Round::Failed])
        {
            assert_eq!(pace.after(round), Duration::from_millis(500));
        }
    }

    #[test]
    fn the_index_backfill_backs_off_once_it_finds_nothing_and_resumes_with_work() {
        let mut pace = job("index").pace();
        let secs = |pace: &mut Pace, done| pace.after(Round::Did(done)).as_secs();
        assert_eq!(secs(&mut pace, 500), 1, "work left: at its pace");
        let idle: Vec<u64> = (0..9).map(|_| secs(&mut pace, 0)).collect();
        assert_eq!(idle, [1, 2, 4, 8, 10, 10, 10, 10, 10]);
        assert_eq!(secs(&mut pace, 3), 1, "work again: at its pace");
        assert_eq!(secs(&mut pace, 0), 1, "backed off from the start again");
        secs(&mut pace, 0);
        assert_eq!(
            pace.after(Round::Failed).as_secs(),
            1,
            "a failed round: at its pace"
        );
        assert_eq!(secs(&mut pace, 0), 1, "and backed off from the start");
    }
}
