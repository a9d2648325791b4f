//! The books run by themselves: every `books.check_every_ms`, each
//! account's finished days (the last `books.catch_up_days`) that have no
//! final, reconciled report yet are reconciled, the oldest first. In a fleet
//! one node does it, under the `books` lease; a day run twice gives the
//! same report and opens nothing new.

use std::sync::Arc;
use std::time::Duration;

use super::{Books, Day};
use mmc_common::shutdown::Drain;
use mmc_leases::Leases;

const LEASE: &str = "job:books:reconcile";

pub fn spawn(books: Arc<Books>, leases: Arc<Leases>, drain: Arc<Drain>) {
    let every = books.config().check_every_ms;
    if !books.config().daily || every == 0 {
        return;
    }
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_millis(every));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let Some(_job) = drain.job() else { break };
            let (books, leases) = (books.clone(), leases.clone());
            let round = tokio::task::spawn_blocking(move || {
                if !leases.acquire(LEASE)? {
                    return Ok(0); // another node's turn
                }
                due_round(&books)
            })
            .await;
            match round {
                Ok(Ok(0)) => {}
                Ok(Ok(n)) => tracing::info!(days = n, "books: days reconciled"),
                Ok(Err(e)) => tracing::warn!(error = %e, "books: round failed"),
                Err(e) => tracing::error!(error = %e, "books: round panicked"),
            }
        }
    });
}

/// Reconciles every due day of every account; how many were run.
pub fn due_round(books: &Books) -> Result<u32, super::BooksError> {
    let today = Day::of_ms(books.now_ms());
    let mut ran = 0;
    for account in books.accounts() {
        // Asked of the adapter once a round, not once a day.
        let lag = books.final_after_ms(&account)?;
        for back in (1..=books.config().catch_up_days.max(1)).rev() {
            let day = Day(today.0 - i64::from(back));
            let done = books
                .report(&account, day)?
                .is_some_and(|r| r.status == "reconciled" && r.is_final);
            if done || books.now_ms() < day.end_ms() + lag {
                continue;
            }
            let report = books.reconcile(&account, day)?;
            tracing::info!(
                account, date = %day, status = %report.status,
                mismatches = report.tally.mismatches(), "books: day reconciled"
            );
            ran += 1;
        }
    }
    Ok(ran)
}
