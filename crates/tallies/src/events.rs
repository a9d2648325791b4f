//! What a payment event changes in the tallies: the few fields read from its
//! stored payload ([`fact`]), and a round's changes added up in memory
//! ([`Round`]) before they are written.
//!
//! An event carries the payment as it was after the change, not before; what
//! it was before follows from the state machine: a payment is created in
//! progress, ends (completed, failed, expired, cancelled) from in progress,
//! except a late success, which names the status it had
//! (`late_success_from`), and a refund leaves it paid. Every other event (in
//! progress still, refunded, flagged for review) changes no count, only,
//! for a hosted payment, perhaps the operator row it is counted in.

use std::borrow::Cow;
use std::collections::HashMap;

use mmc_domain::{Mode, Status, event, record};
use serde::Deserialize;

use super::{Counts, DAY_MS, Key, NOT_CHOSEN, Standing};

/// What kind of change an event reports, from its type (the legacy
/// generation's names included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A new payment, in progress.
    Created,
    /// The payment's outcome: completed, failed, expired or cancelled.
    Ended,
    /// Anything else about a payment: no count changes.
    Other,
}

impl Kind {
    /// None for an event that is not about a payment's status (refunds, batches).
    pub fn of(event_type: &str) -> Option<Kind> {
        Some(match event_type {
            "collect.payment.created" | "collect.initiated" => Kind::Created,
            "collect.payment.completed"
            | "collect.payment.failed"
            | "collect.payment.expired"
            | "collect.payment.cancelled"
            | "collect.completed"
            | "collect.failed"
            | "collect.cancelled" => Kind::Ended,
            t if t.starts_with("collect.payment.") || t == "collect.updated" => Kind::Other,
            _ => return None,
        })
    }
}

/// What the tallies need of a payment event.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    pub kind: Kind,
    pub payment_id: String,
    pub merchant_id: String,
    pub environment: String,
    /// The UTC day the payment was created.
    pub day: i64,
    pub status: Status,
    pub amount: u64,
    pub hosted: bool,
    pub operator: Option<String>,
    /// A late success: the status the payment had before it.
    pub late_success_from: Option<Status>,
}

/// The fact an outbox event states, if it is a payment event whose payload
/// this version reads: the compact form (its record's leading fields; the
/// whole record only for a success, which may be late), or a current API
/// body stored as JSON (`payment_records = json`). A legacy body stored as
/// JSON names neither the payment's creation nor an expiry apart from a
/// cancellation: not counted (`mmc console rebuild-overview` counts those
/// payments from their records).
pub fn fact(
    event_type: &str,
    (payment_id, merchant_id, environment): (&str, &str, &str),
    payload: &[u8],
) -> Option<Fact> {
    let kind = Kind::of(event_type)?;
    let (day, status, amount, hosted, operator, late_success_from) =
        if let Some(rec) = event::record_of(payload) {
            let s = record::summary(rec).ok()?;
            let late = if kind == Kind::Ended && s.status == Status::Completed {
                record::decode(rec).ok()?.late_success_from
            } else {
                None
            };
            let day = (s.created_at_ms / DAY_MS) as i64;
            (
                day,
                s.status,
                s.amount,
                s.mode == Mode::Hosted,
                s.operator,
                late,
            )
        } else {
            let body: Body<'_> = serde_json::from_slice(payload).ok()?;
            if body.api_version == "legacy" {
                return None;
            }
            let o = body.data.object;
            let day = mmc_domain::time::day_of(&o.created_at)?;
            (
                day,
                o.status,
                o.amount,
                o.mode == Mode::Hosted,
                o.operator,
                None,
            )
        };
    Some(Fact {
        kind,
        payment_id: payment_id.into(),
        merchant_id: merchant_id.into(),
        environment: environment.into(),
        day,
        status,
        amount,
        hosted,
        operator: operator.map(Cow::into_owned),
        late_success_from,
    })
}

/// A payment event's body as JSON: what the tallies read of it.
#[derive(Deserialize)]
struct Body<'a> {
    #[serde(borrow)]
    api_version: Cow<'a, str>,
    #[serde(borrow)]
    data: Data<'a>,
}

#[derive(Deserialize)]
struct Data<'a> {
    #[serde(borrow)]
    object: Object<'a>,
}

#[derive(Deserialize)]
struct Object<'a> {
    status: Status,
    amount: u64,
    mode: Mode,
    #[serde(default, borrow)]
    operator: Option<Cow<'a, str>>,
    #[serde(borrow)]
    created_at: Cow<'a, str>,
}

/// A round's changes: per row, what to add; per hosted payment, the row it
/// is counted in now (None: it has ended, nothing to remember).
#[derive(Debug, Default)]
pub struct Round {
    pub rows: HashMap<Key, Counts>,
    pub hosted: HashMap<String, Option<String>>,
}

impl Round {
    /// Adds what `f` changes. `counted_in` answers, for a hosted payment not
    /// seen yet this round, the operator row it is counted in (stored).
    pub fn add<E>(
        &mut self,
        f: &Fact,
        counted_in: impl FnOnce(&str) -> Result<Option<String>, E>,
    ) -> Result<(), E> {
        let now = f.operator.as_deref().unwrap_or(NOT_CHOSEN);
        match f.kind {
            Kind::Created => {
                self.change(f, now, Standing::InProgress.counts(f.amount));
                if f.hosted {
                    self.hosted.insert(f.payment_id.clone(), Some(now.into()));
                }
            }
            Kind::Ended => {
                let before_in = self.row_of(f, counted_in)?.unwrap_or_else(|| now.into());
                let before = f
                    .late_success_from
                    .map_or(Standing::InProgress, Standing::of);
                self.change(f, &before_in, before.counts(f.amount).negated());
                self.change(f, now, Standing::of(f.status).counts(f.amount));
                if f.hosted {
                    self.hosted.insert(f.payment_id.clone(), None);
                }
            }
            Kind::Other => {
                // Only a hosted payment in progress changes rows: to the
                // operator its customer chose (or back, if the choice lapsed).
                if let Some(before_in) = self.row_of(f, counted_in)?
                    && before_in != now
                {
                    let moved = Standing::InProgress.counts(f.amount);
                    self.change(f, &before_in, moved.negated());
                    self.change(f, now, moved);
                    self.hosted.insert(f.payment_id.clone(), Some(now.into()));
                }
            }
        }
        Ok(())
    }

    /// The operator row a hosted payment in progress is counted in.
    fn row_of<E>(
        &self,
        f: &Fact,
        counted_in: impl FnOnce(&str) -> Result<Option<String>, E>,
    ) -> Result<Option<String>, E> {
        if !f.hosted {
            return Ok(None);
        }
        match self.hosted.get(&f.payment_id) {
            Some(seen) => Ok(seen.clone()),
            None => counted_in(&f.payment_id),
        }
    }

    fn change(&mut self, f: &Fact, operator: &str, by: Counts) {
        let key = Key {
            merchant_id: f.merchant_id.clone(),
            environment: f.environment.clone(),
            day: f.day,
            operator: operator.into(),
        };
        self.rows.entry(key).or_default().add(&by);
    }
}
