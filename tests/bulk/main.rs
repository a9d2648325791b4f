//! Bulk payouts: batches, validation workflow, CSV import, execution through adapters.

#[path = "../support/mod.rs"]
mod support;
