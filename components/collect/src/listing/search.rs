//! `search`: payments whose reference starts with a text or whose customer
//! phone ends with its digits, newest first, from the `search` index.
//!
//! The index holds `r/<lowercased reference>/<id>` and `p/<reversed phone
//! digits>/<id>`: the payments matching a text are the keys under one or
//! two prefixes, in key order, not time order. Each reference or phone
//! (a *group*) keeps its ids in time order, so the matches are read as:
//! small groups whole (a reference is one payment), sorted by id; a group
//! larger than one read (a customer who paid many times) as a run of its
//! own, read from the newest; all merged by id as the `listing` filters are.
//! A text matching more than [`MAX_SEARCHED`] entries across groups is
//! refused: it asks for a longer text.

use mmc_domain::record::Payment;

use crate::ApiError;
use crate::mmc::api::http_types::Request;
use crate::mmc::platform::storage;
use crate::store::{self, scope, search as keys};

use super::filters::Filters;
use super::params::{invalid, param};
use super::scan::{Order, Range, Run, SCAN_CAP, ScanPage, entry_id, id_floor, merge};

/// The longest text searched, in characters.
pub const MAX_TEXT: usize = 100;
/// Index entries read at most to gather a search's matches.
pub const MAX_SEARCHED: usize = 2000;
/// Entries per read of the index; a group that fills one is read as a run.
const GROUP_CHUNK: u32 = 250;

/// A search as given: the text lowercased, and its digits last first (when
/// it holds enough of them to be a phone's end).
pub struct Search {
    folded: String,
    digits: Option<String>,
}

/// `search`: 1 to [`MAX_TEXT`] characters, not only spaces; searched
/// trimmed.
pub fn search(req: &Request) -> Result<Option<Search>, ApiError> {
    let Some(raw) = param(req, "search") else {
        return Ok(None);
    };
    let text = raw.trim();
    if text.is_empty() || raw.chars().count() > MAX_TEXT {
        return Err(invalid(
            "search",
            format!("search must be 1 to {MAX_TEXT} characters, not only spaces."),
        ));
    }
    let phone = whole_number(text);
    Ok(Some(Search {
        folded: keys::fold(text),
        digits: keys::reversed_digits(phone.as_deref().unwrap_or(text)),
    }))
}

/// A text that names a whole number with its country code, in any form its
/// country writes it (Benin's old 8-digit numbers with `229` in front
/// included), as numbers are stored: so that `+229 66 00 10 01` finds
/// `+2290166001001`.
fn whole_number(text: &str) -> Option<String> {
    let digits = text.chars().filter(char::is_ascii_digit).count();
    let written = text.trim_start();
    let international = written.starts_with('+') || written.starts_with("00") || digits >= 11;
    if !international {
        return None; // the end of a number, as before
    }
    let country = mmc_domain::phone::country_of(text)?;
    mmc_domain::phone::normalize(country, text).ok()
}

impl Search {
    /// Whether `p` matches: its reference starts with the text (compared
    /// lowercased), or its customer's phone digits end with the text's.
    pub fn matches(&self, p: &Payment) -> bool {
        keys::fold(&p.reference).starts_with(&self.folded)
            || self
                .digits
                .as_deref()
                .is_some_and(|d| keys::phone_digits(p).is_some_and(|phone| phone.starts_with(d)))
    }

    /// The `search` index prefixes holding every match.
    fn prefixes(&self, env: &str, merchant: &str) -> Vec<String> {
        let mut out = Vec::with_capacity(2);
        // A reference holds no '/': such a text finds none (and would cut a key).
        if !self.folded.contains('/') {
            out.push(keys::reference_prefix(env, merchant, &self.folded));
        }
        if let Some(d) = &self.digits {
            out.push(keys::phone_prefix(env, merchant, d));
        }
        out
    }
}

