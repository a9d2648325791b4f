//! The intent of a request to the operator: marked before it is sent, how
//! long it may be in flight, and the polling schedule that follows it.

use mmc_domain::outcome;

use crate::mmc::platform::{config, node};
use crate::store::Payment;

/// First PSP poll of a payment in progress, then doubling up to the cap.
pub const FIRST_CHECK_MS: u64 = 2_000;

pub const MAX_CHECK_INTERVAL_MS: u64 = 60_000;

/// The intent of a request to pay, persisted before it is sent: marked as
/// under way on this node, and its first poll scheduled with it. If the
/// answer is never recorded (the node died meanwhile), reconciliation asks
/// the operator about it by our id within seconds, not only at expiry. The
/// answer keeps that poll rather than moving it, so this costs no index row.
pub fn mark_intent(p: &mut Payment, now: u64) {
    p.start_initiating(now, crate::mmc::platform::node::id());
    p.sent_at_ms = Some(now);
    p.next_check_ms.get_or_insert(now + FIRST_CHECK_MS);
}

/// How long a request to the operator counts as possibly in flight (see
/// `mmc_domain::outcome::in_flight_ms`: the adapter deadline plus
/// `operator_answer_window_ms`). Until then "not found" proves nothing.
pub fn in_flight_ms() -> u64 {
    outcome::in_flight_ms(config::get)
}

/// The operator is being asked to start `p` right now. A request that died
/// mid-way stops counting as running once it cannot be in flight any more
/// (reconciliation then asks the operator about it).
pub fn initiation_under_way(p: &Payment, now: u64) -> bool {
    p.initiating_since_ms
        .is_some_and(|since| now.saturating_sub(since) < in_flight_ms())
}

/// The request that sends `p` is still being run by us: under way, on a node
/// that has not stopped. A retry of the create waits for it (409). Once that
/// node is gone (a crash), nothing of ours runs it any more: the retry gets
/// the payment as stored, never sent again, and reconciliation asks the
/// operator about it by our id. Cancel and expiry still wait out the whole
/// in-flight window (`initiation_under_way`), since the request may still be
/// on its way to the operator whether we run or not.
pub fn initiation_running(p: &Payment, now: u64) -> bool {
    initiation_under_way(p, now) && sender_alive(p)
}

/// The node that put `p`'s request on its way has not stopped (a record
/// from before `initiating_on` is assumed to have a live sender).
pub(super) fn sender_alive(p: &Payment) -> bool {
    p.initiating_on.as_deref().is_none_or(node::alive)
}

/// Whether the operator's "not found" about an operation sent at `sent_at`
/// is final: nothing can be in flight any more.
pub fn not_found_is_final(sent_at: Option<u64>, now: u64) -> bool {
    sent_at.is_none_or(|at| outcome::not_found_is_final(at, now, in_flight_ms()))
}
