//! The component's settings (`components.bulk.settings` in the host
//! configuration, values are strings), each with its default. A missing or
//! unreadable value falls back to the default.

use crate::mmc::platform::config;

/// Batches whose total (major units) exceeds this wait for `POST validate`;
/// the others are paid at once. 0: every batch waits.
pub const DEFAULT_VALIDATION_THRESHOLD: u64 = 0;
pub const DEFAULT_MAX_ITEMS: usize = 5_000;
pub const DEFAULT_MAX_CSV_BYTES: usize = 1024 * 1024;
/// Payouts sent to one operator (per environment) and not yet final.
pub const DEFAULT_MAX_IN_FLIGHT_PER_OPERATOR: usize = 10;
/// How long after claiming an item we assume the worker that claimed it is
/// gone (crashed, killed) and ask the operator what became of the payout.
/// Above the adapter deadline (30 s), so a live payout call has surely ended.
pub const DEFAULT_CLAIM_GRACE_MS: u64 = 60_000;
/// An item whose outcome is still unknown after this long is logged and
/// counted (`payout_unconfirmed`) for a person to check with the operator;
/// it stays processing: unknown is never failed.
pub const DEFAULT_MAX_PENDING_MS: u64 = 24 * 3600 * 1000;
/// How often a batch held for want of float looks again at its routes' balances.
pub const DEFAULT_FLOAT_RETRY_MS: u64 = 30_000;

fn number<T: std::str::FromStr>(key: &str) -> Option<T> {
    config::get(key).and_then(|v| v.trim().parse().ok())
}

/// `validation_threshold.<merchant_id>`, else `validation_threshold`.
pub fn validation_threshold(merchant_id: &str) -> u64 {
    number(&format!("validation_threshold.{merchant_id}"))
        .or_else(|| number("validation_threshold"))
        .unwrap_or(DEFAULT_VALIDATION_THRESHOLD)
}

pub fn max_items() -> usize {
    number("max_items").unwrap_or(DEFAULT_MAX_ITEMS)
}

pub fn max_csv_bytes() -> usize {
    number("max_csv_bytes").unwrap_or(DEFAULT_MAX_CSV_BYTES)
}

pub fn max_in_flight_per_operator() -> usize {
    number("max_in_flight_per_operator")
        .filter(|n| *n > 0)
        .unwrap_or(DEFAULT_MAX_IN_FLIGHT_PER_OPERATOR)
}

pub fn claim_grace_ms() -> u64 {
    number("claim_grace_ms").unwrap_or(DEFAULT_CLAIM_GRACE_MS)
}

pub fn max_pending_ms() -> u64 {
    number("max_pending_ms").unwrap_or(DEFAULT_MAX_PENDING_MS)
}

pub fn float_retry_ms() -> u64 {
    number("float_retry_ms").unwrap_or(DEFAULT_FLOAT_RETRY_MS)
}

/// How long after it was sent a payout may still be in flight: until then an
/// operator's "not found" proves nothing (`adapter_deadline_ms` comes from
/// the host, `operator_answer_window_ms` from these settings).
pub fn in_flight_ms() -> u64 {
    mmc_domain::outcome::in_flight_ms(config::get)
}

/// The sending deadline of a payout attempt started at `started_ms` (see
/// `mmc_domain::outcome::send_until_ms`): the host sends none of its bytes
/// after it, so a node that stalls between its claim and its call sends
/// nothing once another may be asking about the payout.
pub fn send_until_ms(started_ms: u64) -> u64 {
    mmc_domain::outcome::send_until_ms(started_ms, config::get)
}
