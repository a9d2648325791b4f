//! What the result of an operator call means for the money, written once for
//! every flow (initiate, OTP, cancel, refund, payout, checkout, expiry,
//! reconciliation). Only an explicit answer from the operator is final: a
//! call that did not end in one leaves the outcome unknown, and unknown is
//! never failed, cancelled or expired.

/// Why an operator call ended without an answer: the cases of the WIT
/// `adapter-error`, which each component maps here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallFailure {
    Timeout,
    Unavailable,
    InvalidResponse,
    Rejected,
    NotSent,
    NotSupported,
    Unauthenticated,
    /// No adapter instance was free (the host's router): nothing was sent.
    Busy,
}

/// Maps a component's `adapter-error` (`AdapterError`, generated into each
/// component from the WIT, hence a macro) to its [`CallFailure`]:
/// `call_failure!(AdapterError, &e)`.
#[macro_export]
macro_rules! call_failure {
    ($error:ident, $e:expr) => {
        match $e {
            $error::Timeout(_) => $crate::outcome::CallFailure::Timeout,
            $error::Unavailable(_) => $crate::outcome::CallFailure::Unavailable,
            $error::InvalidResponse(_) => $crate::outcome::CallFailure::InvalidResponse,
            $error::Rejected(_) => $crate::outcome::CallFailure::Rejected,
            $error::NotSent(_) => $crate::outcome::CallFailure::NotSent,
            $error::NotSupported(_) => $crate::outcome::CallFailure::NotSupported,
            $error::Unauthenticated(_) => $crate::outcome::CallFailure::Unauthenticated,
            $error::Busy(_) => $crate::outcome::CallFailure::Busy,
        }
    };
}

/// What a failed call tells about the operation at the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Certainty {
    /// The operator certainly did not perform it: it may end as failed.
    NotPerformed,
    /// It may have been performed: keep it in progress and ask the operator by our id.
    Unknown,
}

impl CallFailure {
    pub fn certainty(self) -> Certainty {
        match self {
            // A 4xx on the request itself, nothing sent, or nothing this adapter does.
            CallFailure::Rejected | CallFailure::NotSent | CallFailure::NotSupported => {
                Certainty::NotPerformed
            }
            // Timeout, 5xx, reset after sending, unreadable body, trap, deadline, no slot.
            CallFailure::Timeout
            | CallFailure::Unavailable
            | CallFailure::InvalidResponse
            | CallFailure::Unauthenticated => Certainty::Unknown,
            // Nothing was sent, but a flow that cannot offer "try again" must
            // not fail the operation for our own lack of capacity: it keeps it
            // in progress, as for an unknown outcome, and asks later. Initiation
            // and OTP confirmation handle it first, as retryable.
            CallFailure::Busy => Certainty::Unknown,
        }
    }

    pub fn is_unknown(self) -> bool {
        self.certainty() == Certainty::Unknown
    }
}

/// Defaults of the two settings that make up [`in_flight_ms`].
pub const DEFAULT_ADAPTER_DEADLINE_MS: u64 = 30_000;
pub const DEFAULT_ANSWER_WINDOW_MS: u64 = 60_000;

/// How long a request stays "possibly in flight" after it was sent: the
/// adapter's deadline (`adapter_deadline_ms`, which the host gives every
/// component) plus the time the operator may take to record it
/// (`operator_answer_window_ms`), read through `setting` (the component's
/// `config::get`). Until then, "not found" proves nothing.
pub fn in_flight_ms(setting: impl Fn(&str) -> Option<String>) -> u64 {
    adapter_deadline_ms(&setting).saturating_add(ms(
        &setting,
        "operator_answer_window_ms",
        DEFAULT_ANSWER_WINDOW_MS,
    ))
}

/// The longest an adapter call runs (`adapter_deadline_ms`): an attempt of a
/// money movement sends nothing after its start plus this (see
/// [`send_until_ms`]).
pub fn adapter_deadline_ms(setting: impl Fn(&str) -> Option<String>) -> u64 {
    ms(&setting, "adapter_deadline_ms", DEFAULT_ADAPTER_DEADLINE_MS)
}

/// The sending deadline of an attempt started (claimed, stored) at
/// `started_ms`: the host sends none of its bytes after it. The attempt's
/// in-flight window ([`in_flight_ms`]) outlasts it by the operator's answer
/// window, so whoever asks about the movement after that window knows that
/// nothing of ours is still on its way.
pub fn send_until_ms(started_ms: u64, setting: impl Fn(&str) -> Option<String>) -> u64 {
    started_ms.saturating_add(adapter_deadline_ms(setting))
}

fn ms(setting: impl Fn(&str) -> Option<String>, key: &str, default: u64) -> u64 {
    setting(key)
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// Whether an operator's "not found" for a request sent at `sent_at_ms` is
/// final (the request certainly never reached it).
pub fn not_found_is_final(sent_at_ms: u64, now_ms: u64, in_flight_ms: u64) -> bool {
    now_ms.saturating_sub(sent_at_ms) >= in_flight_ms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_certain_refusals_are_not_performed() {
        use CallFailure::*;
        for f in [Timeout, Unavailable, InvalidResponse, Unauthenticated, Busy] {
            assert_eq!(f.certainty(), Certainty::Unknown, "{f:?}");
        }
        for f in [Rejected, NotSent, NotSupported] {
            assert_eq!(f.certainty(), Certainty::NotPerformed, "{f:?}");
        }
    }

    #[test]
    fn the_window_comes_from_the_settings_or_their_defaults() {
        assert_eq!(in_flight_ms(|_| None), 90_000);
        let set = |k: &str| (k == "operator_answer_window_ms").then(|| " 500 ".to_string());
        assert_eq!(in_flight_ms(set), 30_500);
    }

    #[test]
    fn an_attempt_sends_nothing_after_the_adapter_deadline() {
        assert_eq!(send_until_ms(1_000, |_| None), 31_000);
        let set = |k: &str| (k == "adapter_deadline_ms").then(|| "500".to_string());
        assert_eq!(send_until_ms(1_000, set), 1_500);
        // The window in which "not found" proves nothing outlasts it.
        assert!(send_until_ms(1_000, set) < 1_000 + in_flight_ms(set));
    }

    #[test]
    fn not_found_counts_only_after_the_window() {
        assert!(!not_found_is_final(1_000, 30_999, 30_000));
        assert!(not_found_is_final(1_000, 31_000, 30_000));
    }
}
