//! The rules of the current generation: create (validation, idempotency,
//! initiation through the router), read (with optional PSP sync), and the
//! status moves of the payment state machine, each written with its event in one transaction.
//! Operator calls never run inside a transaction.

mod cancel;
mod create;
pub mod failures;
mod initiate;
mod intent;
mod otp;
mod psp;
mod reads;
mod resend;
mod transitions;

pub use cancel::cancel_http;
pub use create::{IDEMPOTENCY_TTL_MS, create, create_payment, parse_idempotency_key};
pub use failures::{adapter_failure, failure_kind};
pub use initiate::initiate;
pub use intent::{
    FIRST_CHECK_MS, MAX_CHECK_INTERVAL_MS, in_flight_ms, mark_intent, not_found_is_final,
};
pub use otp::{confirm, confirm_http, waits_for_code};
pub use psp::{ask_psp_many, operation_ref, recheck, sync_with_psp, worth_asking};
pub use reads::{catalogue, get, operator_of, predict};
pub use resend::{resend, to_send_again};
pub use transitions::{PspAnswer, apply_psp_status, approval_window_ms, move_to, settle_overdue};
