//! A wallet's day, from a statement that states the balance after each
//! movement (Wave's does): the balance it opened and closed with, the net of
//! the movements, and the drift — what the stated closing balance is off
//! from the opening plus every movement. A drift means the statement is
//! missing a movement, or states one that did not move what it says.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::{Amount, Kind, Line};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalletDay {
    pub wallet: String,
    pub currency: String,
    /// Major units, signed, as providers write them; none when the
    /// statement does not say enough to know.
    pub opening: Option<String>,
    pub closing: Option<String>,
    /// The movements' effect on the wallet, fees included.
    pub net: Option<String>,
    /// The stated closing less (opening + net): "0" when the books add up.
    pub drift: Option<String>,
}

impl WalletDay {
    pub fn drifted(&self) -> bool {
        self.drift.as_deref().is_some_and(|d| d != "0")
    }
}

/// What a line did to its wallet (signed hundredths, its fee included),
/// when its kind says which way money went; a movement that did not
/// execute did nothing.
pub fn effect(line: &Line) -> Option<i64> {
    let amount = i64::try_from(line.amount.0).ok()?;
    let fee = i64::try_from(line.fee.unwrap_or_default().0).ok()?;
    if line.is_reversal() {
        return match line.kind {
            Kind::Collection => Some(-amount),
            Kind::Refund | Kind::Payout => Some(amount),
            _ => None,
        };
    }
    if !line.executed() {
        return Some(0);
    }
    match line.kind {
        Kind::Collection => Some(amount - fee),
        Kind::Refund | Kind::Payout => Some(-amount - fee),
        Kind::Fee | Kind::Settlement => Some(-amount - fee),
        Kind::TopUp => Some(amount - fee),
        Kind::Adjustment | Kind::Other => None,
    }
}

/// Each wallet's day, from its lines in the order they executed.
pub fn days(lines: &[Line]) -> Vec<WalletDay> {
    let mut by_wallet: BTreeMap<(String, String), Vec<&Line>> = BTreeMap::new();
    for line in lines {
        let key = (
            line.wallet.clone().unwrap_or_default(),
            line.currency.clone(),
        );
        by_wallet.entry(key).or_default().push(line);
    }
    by_wallet
        .into_iter()
        .map(|((wallet, currency), mut lines)| {
            lines.sort_by_key(|l| l.at_ms);
            let net: Option<i64> = lines.iter().map(|l| effect(l)).sum();
            let stated = lines.iter().all(|l| l.balance_after.is_some());
            let (first, last) = (lines.first(), lines.last());
            let opening = first
                .filter(|_| stated)
                .and_then(|l| Some(l.balance_after? - effect(l)?));
            let closing = last.filter(|_| stated).and_then(|l| l.balance_after);
            let drift = match (opening, closing, net) {
                (Some(o), Some(c), Some(n)) => Some(c - (o + n)),
                _ => None,
            };
            let major = |v: Option<i64>| v.map(Amount::signed_major);
            WalletDay {
                wallet,
                currency,
                opening: major(opening),
                closing: major(closing),
                net: major(net),
                drift: major(drift),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines in the order they are made.
    static AT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

    fn line(kind: Kind, amount: u64, fee: u64, after: i64) -> Line {
        Line {
            provider_id: format!("T{after}"),
            our_id: None,
            psp_reference: None,
            kind,
            amount: Amount::whole(amount),
            fee: Some(Amount::whole(fee)),
            currency: "XOF".into(),
            status: "completed".into(),
            operator_transaction_id: None,
            at_ms: AT.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            wallet: Some("wave-ci".into()),
            balance_after: Some(after * 100),
        }
    }

    #[test]
    fn a_day_that_adds_up_has_no_drift() {
        let lines = [
            line(Kind::Collection, 1500, 15, 1_001_485),
            line(Kind::Payout, 1000, 10, 1_000_475),
            line(Kind::Settlement, 5000, 0, 995_475),
        ];
        let day = &days(&lines)[0];
        assert_eq!(day.opening.as_deref(), Some("1000000"));
        assert_eq!(day.closing.as_deref(), Some("995475"));
        assert_eq!(day.net.as_deref(), Some("-4525"));
        assert_eq!(day.drift.as_deref(), Some("0"));
        assert!(!day.drifted());
    }

    #[test]
    fn a_movement_the_statement_lacks_shows_as_drift() {
        // The wallet went from 1 001 485 to 1 000 475, then lost 500 more than it says.
        let lines = [
            line(Kind::Collection, 1500, 15, 1_001_485),
            line(Kind::Payout, 1000, 10, 999_975),
        ];
        let day = &days(&lines)[0];
        assert_eq!(day.drift.as_deref(), Some("-500"));
        assert!(day.drifted());
    }

    #[test]
    fn without_stated_balances_only_the_net_is_known() {
        let mut l = line(Kind::Collection, 1500, 15, 0);
        l.balance_after = None;
        let day = &days(&[l])[0];
        assert_eq!(
            (day.opening.clone(), day.net.clone(), day.drift.clone()),
            (None, Some("1485".into()), None)
        );
    }
}
