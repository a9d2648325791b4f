//! From the outbox to delivery rows: each event a component wrote is fanned
//! out to the endpoints subscribed to its type (and its payment's
//! `callback_url`), and counted into the console overview's tallies if it
//! is a payment's; events past their retention are deleted.

use std::collections::HashMap;
use std::collections::hash_map::Entry;

use mmc_storage::sql_params;

use super::{INSERT_DELIVERY, Subscription, WebhookError, Webhooks, matches, subscriptions};
use mmc_common::clock::system_now_ms;
use mmc_db::{Row, SqlConn, StorageError};
use mmc_tallies as tallies;

/// The pruner's lock: one pruning round at a time across the fleet, and
/// none while a resend reads an event and queues its deliveries.
pub(super) const PRUNE_LOCK: &str = "outbox_prune";

impl Webhooks {
    /// Fans new outbox events out into delivery rows and counts payment
    /// events into the console overview's tallies ([`mmc_tallies`]), in
    /// one transaction with moving the cursors past them. Returns how many
    /// events were read. A store whose tallies were never built has them
    /// counted from its payments after the round.
    pub fn dispatch_outbox(&self, limit: u32) -> Result<usize, WebhookError> {
        let (read, counted) = self.db.write(|tx| {
            // One dispatcher at a time across the fleet: the cursor is read,
            // fanned out past and moved in one transaction. Another node
            // dispatching now: this round has nothing to do.
            if !tx.try_lock("outbox_dispatch")? {
                return Ok((0, true));
            }
            // Events committed since the last round, numbered after every
            // one already numbered (see `SqlConn::number_outbox`).
            tx.number_outbox(i64::from(limit))?;
            let fanned = tx
                .query_one("SELECT seq FROM outbox_cursor WHERE id = 1", &[])?
                .int(0)?;
            let counted = tallies::store::cursor(tx)?;
            // Behind the fan-out (a node of an older version dispatched
            // without counting): the events since are counted first.
            let from = counted.map_or(fanned, |c| c.min(fanned));
            let events = tx.query(
                "SELECT seq, id, event_type, merchant_id, environment, extra_url, subject_id, payload
                 FROM outbox WHERE seq > ?1 ORDER BY seq LIMIT ?2",
                sql_params![from, limit],
            )?;
            let Some(last) = events.last().map(|e| e.int(0)).transpose()? else {
                return Ok((0, counted.is_some()));
            };
            let mut round = tallies::Round::default();
            let mut fan_out = FanOut {
                endpoints_of: HashMap::new(),
                now: system_now_ms() as i64,
            };
            for e in &events {
                let seq = e.int(0)?;
                if seq > fanned {
                    fan_out.event(tx, e)?;
                }
                if counted.is_some_and(|c| seq > c) {
                    count(tx, &mut round, e)?;
                }
            }
            if last > fanned {
                tx.execute(
                    "UPDATE outbox_cursor SET seq = ?1 WHERE id = 1",
                    sql_params![last],
                )?;
            }
            if let Some(c) = counted {
                tallies::store::apply(tx, &round)?;
                // Never back: a rebuild may have counted past the fan-out.
                tallies::store::set_cursor(tx, last.max(c))?;
            }
            Ok((events.len(), counted.is_some()))
        })?;
        if !counted {
            tallies::rebuild(&self.db)?;
        }
        Ok(read)
    }

