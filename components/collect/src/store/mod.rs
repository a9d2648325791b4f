//! Records and their keys in this component's storage. Every key starts
//! with environment and merchant, so a lookup made for one merchant and
//! environment cannot reach another's data.
//!
//! | table | key | value |
//! |---|---|---|
//! | payments | env/merchant/id | [`Payment`] |
//! | refs | env/merchant/reference | payment id |
//! | idem | env/merchant/idempotency-key | [`IdemRecord`] |
//! | expiry | expires_ms/env/merchant/id | (empty) — payments not yet final |
//! | active | next_check_ms/env/merchant/id | (empty) — payments to poll at the PSP |
//! | owners | env/id | merchant id — for operator callbacks, which carry no merchant |
//! | pspref | env/operator/psp_reference | merchant/id |
//! | refunds | env/merchant/refund id | [`Refund`] |
//! | refund_active | next_check_ms/env/merchant/refund id | (empty) — refunds to poll |
//! | payment_refunds | env/merchant/payment id/refund id | (empty) — a payment's refunds |
//! | refund_idem | env/merchant/idempotency-key | [`RefundIdem`] |
//! | listing | env/merchant/status/country/operator/id | (empty) — the list's filters ([`listing_key`]; status: the final one, or `pending` for every payment in progress) |
//! | search | env/merchant/r/lowercased reference/id, env/merchant/p/reversed phone digits/id | (empty) — the list's `search`: a prefix of either key part is "starts with" the reference or "ends with" the phone ([`search`]) |
//! | callbacks | env/operator/digest of the body | when it is forgotten (ms) — operators' callbacks taken, so a replay changes nothing |
//! | callback_expiry | forget_ms/env/operator/digest | (empty) — `callbacks` in the order they are forgotten |
//! | meta | `listing-v2` / `listing-v2-backfill` | set once every payment is in `listing` as keyed now / how far its backfill got |
//! | meta | `search-v1` / `search-v1-backfill` | the same for `search` |

mod codec;
mod indexes;
mod keys;
mod reads;
mod records;
pub mod search;
mod tables;
mod transaction;

pub use mmc_domain::record::{Customer, Failure, Generation, Payment};

pub use codec::{binary_records, decode_payment};
pub use indexes::{
    Due, LISTING_BACKFILL, LISTING_READY, Listed, drop_index_entry, due, listed_status,
    listing_key, listing_prefix, listing_ready,
};
pub use keys::{idem_row, reference_row, scope, time_key};
pub use mmc_api_kit::again_on_conflict;
pub use reads::{read_owner, read_payment, read_payment_refunds, read_refund, read_stored_payment};
pub use records::{IdemRecord, Refund, RefundIdem, RefundStatus};
pub use search::{build_search_index, search_ready};
pub use transaction::{Tx, transact, transact_assuming_absent};
