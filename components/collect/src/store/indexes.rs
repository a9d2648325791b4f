//! The index tables: `listing` (the list's filters, and whether it holds
//! every payment) and the time-ordered indexes' due entries.

use mmc_domain::Status;
use mmc_domain::record::Payment;

use crate::ApiError;
use crate::mmc::platform::storage;

use super::keys::{padded_ms, parse_time_key};
use super::transaction::Tx;

/// `meta` key: present once every payment is in `listing`.
pub const LISTING_READY: &str = mmc_domain::payment::listing_meta::READY;
/// `meta` key: the last payments key the backfill of `listing` has indexed.
pub const LISTING_BACKFILL: &str = mmc_domain::payment::listing_meta::BACKFILL;

/// Whether `listing` holds every payment (committed data).
pub fn listing_ready() -> Result<bool, ApiError> {
    Ok(storage::get("meta", LISTING_READY)?.is_some())
}

/// What the `listing` index keys a payment by: borrowed from the payment,
/// as a save compares the stored one's with the new one's.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Listed<'a> {
    pub environment: &'a str,
    pub merchant_id: &'a str,
    pub id: &'a str,
    pub status: Status,
    pub country: &'a str,
    pub operator: Option<&'a str>,
}

impl<'a> Listed<'a> {
    pub fn of(p: &'a Payment) -> Listed<'a> {
        Listed {
            environment: &p.environment,
            merchant_id: &p.merchant_id,
            id: &p.id,
            status: listed_status(p.status),
            country: &p.country,
            operator: p.operator.as_deref(),
        }
    }
}

/// The status a payment is keyed by in `listing`: its own once final, else
/// `pending` for every status in progress. A payment's answer from its
/// operator (pending → processing, awaiting OTP...) then writes no index
/// row; only its end moves the entry (two rows fewer per payment). The
/// list checks every filter on the record, so `status=processing` reads
/// the `pending` entries and keeps the processing ones — few: payments in
/// progress end within minutes.
pub fn listed_status(status: Status) -> Status {
    if status.is_terminal() {
        status
    } else {
        Status::Pending
    }
}

/// A payment's key in `listing`: `env/merchant/status/country/operator/id`
/// (`-` before an operator is chosen). Every filter of the list is a set of
/// these prefixes, each in id (creation) order; the list merges them.
pub fn listing_key(p: &Listed) -> String {
    let prefix = listing_prefix(
        p.environment,
        p.merchant_id,
        p.status,
        p.country,
        p.operator,
    );
    prefix + p.id
}

/// The prefix (ending in `/`) of one status, country and operator in `listing`.
pub fn listing_prefix(
    env: &str,
    merchant: &str,
    status: Status,
    country: &str,
    operator: Option<&str>,
) -> String {
    [
        env,
        merchant,
        status.as_str(),
        country,
        operator.unwrap_or("-"),
        "",
    ]
    .join("/")
}

/// An entry of a time-ordered index that is due.
pub struct Due {
    pub key: String,
    pub env: String,
    pub merchant: String,
    pub id: String,
}

/// Index entries due at `now` (keys of a time-ordered table).
pub fn due(table: &str, now: u64, limit: u32) -> Result<Vec<Due>, ApiError> {
    let end = padded_ms(now) + "~";
    Ok(storage::scan(table, "", &end, limit)?
        .into_iter()
        .filter_map(|e| {
            parse_time_key(&e.key).map(|(_, env, merchant, id)| Due {
                key: e.key,
                env,
                merchant,
                id,
            })
        })
        .collect())
}

/// Removes an index entry whose payment is gone.
pub fn drop_index_entry(table: &str, key: &str) -> Result<(), ApiError> {
    mmc_api_kit::again_on_conflict(|| {
        let tx = Tx::begin()?;
        tx.delete(table, key)?;
        tx.commit()
    })
}
