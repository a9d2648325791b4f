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
    let mut acc = Days::default();
    lines.iter().for_each(|l| acc.add(l));
    acc.finish()
}

/// [`days`] a line at a time, in any order, keeping only each wallet's
/// first and last line and its running net: a statement of a million lines
/// is read without holding it.
#[derive(Debug, Default)]
pub struct Days {
    wallets: BTreeMap<(String, String), Running>,
}

#[derive(Debug)]
struct Running {
    /// The earliest line (the first of equals, as a stable sort keeps
    /// them): its time, the balance it states and its own effect.
    first: (u64, Option<i64>, Option<i64>),
    /// The latest line (the last of equals): its time and stated balance.
    last: (u64, Option<i64>),
    net: Option<i64>,
    /// Every line stated the balance after it.
    stated: bool,
}

impl Days {
    pub fn add(&mut self, line: &Line) {
        let key = (
            line.wallet.clone().unwrap_or_default(),
            line.currency.clone(),
        );
        let effect = effect(line);
        let at = line.at_ms;
        match self.wallets.get_mut(&key) {
            None => {
                self.wallets.insert(
                    key,
                    Running {
                        first: (at, line.balance_after, effect),
                        last: (at, line.balance_after),
                        net: effect,
                        stated: line.balance_after.is_some(),
                    },
                );
            }
            Some(r) => {
                if at < r.first.0 {
                    r.first = (at, line.balance_after, effect);
                }
                if at >= r.last.0 {
                    r.last = (at, line.balance_after);
                }
                r.net = r.net.zip(effect).map(|(n, e)| n + e);
                r.stated &= line.balance_after.is_some();
            }
        }
    }

    pub fn finish(self) -> Vec<WalletDay> {
        self.wallets
            .into_iter()
            .map(|((wallet, currency), r)| {
                let opening = r
                    .first
                    .1
                    .zip(r.first.2)
                    .filter(|_| r.stated)
                    .map(|(after, effect)| after - effect);
                let closing = r.last.1.filter(|_| r.stated);
                let drift = match (opening, closing, r.net) {
                    (Some(o), Some(c), Some(n)) => Some(c - (o + n)),
                    _ => None,
                };
                let major = |v: Option<i64>| v.map(Amount::signed_major);
                WalletDay {
                    wallet,
                    currency,
                    opening: major(opening),
                    closing: major(closing),
                    net: major(r.net),
                    drift: major(drift),
                }
            })
            .collect()
    }
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
    fn lines_read_out_of_order_give_the_same_day() {
        let mut lines = vec![
            line(Kind::Collection, 1500, 15, 1_001_485),
            line(Kind::Payout, 1000, 10, 1_000_475),
            line(Kind::Settlement, 5000, 0, 995_475),
        ];
        let in_order = days(&lines);
        lines.reverse();
        assert_eq!(days(&lines), in_order);
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
