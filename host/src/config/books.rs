//! `[books]`: reconciliation against the providers, and their price lists.

use serde::{Deserialize, Serialize};

pub use mmc_books::RateCard;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BooksConfig {
    /// Reconcile each provider account's finished days by themselves.
    pub daily: bool,
    /// How often to look for a finished day not yet reconciled (ms).
    pub check_every_ms: u64,
    /// How many days back a day not yet reconciled is still run by itself.
    pub catch_up_days: u32,
    /// How long a statement the provider is still preparing is waited for (ms).
    pub statement_wait_ms: u64,
    /// What each provider charges, per account, operator and operation:
    /// `[[books.rate_cards]] account = "wave", operation = "collection", percent_bp = 100`.
    pub rate_cards: Vec<RateCard>,
}

impl Default for BooksConfig {
    fn default() -> Self {
        BooksConfig {
            daily: true,
            check_every_ms: 15 * 60 * 1000,
            catch_up_days: 3,
            statement_wait_ms: 10 * 60 * 1000,
            rate_cards: Vec::new(),
        }
    }
}

impl BooksConfig {
    pub fn check(&self) -> Result<(), String> {
        self.rate_cards.iter().try_for_each(RateCard::check)
    }
}
