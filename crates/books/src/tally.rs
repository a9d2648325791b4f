//! A day's counts and totals: how many records landed in each category,
//! and what the provider says it moved, kind by kind, with its fees.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Amount, Category, Kind, Line};

/// The provider's movements of one kind: how many, how much, what fees.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Total {
    pub count: u64,
    pub amount: Amount,
    pub fee: Amount,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Every category, by name, with its count (zeros included).
    pub counts: BTreeMap<String, u64>,
    /// What the provider executed, by kind (`collection`, `fee`…); its
    /// reversals apart (`reversal`).
    pub provider: BTreeMap<String, Total>,
    /// Our records of the day the books looked at.
    pub our_records: u64,
}

impl Tally {
    pub fn new() -> Tally {
        Tally {
            counts: Category::ALL
                .iter()
                .map(|c| (c.as_str().to_string(), 0))
                .collect(),
            ..Tally::default()
        }
    }

    pub fn count(&mut self, category: Category) {
        *self
            .counts
            .entry(category.as_str().to_string())
            .or_default() += 1;
    }

    pub fn of(&self, category: Category) -> u64 {
        self.counts
            .get(category.as_str())
            .copied()
            .unwrap_or_default()
    }

    /// Counts a provider movement into its kind's total.
    pub fn movement(&mut self, line: &Line) {
        let kind = if line.is_reversal() {
            "reversal"
        } else {
            line.kind.as_str()
        };
        if !line.executed() && !line.is_reversal() {
            return;
        }
        let total = self.provider.entry(kind.to_string()).or_default();
        total.count += 1;
        total.amount = total.amount.saturating_add(line.amount);
        total.fee = total.fee.saturating_add(line.fee.unwrap_or_default());
    }

    /// The provider's total of one kind.
    pub fn provider_total(&self, kind: Kind) -> Total {
        self.provider
            .get(kind.as_str())
            .copied()
            .unwrap_or_default()
    }

    /// Every mismatch counted.
    pub fn mismatches(&self) -> u64 {
        Category::ALL
            .iter()
            .filter(|c| c.is_mismatch())
            .map(|c| self.of(*c))
            .sum()
    }
}
