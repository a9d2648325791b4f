//! What a provider charges, per account, operator and operation, as agreed
//! in its contract: a percentage and a fixed part, bounded. Each record's
//! expected fee and net amount come from it, and a provider's fee that is
//! not this is a difference (`fee_differs`).

use serde::{Deserialize, Serialize};

/// One line of a provider's price list.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateCard {
    /// The provider account (the adapter's name) it prices.
    pub account: String,
    /// One operator (its slug); none: every operator of the account.
    #[serde(default)]
    pub operator: Option<String>,
    /// `collection`, `refund` or `payout`.
    pub operation: String,
    /// Percent of the amount, in basis points (150 = 1.5 %).
    #[serde(default)]
    pub percent_bp: u32,
    /// A fixed part, in major units.
    #[serde(default)]
    pub fixed: u64,
    /// The least fee, in major units.
    #[serde(default)]
    pub min: Option<u64>,
    /// The most fee, in major units.
    #[serde(default)]
    pub max: Option<u64>,
}

impl RateCard {
    /// The fee for `amount` (major units), rounded to the nearest unit, half
    /// up (the XOF has no subunit), then bounded.
    pub fn fee(&self, amount: u64) -> u64 {
        let percent = (u128::from(amount) * u128::from(self.percent_bp) + 5_000) / 10_000;
        let fee = u64::try_from(percent)
            .unwrap_or(u64::MAX)
            .saturating_add(self.fixed);
        let fee = self.min.map_or(fee, |min| fee.max(min));
        self.max.map_or(fee, |max| fee.min(max))
    }

    /// Why this card cannot be used, if it cannot.
    pub fn check(&self) -> Result<(), String> {
        if !matches!(self.operation.as_str(), "collection" | "refund" | "payout") {
            return Err(format!(
                "rate card for {}: operation must be collection, refund or payout, not {:?}",
                self.account, self.operation
            ));
        }
        if self.percent_bp > 10_000 {
            return Err(format!(
                "rate card for {}: percent_bp above 10000 (100 %)",
                self.account
            ));
        }
        if let (Some(min), Some(max)) = (self.min, self.max)
            && min > max
        {
            return Err(format!("rate card for {}: min above max", self.account));
        }
        Ok(())
    }

    fn applies(&self, account: &str, operator: Option<&str>, operation: &str) -> bool {
        self.account == account
            && self.operation == operation
            && self.operator.as_deref().is_none_or(|o| Some(o) == operator)
    }
}

/// The card for a record: the one naming its operator, else the account's.
pub fn find<'a>(
    cards: &'a [RateCard],
    account: &str,
    operator: Option<&str>,
    operation: &str,
) -> Option<&'a RateCard> {
    let fitting = cards
        .iter()
        .filter(|c| c.applies(account, operator, operation));
    fitting.max_by_key(|c| c.operator.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(percent_bp: u32, fixed: u64, min: Option<u64>, max: Option<u64>) -> RateCard {
        RateCard {
            account: "wave".into(),
            operator: None,
            operation: "collection".into(),
            percent_bp,
            fixed,
            min,
            max,
        }
    }

    #[test]
    fn a_fee_is_percent_and_fixed_rounded_half_up_then_bounded() {
        assert_eq!(card(100, 0, None, None).fee(1000), 10);
        assert_eq!(card(150, 0, None, None).fee(1030), 15); // 15.45
        assert_eq!(card(150, 0, None, None).fee(1100), 17); // 16.5 → 17
        assert_eq!(card(100, 25, None, None).fee(1000), 35);
        assert_eq!(card(100, 0, Some(50), None).fee(1000), 50);
        assert_eq!(card(100, 0, None, Some(500)).fee(1_000_000), 500);
    }

    #[test]
    fn the_card_naming_the_operator_wins() {
        let mut specific = card(200, 0, None, None);
        specific.operator = Some("wave-ci".into());
        let cards = vec![card(100, 0, None, None), specific];
        assert_eq!(
            find(&cards, "wave", Some("wave-ci"), "collection")
                .unwrap()
                .percent_bp,
            200
        );
        assert_eq!(
            find(&cards, "wave", Some("orange-ci"), "collection")
                .unwrap()
                .percent_bp,
            100
        );
        assert!(find(&cards, "wave", None, "payout").is_none());
        assert!(find(&cards, "momo", None, "collection").is_none());
    }

    #[test]
    fn a_card_that_cannot_price_is_refused() {
        assert!(card(100, 0, None, None).check().is_ok());
        assert!(card(10_001, 0, None, None).check().is_err());
        assert!(card(100, 0, Some(10), Some(5)).check().is_err());
        let mut wrong = card(100, 0, None, None);
        wrong.operation = "deposit".into();
        assert!(wrong.check().is_err());
    }
}
