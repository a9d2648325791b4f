//! Each route's float: what its provider's wallets hold for payouts, as the
//! provider last stated it (the adapter's `books.balances`), read again once
//! older than `route_health.float_max_age_ms`. Routing skips a payout route
//! whose wallet cannot cover the payout, and a batch whose total its routes'
//! wallets cannot cover is held before anything is sent.
//!
//! A provider that states no balance (an adapter without books, a failed
//! read) constrains nothing: only a stated balance holds payouts back. A
//! failed read is kept as long as a good one, so a provider whose balance
//! endpoint is down is not asked on every payout.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;

use mmc_books::Amount;

/// One wallet's float for payouts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wallet {
    pub name: String,
    pub currency: String,
    /// Whole major units (a fraction is not counted).
    pub available: u64,
    /// The operators whose payouts it pays.
    pub pays_out: Vec<String>,
}

/// The wallets of an adapter as last read, and when.
struct Reading {
    at_ms: u64,
    wallets: Option<Arc<Vec<Wallet>>>,
}

#[derive(Default)]
pub struct Floats {
    readings: Mutex<HashMap<String, Arc<Mutex<Reading>>>>,
}

impl Floats {
    /// The wallet of `adapter` paying out to `operator` in `currency`: from
    /// the last reading if it is younger than `max_age_ms`, else read again
    /// with `read` (one reader per adapter at a time; the others wait for
    /// its answer rather than ask the provider too).
    pub fn wallet_for(
        &self,
        adapter: &str,
        (operator, currency): (&str, &str),
        (now_ms, max_age_ms): (u64, u64),
        read: impl FnOnce() -> Option<Vec<Wallet>>,
    ) -> Option<Wallet> {
        let slot = self
            .readings
            .lock()
            .entry(adapter.to_string())
            .or_insert_with(|| {
                Arc::new(Mutex::new(Reading {
                    at_ms: 0,
                    wallets: None,
                }))
            })
            .clone();
        let mut reading = slot.lock();
        if reading.at_ms == 0 || now_ms.saturating_sub(reading.at_ms) >= max_age_ms {
            *reading = Reading {
                at_ms: now_ms.max(1),
                wallets: read().map(Arc::new),
            };
        }
        let wallets = reading.wallets.clone()?;
        drop(reading);
        wallets
            .iter()
            .find(|w| w.currency == currency && w.pays_out.iter().any(|o| o == operator))
            .cloned()
    }

    /// Forgets what was read (a deploy of the adapter, a test).
    pub fn forget(&self, adapter: &str) {
        self.readings.lock().remove(adapter);
    }
}

/// A balance as an adapter states it, as a float: none when it pays no
/// payouts or its amount is not one.
pub fn wallet(
    name: String,
    currency: String,
    available: &str,
    pays_out: Vec<String>,
) -> Option<Wallet> {
    if pays_out.is_empty() {
        return None;
    }
    let hundredths = Amount::parse_signed(available)?;
    Some(Wallet {
        name,
        currency,
        available: u64::try_from(hundredths / 100).unwrap_or(0),
        pays_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn simulator(available: u64) -> Vec<Wallet> {
        vec![Wallet {
            name: "simulator".into(),
            currency: "XOF".into(),
            available,
            pays_out: vec!["mtn-bj".into(), "moov-bj".into()],
        }]
    }

    #[test]
    fn a_reading_is_kept_until_it_is_too_old() {
        let floats = Floats::default();
        let reads = std::cell::Cell::new(0);
        let read = |n| {
            reads.set(reads.get() + 1);
            Some(simulator(n))
        };
        let at = |now| floats.wallet_for("simulator", ("mtn-bj", "XOF"), (now, 1000), || read(now));
        assert_eq!(at(5000).unwrap().available, 5000);
        assert_eq!(at(5999).unwrap().available, 5000, "still fresh");
        assert_eq!(at(6000).unwrap().available, 6000, "read again");
        assert_eq!(reads.get(), 2);
    }

    #[test]
    fn only_a_wallet_that_pays_the_operator_in_its_currency_counts() {
        let floats = Floats::default();
        let find = |op: &str, cur: &str| {
            floats.wallet_for("simulator", (op, cur), (1, 60_000), || Some(simulator(9)))
        };
        assert!(find("mtn-bj", "XOF").is_some());
        assert!(find("wave-ci", "XOF").is_none());
        assert!(find("mtn-bj", "EUR").is_none());
        // A provider that stated nothing constrains nothing.
        let none = Floats::default();
        assert!(
            none.wallet_for("x", ("mtn-bj", "XOF"), (1, 60_000), || None)
                .is_none()
        );
    }

    #[test]
    fn a_collection_account_or_an_unreadable_amount_is_no_float() {
        let pays = vec!["mtn-bj".to_string()];
        assert!(wallet("c".into(), "XOF".into(), "100", Vec::new()).is_none());
        assert!(wallet("d".into(), "XOF".into(), "lots", pays.clone()).is_none());
        assert_eq!(
            wallet("d".into(), "XOF".into(), "1500.75", pays)
                .unwrap()
                .available,
            1500
        );
    }
}
