//! Bulk payouts: batches, validation workflow, CSV import, execution through adapters.

#[path = "../support/mod.rs"]
mod support;

mod batches;
mod csv_import;
mod helpers;
mod idempotency;
mod maker_checker;
mod payouts;
mod restart;
