//! The console overview's tallies: per merchant, environment, UTC day of a
//! payment's creation and operator, how many payments, how many succeeded
//! (completed, refunded ones included: they were paid), how many finished
//! (succeeded, failed or expired; cancelled ones count in neither) and the
//! volume the succeeded ones collected. The overview reads at most 30 days of
//! rows per operator, whatever the number of payments.
//!
//! They are kept by the outbox dispatcher (the `mmc-webhooks` crate), off the
//! request path: each round adds up what its payment events change
//! ([`Round`], in memory) and writes one upsert per row touched, in the
//! transaction that moves the cursor past those events, so each event is
//! counted once ([`store::apply`]). A store from before the tallies, or one
//! whose payments were written some other way, is counted again from the
//! payments themselves ([`rebuild`]): at the first round of a store without
//! them, or by `mmc console rebuild-overview`. Both give the same rows.
//!
//! A hosted payment is counted under the operator its latest event named
//! ("not chosen" before the customer chose one): the row it is counted in
//! is remembered while it is in progress (`overview_hosted`), so that the
//! event that names the customer's choice moves it there once.

mod events;
mod rebuild;
pub mod store;
#[cfg(test)]
mod tests;

pub use events::{Fact, Kind, Round, fact};
pub use rebuild::{Rebuilt, rebuild, rebuild_at_next_round};
pub use store::read;

use mmc_domain::Status;

/// The operator row of hosted payments whose customer has not chosen one.
pub const NOT_CHOSEN: &str = "";

/// One day in milliseconds: a payment's day is its creation instant's UTC day.
pub const DAY_MS: u64 = 86_400_000;

/// A row of the tallies.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub merchant_id: String,
    pub environment: String,
    /// Days since 1970-01-01 (UTC).
    pub day: i64,
    /// The operator, or [`NOT_CHOSEN`].
    pub operator: String,
}

/// What a row counts (or, in a round, how it changes).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub payments: i64,
    /// Completed (refunded ones too: they were paid).
    pub succeeded: i64,
    /// Succeeded, failed or expired: the payments whose outcome is known.
    pub finished: i64,
    /// Amount collected by the succeeded ones.
    pub volume: i64,
}

impl Counts {
    pub fn add(&mut self, o: &Counts) {
        self.payments += o.payments;
        self.succeeded += o.succeeded;
        self.finished += o.finished;
        self.volume += o.volume;
    }

    fn negated(&self) -> Counts {
        Counts {
            payments: -self.payments,
            succeeded: -self.succeeded,
            finished: -self.finished,
            volume: -self.volume,
        }
    }

    pub fn is_zero(&self) -> bool {
        *self == Counts::default()
    }

    /// Success rate in percent, None while nothing has finished.
    pub fn rate(&self) -> Option<f64> {
        (self.finished > 0).then(|| self.succeeded as f64 * 100.0 / self.finished as f64)
    }
}

/// Where a payment stands for the tallies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    InProgress,
    Succeeded,
    /// Failed or expired.
    Unpaid,
    /// The merchant's choice: neither succeeded nor finished.
    Cancelled,
}

impl Standing {
    pub fn of(status: Status) -> Standing {
        match status {
            Status::Completed | Status::Refunded => Standing::Succeeded,
            Status::Failed | Status::Expired => Standing::Unpaid,
            Status::Cancelled => Standing::Cancelled,
            Status::Pending
            | Status::Processing
            | Status::AwaitingOtp
            | Status::AwaitingPayment => Standing::InProgress,
        }
    }

    /// What one payment of `amount` standing so adds to its row.
    pub fn counts(self, amount: u64) -> Counts {
        let paid = self == Standing::Succeeded;
        Counts {
            payments: 1,
            succeeded: paid.into(),
            finished: matches!(self, Standing::Succeeded | Standing::Unpaid).into(),
            volume: if paid { amount as i64 } else { 0 },
        }
    }
}
