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
    /// A record settled here this close to the end of its day (ms) and
    /// missing from the provider's statement of that day is read back from
    /// the provider by status before it is called missing: the provider may
    /// have executed it after midnight.
    pub missing_grace_ms: u64,
    /// How long after a day ends a provider read by status (no statement)
    /// has its day read and called final (ms): long enough for that day's
    /// operations to stop moving (a customer approving at the end of their
    /// window, a request carried out late), since a day read by status is
    /// read once, and only what moved by then is seen.
    pub status_settle_ms: u64,
    /// How long a statement the provider is still preparing is waited for (ms).
    pub statement_wait_ms: u64,
    /// What each provider charges, per account, operator and operation:
    /// `[[books.rate_cards]] account = "wave", operation = "collection", percent_bp = 100`.
    /// By default, the simulator's (1 % on collections and payouts); a list
    /// in the configuration replaces it whole.
    pub rate_cards: Vec<RateCard>,
    /// How far (major units) a wallet's stated closing balance may be off
    /// from its opening plus the day's movements before a case is opened.
    pub drift_tolerance: u64,
    /// The provider's lines a run holds in memory while it stages a day:
    /// sorted, then written as one sorted run in packs. More is fewer runs
    /// to merge, and more memory (a few hundred bytes a line).
    pub staged_lines_in_memory: usize,
}

impl Default for BooksConfig {
    fn default() -> Self {
        BooksConfig {
            daily: true,
            check_every_ms: 15 * 60 * 1000,
            catch_up_days: 3,
            missing_grace_ms: 30 * 60 * 1000,
            // The longest direct expiry (1 h) and approval window (30 min),
            // a request in flight (90 s), and a margin.
            status_settle_ms: 2 * 60 * 60 * 1000,
            statement_wait_ms: 10 * 60 * 1000,
            drift_tolerance: 0,
            staged_lines_in_memory: 20_000,
            // The test environment's simulated provider charges 1 % on
            // collections and payouts (its `fee_bp` setting).
            rate_cards: ["collection", "payout"]
                .map(|operation| RateCard {
                    account: "simulator".into(),
                    operator: None,
                    operation: operation.into(),
                    percent_bp: 100,
                    fixed: 0,
                    min: None,
                    max: None,
                })
                .to_vec(),
        }
    }
}

impl BooksConfig {
    pub fn check(&self) -> Result<(), String> {
        if self.staged_lines_in_memory == 0 {
            return Err("books.staged_lines_in_memory must be at least 1".into());
        }
        self.rate_cards.iter().try_for_each(RateCard::check)
    }
}
