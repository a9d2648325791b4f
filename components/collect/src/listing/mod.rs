//! What a merchant lists: payments newest first (as Stripe's lists), with
//! filters and cursors both ways; a payment's refunds; one refund.
//!
//! Payment ids are UUIDv7, so the `payments` table (keyed
//! `env/merchant/id`) is itself the index by creation time: an unfiltered
//! page is one ordered range scan, `created[gte|lt]` narrows the range by
//! the ids' time prefix, `reference` is one lookup in `refs`. `status`,
//! `operator` and `country` are answered from the `listing` index (see
//! [`scan_payments`]), `search` from the `search` index (see
//! [`search::search_payments`]).

mod endpoints;
mod filters;
mod params;
mod scan;
mod search;

pub use endpoints::{get_refund, list_payments, payment_refunds};
pub use filters::filters;
pub use params::{cursor, seconds};
pub use scan::{MAX_SCANNED, Order, Range, scan_payments};
