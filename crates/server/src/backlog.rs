//! What piles up in the store, sampled for `/metrics`: outbox events not yet
//! fanned out, webhook deliveries due and failing, API keys never rotated.
//! Counters say what happened on this node; these gauges say what the whole
//! store holds now, so every node reports the same figures (alert on `max`).

use std::sync::Arc;
use std::time::Duration;

use mmc_storage::sql_params;

use mmc_common::clock::system_now_ms;
use mmc_common::shutdown::Drain;
use mmc_db::{SqlDb, StorageError};
use mmc_metrics::{Backlog, Metrics};

/// Failed attempts in a row after which a destination counts as failing.
pub const FAILING_AFTER_ATTEMPTS: i64 = 3;

/// Reads the backlogs at `now_ms`: a handful of indexed reads.
pub fn sample(db: &SqlDb, now_ms: u64) -> Result<Backlog, StorageError> {
    let now = now_ms as i64;
    let postgres = db.engine_name() == "postgres";
    db.read(|c| {
        let outbox = c.query_one(
            "SELECT COALESCE((SELECT MAX(seq) FROM outbox), 0) - cur.seq,
                    (SELECT o.created_ms FROM outbox o WHERE o.seq > cur.seq ORDER BY o.seq LIMIT 1)
             FROM outbox_cursor cur WHERE cur.id = 1",
            &[],
        )?;
        // PostgreSQL's events not numbered yet (until the dispatcher's next
        // round) are behind too; SQLite numbers every event as it is written.
        let unnumbered = match postgres {
            true => Some(c.query_one(
                "SELECT COUNT(*), MIN(created_ms) FROM outbox WHERE seq IS NULL",
                &[],
            )?),
            false => None,
        };
        let pending = c.query_one(
            "SELECT COUNT(*),
                    COALESCE(SUM(CASE WHEN next_attempt_ms <= ?1 THEN 1 ELSE 0 END), 0),
                    MIN(CASE WHEN next_attempt_ms <= ?1 THEN next_attempt_ms END),
                    COUNT(DISTINCT CASE WHEN attempts >= ?2 THEN COALESCE(endpoint_id, url) END)
             FROM deliveries WHERE status = 'pending'",
            sql_params![now, FAILING_AFTER_ATTEMPTS],
        )?;
        let keys = c.query(
            "SELECT environment, MIN(created_ms) FROM api_keys WHERE revoked_ms IS NULL
             GROUP BY environment ORDER BY environment",
            &[],
        )?;
        let age = |since: Option<i64>| since.map_or(0.0, |t| (now - t).max(0) as f64 / 1000.0);
        let (late, late_since) = match &unnumbered {
            Some(r) => (r.int(0)?, r.opt_int(1)?),
            None => (0, None),
        };
        let oldest = [outbox.opt_int(1)?, late_since].into_iter().flatten().min();
        Ok(Backlog {
            outbox_lag_events: outbox.int(0)?.max(0) + late,
            outbox_oldest_seconds: age(oldest),
            webhook_pending: pending.int(0)?,
            webhook_due: pending.int(1)?,
            webhook_oldest_due_seconds: age(pending.opt_int(2)?),
            webhook_endpoints_failing: pending.int(3)?,
            api_key_oldest_seconds: keys
                .iter()
                .map(|r| Ok((r.text(0)?, age(Some(r.int(1)?)))))
                .collect::<Result<_, StorageError>>()?,
        })
    })
}

/// Samples every `every` until the node drains (the first at once).
pub fn spawn(db: SqlDb, metrics: Arc<Metrics>, every: Duration, drain: Arc<Drain>) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = drain.started() => return,
            }
            let (db, m) = (db.clone(), metrics.clone());
            let sampled = tokio::task::spawn_blocking(move || {
                sample(&db, system_now_ms()).map(|b| m.set_backlog(b))
            })
            .await;
            match sampled {
                Ok(Ok(())) => {}
                // Counted in mmc_storage_errors_total; the last sample stays.
                Ok(Err(e)) => tracing::warn!(error = %e, "backlog not sampled"),
                Err(e) => tracing::error!(error = %e, "backlog sampling panicked"),
            }
        }
    });
}
