//! Scanning a merchant's payments a page at a time: the payments table by
//! creation time, or the `listing` index's prefixes merged by id.

use crate::ApiError;
use crate::mmc::platform::storage;
use crate::store::{self, Payment, scope};

use super::filters::Filters;

/// Payments read at most per request when filters drop some.
pub const MAX_SCANNED: u32 = 1000;
/// The largest page one storage scan returns (the host's cap).
pub(super) const SCAN_CAP: u32 = 1000;

/// The smallest UUIDv7 (as text) created at `ms`: ids sort by their time prefix.
pub(super) fn id_floor(ms: u64) -> String {
    format!("{:08x}-{:04x}", ms >> 16, ms & 0xffff)
}

/// Which way a scan reads: `Asc` from the oldest (the export, and a list's
/// `ending_before`), `Desc` from the newest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    Asc,
    Desc,
}

/// Where a scan of a merchant's payments runs: past a cursor (in the scan's
/// order), within a creation-time range (Unix seconds, `lt` exclusive).
pub struct Range<'a> {
    pub env: &'a str,
    pub merchant: &'a str,
    pub after: Option<&'a str>,
    pub gte: Option<u64>,
    pub lt: Option<u64>,
}

/// One page of a scan: the payments kept (in the scan's order), whether the
/// range goes on, and where the next page starts.
pub struct ScanPage {
    pub payments: Vec<Payment>,
    pub has_more: bool,
    pub next: Option<String>,
}

/// Up to `limit` payments of `range` that pass `filters`, in `order`,
/// reading at most [`MAX_SCANNED`] entries: the list's pages and the CSV
/// export's.
///
/// Without `status`, `operator` or `country`, the payments table is the
/// index (ids are UUIDv7: key order is creation order). With them, the
/// `listing` index: one prefix per (status, country, operator) the filters
/// allow, each in id order, merged. Until `listing` is backfilled (a
/// database from before it), the filters are checked on the payments table.
pub fn scan_payments(
    range: &Range<'_>,
    filters: &Filters,
    limit: u32,
    order: Order,
) -> Result<ScanPage, ApiError> {
    let chunk = (limit + 1).min(SCAN_CAP);
    if filters.is_empty() || !store::listing_ready()? {
        let prefix = scope(range.env, range.merchant, "");
        // Checking filters on records (before the backfill): larger chunks.
        let chunk = if filters.is_empty() {
            chunk
        } else {
            chunk.max(100)
        };
        let run = Run::new("payments", &prefix, range, order, chunk);
        return merge(vec![run], range, &|p| filters.keep(p), limit, order);
    }
    let runs = filters
        .prefixes(range.env, range.merchant)
        .iter()
        .map(|prefix| Run::new("listing", prefix, range, order, chunk.min(101)))
        .collect();
    merge(runs, range, &|p| filters.keep(p), limit, order)
}

/// One key range of one table, read a chunk at a time in the scan's order
/// (or entries already read, in that order).
pub(super) struct Run {
    table: &'static str,
    /// `[lo, hi)`, narrowed as chunks are read.
    lo: String,
    hi: String,
    order: Order,
    chunk: u32,
    buf: std::collections::VecDeque<storage::Entry>,
    done: bool,
}

impl Run {
    /// The keys under `prefix` (ending in `/`, followed by a payment id)
    /// within `range`.
    pub(super) fn new(
        table: &'static str,
        prefix: &str,
        range: &Range<'_>,
        order: Order,
        chunk: u32,
    ) -> Run {
        let mut lo = match range.gte {
            Some(s) => format!("{prefix}{}", id_floor(s * 1000)),
            None => prefix.to_string(),
        };
        // `a/b0` is the first key after every `a/b/…`.
        let mut hi = match range.lt {
            Some(s) => format!("{prefix}{}", id_floor(s * 1000)),
            None => format!("{}0", prefix.trim_end_matches('/')),
        };
        if let Some(c) = range.after {
            match order {
                Order::Asc => lo = lo.max(format!("{prefix}{c}\u{1}")),
                Order::Desc => hi = hi.min(format!("{prefix}{c}")),
            }
        }
        Run {
            table,
            lo,
            hi,
            order,
            chunk,
            buf: Default::default(),
            done: false,
        }
    }

