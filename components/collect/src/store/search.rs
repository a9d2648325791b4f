//! The `search` index: a payment's reference (lowercased) and its
//! customer's phone digits (reversed), each followed by the payment id, so
//! that "starts with" and "ends with" are both a scan of one key prefix.
//!
//! `env/merchant/r/<lowercased reference>/<id>` and
//! `env/merchant/p/<reversed phone digits>/<id>`. A reference never changes;
//! a phone is set at most once more (when a checkout's customer gives it).

use mmc_domain::record::Payment;

use crate::ApiError;
use crate::mmc::platform::{log, storage};

use super::codec::decode_payment;
use super::transaction::Tx;

/// `meta` key: present once every payment is in `search`.
pub const SEARCH_READY: &str = mmc_domain::payment::search_meta::READY;
/// `meta` key: the last payments key the backfill of `search` has indexed.
pub const SEARCH_BACKFILL: &str = mmc_domain::payment::search_meta::BACKFILL;

/// A phone is found by its last digits from this many on (fewer would
/// match a large share of all phones).
pub const MIN_PHONE_DIGITS: usize = 4;

/// Whether `search` holds every payment (committed data).
pub fn search_ready() -> Result<bool, ApiError> {
    Ok(storage::get("meta", SEARCH_READY)?.is_some())
}

/// Text as compared: Unicode lowercase, one character at a time (a
/// context-free mapping, so the lowercase of a prefix is a prefix of the
/// lowercase).
pub fn fold(text: &str) -> String {
    text.chars().flat_map(char::to_lowercase).collect()
}

/// The ASCII digits of `text`, last first; `None` below [`MIN_PHONE_DIGITS`].
pub fn reversed_digits(text: &str) -> Option<String> {
    let digits: String = text.chars().rev().filter(char::is_ascii_digit).collect();
    (digits.len() >= MIN_PHONE_DIGITS).then_some(digits)
}

/// The reversed digits of `p`'s customer phone, as its `search` key holds them.
pub fn phone_digits(p: &Payment) -> Option<String> {
    p.customer
        .as_ref()
        .and_then(|c| c.phone.as_deref())
        .and_then(reversed_digits)
}

/// Where the references starting with `folded` (already [`fold`]ed) are keyed.
pub fn reference_prefix(env: &str, merchant: &str, folded: &str) -> String {
    [env, merchant, "r", folded].join("/")
}

/// Where the phones whose digits end with `reversed` are keyed.
pub fn phone_prefix(env: &str, merchant: &str, reversed: &str) -> String {
    [env, merchant, "p", reversed].join("/")
}

fn reference_key(p: &Payment) -> String {
    reference_prefix(&p.environment, &p.merchant_id, &fold(&p.reference)) + "/" + &p.id
}

fn phone_key(p: &Payment, reversed: &str) -> String {
    phone_prefix(&p.environment, &p.merchant_id, reversed) + "/" + &p.id
}

impl Tx {
    /// Indexes a new payment: its reference, and its phone when it has one.
    pub(super) fn index_search(&self, p: &Payment) -> Result<(), ApiError> {
        self.put("search", &reference_key(p), b"")?;
        if let Some(digits) = phone_digits(p) {
            self.put("search", &phone_key(p, &digits), b"")?;
        }
        Ok(())
    }

    /// Moves `p`'s phone entry when its phone changed from `before` (the
    /// reversed digits it was stored with): no row written otherwise.
    pub(super) fn reindex_phone(&self, p: &Payment, before: Option<&str>) -> Result<(), ApiError> {
        let after = phone_digits(p);
        if before == after.as_deref() {
            return Ok(());
        }
        if let Some(old) = before {
            self.delete("search", &phone_key(p, old))?;
        }
        if let Some(new) = after {
            self.put("search", &phone_key(p, &new), b"")?;
        }
        Ok(())
    }
}

/// Puts payments stored before the `search` index existed into it, `limit`
/// per round in key order, then marks it ready (`meta/search-v1`); until
/// then a search checks the payments table instead (as the `listing`
/// backfill). A payment created meanwhile indexes itself: putting its keys
/// again changes nothing, and this round's transaction reads the record.
pub fn build_search_index(limit: u32) -> u32 {
    match backfill_some(limit) {
        Ok(n) => n,
        Err(e) => {
            log::log(
                log::Level::Error,
                &format!("search index backfill failed: {}", e.message),
            );
            0
        }
    }
}

fn backfill_some(limit: u32) -> Result<u32, ApiError> {
    if search_ready()? {
        return Ok(0);
    }
    mmc_api_kit::again_on_conflict(|| {
        let tx = storage::begin()?;
        let done_up_to = tx
            .get("meta", SEARCH_BACKFILL)?
            .map(|k| String::from_utf8_lossy(&k).into_owned());
        let start = done_up_to.map(|k| format!("{k}\u{1}")).unwrap_or_default();
        let limit = limit.min(1000); // the storage's largest scan
        let rows = tx.scan("payments", &start, "", limit)?;
        for row in &rows {
            match decode_payment(&row.value) {
                Ok(p) => {
                    tx.put("search", &reference_key(&p), b"")?;
                    if let Some(digits) = phone_digits(&p) {
                        tx.put("search", &phone_key(&p, &digits), b"")?;
                    }
                }
                // Said, and passed over: one bad record must not stop the index.
                Err(e) => log::log(
                    log::Level::Error,
                    &format!("search backfill: {}: {}", row.key, e.message),
                ),
            }
        }
        match rows.last() {
            Some(last) if rows.len() as u32 == limit => {
                tx.put("meta", SEARCH_BACKFILL, last.key.as_bytes())?
            }
            _ => tx.put("meta", SEARCH_READY, b"ready")?,
        }
        tx.commit()?;
        Ok(rows.len() as u32)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_folds_one_character_at_a_time() {
        assert_eq!(fold("ORDER-É1"), "order-é1");
        // `str::to_lowercase` would end "ΟΔΟΣ" with a final sigma, which is
        // no longer a prefix of "ΟΔΟΣ1"'s lowercase.
        assert!(fold("ΟΔΟΣ1").starts_with(&fold("ΟΔΟΣ")));
    }

    #[test]
    fn phone_digits_are_kept_last_first_from_four_on() {
        assert_eq!(
            reversed_digits("+229 01 66 00 10 01").as_deref(),
            Some("1001006610922")
        );
        assert_eq!(reversed_digits("1001").as_deref(), Some("1001"));
        assert_eq!(reversed_digits("order-12"), None);
        // A suffix of the digits is a prefix of the reversed digits.
        let stored = reversed_digits("+2290166001001").unwrap();
        for text in ["0166001001", "+229 01 66 00 10 01", "1001"] {
            assert!(
                stored.starts_with(&reversed_digits(text).unwrap()),
                "{text}"
            );
        }
    }
}
