//! The `payouts` job: pays the items of processing batches through the
//! operator adapters, and finds out what became of payouts whose outcome is
//! not known yet. All its state is in storage, so a restart resumes it.
//!
//! Never paying an item twice rests on three rules:
//! 1. An item is claimed (pending → processing, attempt recorded) in a
//!    committed transaction *before* the payout request leaves; the
//!    operator is never called inside a transaction.
//! 2. The payout id is the item id: adapters hand it to the operator as the
//!    idempotency key.
//! 3. A `processing` item is never sent again. If the worker dies between
//!    the claim and recording the answer, the item's status check falls due
//!    after the claim grace period and asks the operator (`payout-status`)
//!    for that id.
//!
//! Claims are one item per transaction, so a crash leaves at most one item
//! whose request may or may not have left.
//!
//! Per operator and environment, at most `max_in_flight_per_operator`
//! payouts are sent and not final at any time; other operators' items go on.

mod answers;
mod checks;
mod send;

use answers::warn;
use checks::check_items;
pub use checks::recheck;
use send::{Lanes, pay_batch};

use crate::mmc::platform::clock;
use crate::store;

/// Batches looked at per run.
const BATCHES_PER_RUN: u32 = 20;

/// Does up to `limit` units of work (one payout sent or one status asked);
/// returns how many were done.
pub fn run_payouts(limit: u32) -> u32 {
    let now = clock::now_ms();
    let mut done = 0;
    // Outcomes first: they free room under the per-operator cap.
    match store::due("checks", now, limit) {
        Ok(due) => {
            check_items(&due, now);
            done += due.len() as u32;
        }
        Err(e) => warn(&format!("cannot read due checks: {}", e.message)),
    }
    let batches = match store::due("runnable", now, BATCHES_PER_RUN) {
        Ok(b) => b,
        Err(e) => {
            warn(&format!("cannot read runnable batches: {}", e.message));
            return done;
        }
    };
    let mut lanes = Lanes::new();
    for d in batches {
        if done >= limit {
            break;
        }
        match pay_batch(&d, limit - done, &mut lanes) {
            Ok(n) => done += n,
            Err(e) => warn(&format!(
                "payouts of batch {} failed: {}",
                d.batch, e.message
            )),
        }
    }
    done
}
