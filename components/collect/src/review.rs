//! Successes that are not believed. An operator's success counts only for
//! the amount and currency we asked (`mmc_domain::settlement`); one that
//! names anything else leaves the payment (or refund) in progress, flagged
//! for review: logged, counted, listed under `review=required` and announced
//! by an event of its own, once. Nobody's money moves on our side until a
//! person has looked.

use mmc_domain::settlement::{self, Asked, Mismatch, Reported};

use crate::ApiError;
use crate::mmc::adapter::types::Settled;
use crate::mmc::platform::log;
use crate::store::{Failure, Tx, scope};

/// The table listing a merchant's payments under review (`env/merchant/id`).
pub const TABLE: &str = "review";

/// The event announcing a payment flagged for review.
pub const PAYMENT_EVENT: &str = "collect.payment.review_required";

/// The event announcing a refund flagged for review (filed under its payment).
pub const REFUND_EVENT: &str = "collect.refund.review_required";

/// Whether `paid` is what was asked: `amount` of `currency`.
pub fn check(amount: u64, currency: &str, paid: &Settled) -> Result<(), Mismatch> {
    settlement::check(
        Asked {
            amount,
            currency,
            party: None,
        },
        Reported {
            amount: &paid.amount,
            currency: &paid.currency,
            party: paid.party.as_deref(),
        },
    )
}

/// The reason stored on the flagged operation.
pub fn failure(m: &Mismatch) -> Failure {
    Failure {
        code: m.code().into(),
        message: m.to_string(),
    }
}

/// Logs and counts a success not believed for operation `what` `id`.
pub fn report(what: &str, id: &str, m: &Mismatch) {
    log::log(
        log::Level::Error,
        &format!("{what} {id}: success not believed, flagged for review: {m}"),
    );
    log::count(&format!("settlement_{}", m.code()));
}

/// Lists a payment under `review=required`.
pub fn list(tx: &Tx, env: &str, merchant: &str, id: &str) -> Result<(), ApiError> {
    tx.put(TABLE, &scope(env, merchant, id), b"")
}