    /// Index entries of `table` already read, in the scan's order: nothing
    /// more to read.
    pub(super) fn read(table: &'static str, entries: Vec<storage::Entry>, order: Order) -> Run {
        Run {
            table,
            lo: String::new(),
            hi: String::new(),
            order,
            chunk: 0,
            buf: entries.into(),
            done: true,
        }
    }

    /// The next entry's payment id, reading a chunk when the buffer is empty.
    fn peek(&mut self) -> Result<Option<&str>, ApiError> {
        if self.buf.is_empty() && !self.done {
            self.fill()?;
        }
        Ok(self.buf.front().map(|e| entry_id(&e.key)))
    }

    fn fill(&mut self) -> Result<(), ApiError> {
        if self.lo >= self.hi {
            self.done = true;
            return Ok(());
        }
        let rows = match self.order {
            Order::Asc => storage::scan(self.table, &self.lo, &self.hi, self.chunk)?,
            Order::Desc => storage::scan_desc(self.table, &self.lo, &self.hi, self.chunk)?,
        };
        self.done = (rows.len() as u32) < self.chunk;
        if let Some(last) = rows.last() {
            match self.order {
                Order::Asc => self.lo = format!("{}\u{1}", last.key),
                Order::Desc => self.hi = last.key.clone(),
            }
        }
        self.buf.extend(rows);
        Ok(())
    }
}

pub(super) fn entry_id(key: &str) -> &str {
    key.rsplit('/').next().unwrap_or_default()
}

/// Merges `runs` by payment id in `order` into one page. A `payments` entry
/// carries its record; an index entry is a key, whose record is read and
/// checked with `keep` (a filter's answer is the record's, never the
/// index's alone).
pub(super) fn merge(
    mut runs: Vec<Run>,
    range: &Range<'_>,
    keep: &dyn Fn(&Payment) -> bool,
    limit: u32,
    order: Order,
) -> Result<ScanPage, ApiError> {
    let mut payments: Vec<Payment> = Vec::new();
    let mut scanned = 0;
    let mut last_scanned: Option<String> = None;
    while payments.len() < limit as usize && scanned < MAX_SCANNED {
        // The run whose next id comes first in `order`.
        let mut best: Option<(usize, String)> = None;
        for (i, run) in runs.iter_mut().enumerate() {
            if let Some(id) = run.peek()? {
                let first = best.as_ref().is_none_or(|(_, b)| match order {
                    Order::Asc => id < b.as_str(),
                    Order::Desc => id > b.as_str(),
                });
                if first {
                    best = Some((i, id.to_string()));
                }
            }
        }
        let Some((i, id)) = best else { break };
        let entry = runs[i].buf.pop_front().expect("peeked");
        scanned += 1;
        // One payment under two prefixes: its entry moved between the reads
        // of two prefixes (or an old one was left). Merge order puts the two
        // side by side: the second is skipped.
        if last_scanned.as_deref() == Some(id.as_str()) {
            continue;
        }
        let record = if runs[i].table == "payments" {
            Some(store::decode_payment(&entry.value)?)
        } else {
            store::read_payment(range.env, range.merchant, &id)?
        };
        if let Some(p) = record.filter(|p| p.id == id && keep(p)) {
            payments.push(p);
        }
        last_scanned = Some(id);
    }
    let mut has_more = false;
    for run in &mut runs {
        has_more |= run.peek()?.is_some();
    }
    let next = if !has_more {
        None
    } else if payments.len() == limit as usize {
        payments.last().map(|p| p.id.clone())
    } else {
        last_scanned
    };
    Ok(ScanPage {
        payments,
        has_more,
        next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_floor_sorts_with_the_ids_of_its_millisecond() {
        let ms = 1_795_575_620_731u64;
        let floor = id_floor(ms);
        let id = uuid::Uuid::new_v7(uuid::Timestamp::from_unix(
            uuid::NoContext,
            ms / 1000,
            ((ms % 1000) * 1_000_000) as u32,
        ))
        .hyphenated()
        .to_string();
        assert!(id.starts_with(&floor), "{id} {floor}");
        assert!(id_floor(ms - 1) < id && id < id_floor(ms + 1));
    }
}