    /// Deletes the oldest events past the retention with their deliveries and
    /// attempts, at most `limit` in one transaction (the writer is shared with
    /// payments: the caller repeats while a whole batch went). Returns how many
    /// went. Only a prefix of the outbox in `seq` order goes, up to the first
    /// event that is too young, not yet fanned out, or still has a delivery
    /// pending (a resend of an old event): each round costs one bounded scan
    /// from the front instead of a search of the whole table.
    pub fn prune_events(&self, now_ms: u64, limit: u32) -> Result<usize, WebhookError> {
        let Some(retention) = self.config.event_retention_ms() else {
            return Ok(0);
        };
        let cutoff = now_ms.saturating_sub(retention) as i64;
        Ok(self.db.write(|tx| {
            // One pruner at a time across the fleet; another node pruning: nothing to do here.
            if !tx.try_lock(PRUNE_LOCK)? {
                return Ok(0);
            }
            let front = tx.query(
                "SELECT o.seq, o.created_ms,
                        CAST(CASE WHEN EXISTS (SELECT 1 FROM deliveries d
                                               WHERE d.event_id = o.id AND d.status = 'pending')
                             THEN 1 ELSE 0 END AS BIGINT)
                 FROM outbox o WHERE o.seq <= (SELECT seq FROM outbox_cursor WHERE id = 1)
                 ORDER BY o.seq LIMIT ?1",
                sql_params![limit as i64],
            )?;
            let mut prefix = Vec::new();
            for r in &front {
                if r.int(1)? >= cutoff || r.int(2)? != 0 {
                    break;
                }
                prefix.push(r.int(0)?);
            }
            let (Some(&first), Some(&last)) = (prefix.first(), prefix.last()) else {
                return Ok(0);
            };
            let of_events = "SELECT id FROM outbox WHERE seq BETWEEN ?1 AND ?2";
            tx.execute(
                &format!(
                    "DELETE FROM delivery_attempts WHERE delivery_id IN
                     (SELECT id FROM deliveries WHERE event_id IN ({of_events}))"
                ),
                sql_params![first, last],
            )?;
            tx.execute(
                &format!("DELETE FROM deliveries WHERE event_id IN ({of_events})"),
                sql_params![first, last],
            )?;
            tx.execute(
                "DELETE FROM outbox WHERE seq BETWEEN ?1 AND ?2",
                sql_params![first, last],
            )?;
            Ok(prefix.len())
        })?)
    }

    /// One round of [`Webhooks::prune_events`]: up to 20 batches of 500.
    /// Returns whether more may be left. A failure is logged: events are kept
    /// and the next round tries again.
    pub(super) fn prune_round(&self) -> bool {
        for _ in 0..20 {
            match self.prune_events(system_now_ms(), 500) {
                Ok(500) => {}
                Ok(_) => return false,
                Err(e) => {
                    tracing::warn!(error = %e, "pruning old events failed");
                    return false;
                }
            }
        }
        true
    }
}

/// A round's fan-out: each event to the endpoints subscribed to its type.
struct FanOut {
    /// A round's events are mostly one merchant's: its endpoints looked up once.
    endpoints_of: HashMap<(String, String), Vec<Subscription>>,
    now: i64,
}

impl FanOut {
    fn event(&mut self, tx: &mut dyn SqlConn, e: &Row) -> Result<(), StorageError> {
        let (id, event_type, merchant, env, extra_url) = (
            e.text(1)?,
            e.text(2)?,
            e.text(3)?,
            e.text(4)?,
            e.opt_text(5)?,
        );
        let endpoints = match self.endpoints_of.entry((merchant.clone(), env.clone())) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(subscriptions(tx, &merchant, &env)?),
        };
        for (eid, url, enabled) in endpoints.iter() {
            if matches(enabled, &event_type) {
                tx.execute(
                    INSERT_DELIVERY,
                    sql_params![&id, eid, url, &env, &merchant, self.now],
                )?;
            }
        }
        if let Some(url) = extra_url {
            tx.execute(
                INSERT_DELIVERY,
                sql_params![&id, Option::<String>::None, url, &env, &merchant, self.now],
            )?;
        }
        Ok(())
    }
}

/// Adds what a payment event changes to the round's tallies (other events,
/// and payloads this version does not read, change nothing).
fn count(tx: &mut dyn SqlConn, round: &mut tallies::Round, e: &Row) -> Result<(), StorageError> {
    let (event_type, merchant, env, subject) = (e.text(2)?, e.text(3)?, e.text(4)?, e.text(6)?);
    if tallies::Kind::of(&event_type).is_none() {
        return Ok(());
    }
    let payload = e.blob(7)?;
    match tallies::fact(&event_type, (&subject, &merchant, &env), &payload) {
        Some(f) => round.add(&f, |id| tallies::store::counted_in(tx, id)),
        None => {
            // A legacy body stored as JSON is known not to say enough; a
            // compact one this version cannot read (a newer node's) is news.
            if payload.first() != Some(&b'{') {
                tracing::warn!(event = %e.text(1)?, %event_type, "a payment event this version cannot read is left out of the console overview");
            }
            Ok(())
        }
    }
}
