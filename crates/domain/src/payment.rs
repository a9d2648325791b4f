//! The payment state machine. Every move of a payment's status in
//! any generation goes through [`Status::can_move_to`].

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
/// The order of the variants is in stored payment records ([`crate::record`]): add at the end.
pub enum Status {
    Pending,
    Processing,
    AwaitingOtp,
    AwaitingPayment,
    Completed,
    Failed,
    Cancelled,
    Expired,
    Refunded,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pending => "pending",
            Status::Processing => "processing",
            Status::AwaitingOtp => "awaiting_otp",
            Status::AwaitingPayment => "awaiting_payment",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
            Status::Expired => "expired",
            Status::Refunded => "refunded",
        }
    }

    /// Terminal payments never change again, except completed → refunded.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            Status::Completed
                | Status::Failed
                | Status::Cancelled
                | Status::Expired
                | Status::Refunded
        )
    }

    /// Cancel is allowed while the customer has not paid.
    pub fn is_cancellable(self) -> bool {
        matches!(
            self,
            Status::Pending | Status::AwaitingOtp | Status::AwaitingPayment | Status::Processing
        )
    }

    /// An operator's report that the money was taken overrides a failure,
    /// cancellation or expiry recorded here: money taken is never hidden.
    pub fn takes_late_success(self) -> bool {
        matches!(self, Status::Failed | Status::Cancelled | Status::Expired)
    }

    pub fn can_move_to(self, next: Status) -> bool {
        use Status::*;
        if self == next {
            return false;
        }
        match self {
            Pending => next != Refunded,
            Processing | AwaitingOtp | AwaitingPayment => !matches!(next, Pending | Refunded),
            Completed => next == Refunded,
            Failed | Cancelled | Expired | Refunded => false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
/// The order of the variants is in stored payment records ([`crate::record`]): add at the end.
pub enum Mode {
    Direct,
    Hosted,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Direct => "direct",
            Mode::Hosted => "hosted",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Status::*;

    #[test]
    fn terminal_states_do_not_move_except_refund() {
        for t in [Failed, Cancelled, Expired, Refunded] {
            for n in [
                Pending,
                Processing,
                AwaitingOtp,
                AwaitingPayment,
                Completed,
                Failed,
                Cancelled,
                Expired,
                Refunded,
            ] {
                assert!(!t.can_move_to(n), "{t:?} -> {n:?}");
            }
        }
        assert!(Completed.can_move_to(Refunded));
        assert!(!Completed.can_move_to(Failed));
    }

    #[test]
    fn in_progress_moves_forward_only() {
        assert!(Pending.can_move_to(Processing));
        assert!(Processing.can_move_to(Completed));
        assert!(AwaitingOtp.can_move_to(Processing));
        assert!(!Processing.can_move_to(Pending));
        assert!(!Processing.can_move_to(Refunded));
    }
}

/// `collect`'s `meta` keys for its `listing` index, named once for the
/// component and for `mmc reindex`, which deletes both to start the backfill
/// again. `-v2`: since payments in progress share one status in the key, a
/// store indexed before is indexed again.
pub mod listing_meta {
    /// Present once every payment is in `listing`.
    pub const READY: &str = "listing-v2";
    /// The last payments key the backfill of `listing` has indexed.
    pub const BACKFILL: &str = "listing-v2-backfill";
}

/// `collect`'s `meta` keys for its `search` index (references and phones),
/// named once as [`listing_meta`]'s are.
pub mod search_meta {
    /// Present once every payment is in `search`.
    pub const READY: &str = "search-v1";
    /// The last payments key the backfill of `search` has indexed.
    pub const BACKFILL: &str = "search-v1-backfill";
}
