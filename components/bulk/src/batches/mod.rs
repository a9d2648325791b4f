//! The bulk-payments endpoints: create (JSON), import (CSV), read, list,
//! items, and the validation workflow. A batch is stored whole or not at
//! all: any bad line is a 400 listing every problem of every line.
//!
//! By concern: [`create`] and [`import`] read a batch's lines from JSON or
//! from a CSV file, checked here by [`check_lines`] alike; [`storing`] keeps
//! a new batch under its Idempotency-Key; [`reads`] serves batches and their
//! items; [`validation`] approves or rejects a batch that waits for it.

mod create;
mod import;
mod reads;
mod storing;
mod validation;

pub use create::create;
pub use import::import_csv;
pub use reads::{get, items, list};
pub use validation::validate;

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::items::{self, Problem, RawItem, ValidItem, problem};
use crate::mmc::adapter::router;
use crate::mmc::adapter::types::OperatorInfo;
use crate::mmc::api::http_types::{Caller, Request, Response};
use crate::mmc::platform::{clock, signing};
use crate::store::{self, Batch, BatchStatus, Counts, IdemRecord, Item, ItemStatus, Tx};
use crate::wire::{self, json_response};
use crate::{ApiError, csv, events, settings};

const MAX_NAME: usize = 100;
const MAX_DESCRIPTION: usize = 255;
const ROOT: &str = "/api/v1/bulk-payments/";

/// A batch whose every line is valid, ready to store.
struct NewBatch {
    name: String,
    description: Option<String>,
    /// `api` or `csv`.
    source: &'static str,
    /// (line, item): CSV line, or 1-based position in `items`.
    lines: Vec<(u32, ValidItem)>,
    /// Hash of the request: tells an idempotent replay from a reused key.
    request_hash: String,
}

/// Checks every line (None: unreadable, already reported) and the
/// uniqueness of references; adds the problems, keyed by line index, to
/// `problems`. A field already reported is not reported again.
fn check_lines(
    raws: &[Option<RawItem>],
    catalogue: &[OperatorInfo],
    environment: &str,
    name_of: impl Fn(usize) -> String,
    problems: &mut Vec<(usize, Problem)>,
) -> Vec<(usize, ValidItem)> {
    let mut valid = Vec::new();
    for (i, raw) in raws.iter().enumerate() {
        let Some(raw) = raw else { continue };
        let reported: Vec<String> = problems
            .iter()
            .filter(|(j, _)| *j == i)
            .map(|(_, p)| p.field.clone())
            .collect();
        match items::check(raw, catalogue, environment) {
            Ok(item) if reported.is_empty() => valid.push((i, item)),
            Ok(_) => {}
            Err(found) => problems.extend(
                found
                    .into_iter()
                    .filter(|p| !reported.contains(&p.field))
                    .map(|p| (i, p)),
            ),
        }
    }
    let references = raws.iter().enumerate().filter_map(|(i, r)| {
        r.as_ref()?
            .reference
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| (i, s))
    });
    for (repeat, first) in items::duplicates(references) {
        let reference = raws[repeat]
            .as_ref()
            .and_then(|r| r.reference.as_deref())
            .unwrap_or_default()
            .trim();
        problems.push((
            repeat,
            problem(
                "reference",
                "reference_duplicate",
                format!(
                    "reference '{reference}' is already used by {} of this batch; references must be unique within a batch.",
                    name_of(first)
                ),
            ),
        ));
    }
    // Stable: a line's problems stay in field order.
    problems.sort_by_key(|(i, _)| *i);
    valid
}

/// A batch of `n` lines within the per-batch limit, else a 413 that says it.
fn check_item_count(n: usize) -> Result<(), ApiError> {
    let max = settings::max_items();
    if n > max {
        return Err(ApiError::too_large(
            "too_many_items",
            "items",
            format!(
                "The batch has {n} payout lines; the limit is {max} per batch. Split it into several batches."
            ),
        ));
    }
    Ok(())
}

/// A request's SHA-256, in hex.
fn hash(bytes: &[u8]) -> String {
    hex::encode(signing::sha256(bytes))
}