/// Up to `limit` payments of `range` that match `search` and pass
/// `filters`, in `order`. Until the `search` index is backfilled (a
/// database from before it), the payments table is read instead, at most
/// [`super::MAX_SCANNED`] per page, as the `listing` filters do.
pub fn search_payments(
    range: &Range<'_>,
    search: &Search,
    filters: &Filters,
    limit: u32,
    order: Order,
) -> Result<ScanPage, ApiError> {
    let keep = |p: &Payment| filters.keep(p) && search.matches(p);
    let chunk = (limit + 1).min(SCAN_CAP);
    if !store::search_ready()? {
        let prefix = scope(range.env, range.merchant, "");
        let run = Run::new("payments", &prefix, range, order, chunk.max(100));
        return merge(vec![run], range, &keep, limit, order);
    }
    let mut runs = Vec::new();
    let mut whole = Vec::new();
    let mut read = 0;
    for prefix in search.prefixes(range.env, range.merchant) {
        // Every key under `prefix`: none sorts after the largest character.
        let end = format!("{prefix}{}", char::MAX);
        let mut lo = prefix;
        loop {
            if read >= MAX_SEARCHED {
                return Err(too_broad());
            }
            let mut rows = storage::scan("search", &lo, &end, GROUP_CHUNK)?;
            read += rows.len();
            if (rows.len() as u32) < GROUP_CHUNK {
                whole.append(&mut rows);
                break;
            }
            // The last group may go on past this read: a run of its own,
            // and the next read starts after it (`g/` < `g0`).
            let group = group_of(&rows[rows.len() - 1].key).to_string();
            rows.retain(|e| group_of(&e.key) != group);
            whole.append(&mut rows);
            runs.push(Run::new("search", &group, range, order, chunk.min(101)));
            lo = format!("{}0", group.trim_end_matches('/'));
        }
    }
    let (lo, hi) = (
        range.gte.map(|s| id_floor(s * 1000)),
        range.lt.map(|s| id_floor(s * 1000)),
    );
    whole.retain(|e| {
        let id = entry_id(&e.key);
        lo.as_deref().is_none_or(|lo| id >= lo)
            && hi.as_deref().is_none_or(|hi| id < hi)
            && range.after.is_none_or(|c| match order {
                Order::Desc => id < c,
                Order::Asc => id > c,
            })
    });
    whole.sort_by(|a, b| {
        let (a, b) = (entry_id(&a.key), entry_id(&b.key));
        match order {
            Order::Desc => b.cmp(a),
            Order::Asc => a.cmp(b),
        }
    });
    // A payment found by both its reference and its phone: once.
    whole.dedup_by(|a, b| entry_id(&a.key) == entry_id(&b.key));
    runs.push(Run::read("search", whole, order));
    merge(runs, range, &keep, limit, order)
}

/// The group of an index key: all of it but the payment id (ends in `/`).
fn group_of(key: &str) -> &str {
    &key[..key.len() - entry_id(key).len()]
}

fn too_broad() -> ApiError {
    ApiError::invalid(
        "search_too_broad",
        "search",
        format!(
            "More than {MAX_SEARCHED} payments match this search under different references \
             or phones: give a longer text."
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payment(reference: &str, phone: Option<&str>) -> Payment {
        let mut p: Payment = serde_json::from_value(serde_json::json!({
            "id": "p1", "merchant_id": "m1", "environment": "test", "reference": reference,
            "status": "pending", "amount": 100, "currency": "XOF", "country": "BJ",
            "mode": "hosted", "expires_at_ms": 3, "created_at_ms": 1, "updated_at_ms": 2,
            "request_hash": "h"
        }))
        .unwrap();
        p.customer = phone.map(|phone| store::Customer {
            phone: Some(phone.into()),
            first_name: None,
            last_name: None,
        });
        p
    }

    fn text(t: &str) -> Search {
        Search {
            folded: keys::fold(t.trim()),
            digits: keys::reversed_digits(t),
        }
    }

    #[test]
    fn a_reference_matches_by_its_start_whatever_the_case() {
        let p = payment("Order-ÉTÉ-2041", None);
        for t in ["order", "ORDER-été", "Order-ÉTÉ-2041"] {
            assert!(text(t).matches(&p), "{t}");
        }
        for t in ["rder", "order-été-20415", "2041"] {
            assert!(!text(t).matches(&p), "{t}");
        }
    }

    #[test]
    fn a_phone_matches_by_its_last_digits_from_four_on() {
        let p = payment("a", Some("+2290166001001"));
        for t in [
            "0166001001",
            "+229 01 66 00 10 01",
            "1001",
            "22901-66-00-10-01",
        ] {
            assert!(text(t).matches(&p), "{t}");
        }
        for t in ["001", "0166", "1002", "+229 01 66 00 10 02"] {
            assert!(!text(t).matches(&p), "{t}");
        }
        assert!(!text("1001").matches(&payment("a", None)));
    }

    #[test]
    fn a_text_with_a_slash_reads_no_reference_prefix() {
        assert_eq!(text("a/b").prefixes("test", "m").len(), 0);
        assert_eq!(
            text("+229 0166").prefixes("test", "m"),
            ["test/m/r/+229 0166", "test/m/p/6610922"]
        );
    }

    #[test]
    fn a_group_is_its_key_without_the_id() {
        assert_eq!(group_of("test/m/p/1001/0190-x"), "test/m/p/1001/");
    }
}
