//! Whether an operator's success is the one we asked for. A success counts
//! only for the amount and currency of the stored intent (and, for a payout,
//! its beneficiary): an answer that names another amount, another currency or
//! another account is never believed, whoever sent it (a status query, a
//! callback, an OTP confirmation, a refund's or a payout's first answer).
//! Written once; `collect` and `bulk` call it on every success they apply.

use std::fmt;

/// What we asked the operator to move.
#[derive(Debug, Clone, Copy)]
pub struct Asked<'a> {
    /// Major units (XOF has no subunit).
    pub amount: u64,
    pub currency: &'a str,
    /// A payout's beneficiary (E.164): its digits must match the answer's
    /// account when the answer names one. `None` for collections and refunds.
    pub party: Option<&'a str>,
}

/// What the operator's answer says was moved, as it says it.
#[derive(Debug, Clone, Copy)]
pub struct Reported<'a> {
    pub amount: &'a str,
    pub currency: &'a str,
    pub party: Option<&'a str>,
}

/// Why a success is not the one we asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mismatch {
    Amount { asked: u64, reported: String },
    Currency { asked: String, reported: String },
    Party { reported: String },
}

impl Mismatch {
    /// The machine-readable reason stored on the operation under review.
    pub fn code(&self) -> &'static str {
        match self {
            Mismatch::Amount { .. } => "amount_mismatch",
            Mismatch::Currency { .. } => "currency_mismatch",
            Mismatch::Party { .. } => "beneficiary_mismatch",
        }
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Mismatch::Amount { asked, reported } => write!(
                f,
                "The operator reports a success for the amount {reported:?}, not the {asked} asked."
            ),
            Mismatch::Currency { asked, reported } => write!(
                f,
                "The operator reports a success in {reported:?}, not in the {asked} asked."
            ),
            Mismatch::Party { reported } => write!(
                f,
                "The operator reports the money sent to another account ({reported:?})."
            ),
        }
    }
}

/// `Ok` when `reported` is exactly what was `asked`.
pub fn check(asked: Asked<'_>, reported: Reported<'_>) -> Result<(), Mismatch> {
    if major_units(reported.amount) != Some(asked.amount) {
        return Err(Mismatch::Amount {
            asked: asked.amount,
            reported: clip(reported.amount),
        });
    }
    if !reported
        .currency
        .trim()
        .eq_ignore_ascii_case(asked.currency)
    {
        return Err(Mismatch::Currency {
            asked: asked.currency.into(),
            reported: clip(reported.currency),
        });
    }
    if let (Some(want), Some(got)) = (asked.party, reported.party)
        && !same_account(want, got)
    {
        return Err(Mismatch::Party {
            reported: clip(got),
        });
    }
    Ok(())
}

/// A decimal amount in major units: `"1000"`, `"1000.00"`, `"1000.0"` are
/// 1000; a fraction that is not zero, a sign, an exponent or anything else
/// is not a whole amount (XOF has no subunit) and matches nothing.
pub fn major_units(s: &str) -> Option<u64> {
    match decimal(s)? {
        (whole, false) => Some(whole),
        _ => None,
    }
}

/// A decimal limit (`"1000"`, `"1000.50"`) in whole units, as limits in XOF
/// are kept: `round_up` for a minimum, else down for a maximum, so that a
/// whole amount inside is inside the provider's limits; anything else is none.
pub fn whole_units(s: &str, round_up: bool) -> Option<u64> {
    let (whole, fraction) = decimal(s)?;
    if round_up && fraction {
        whole.checked_add(1)
    } else {
        Some(whole)
    }
}

/// A plain decimal's whole part, and whether its fraction is not zero; none
/// for a sign, an exponent or anything else.
fn decimal(s: &str) -> Option<(u64, bool)> {
    let s = s.trim();
    let (whole, fraction) = s.split_once('.').unwrap_or((s, ""));
    let digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return None;
    }
    Some((whole.parse().ok()?, fraction.bytes().any(|b| b != b'0')))
}

/// Two MSISDNs name one account when the answer's, read as a number of the
/// asked one's country in any form it is written (with or without its
/// country code, Benin's old 8-digit form), is the asked number. Where the
/// asked number's country is not known, at least eight digits must agree.
fn same_account(asked: &str, reported: &str) -> bool {
    if let Some(country) = crate::phone::country_of(asked) {
        return crate::phone::normalize(country, reported).is_ok_and(|r| r == asked);
    }
    let digits = |s: &str| s.chars().filter(char::is_ascii_digit).collect::<String>();
    let (asked, reported) = (digits(asked), digits(reported));
    reported.len() >= 8 && asked.ends_with(&reported)
}

/// What an answer said, cut for a log line or a stored reason.
fn clip(s: &str) -> String {
    s.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_limits_are_whole_units_inside_them() {
        for (v, up, expected) in [
            ("1000", true, Some(1000)),
            ("1000.00", true, Some(1000)),
            ("1000.50", true, Some(1001)),
            ("1000.50", false, Some(1000)),
            (" 25 ", false, Some(25)),
            ("1e3", false, None),
            ("10.5x", true, None),
            ("-5", true, None),
            ("", false, None),
        ] {
            assert_eq!(whole_units(v, up), expected, "{v} {up}");
        }
    }

    fn asked(amount: u64) -> Asked<'static> {
        Asked {
            amount,
            currency: "XOF",
            party: None,
        }
    }

    fn reported<'a>(amount: &'a str, currency: &'a str) -> Reported<'a> {
        Reported {
            amount,
            currency,
            party: None,
        }
    }

    #[test]
    fn the_amount_asked_in_any_decimal_form_is_believed() {
        for a in ["1000", "1000.00", "1000.0", " 1000 ", "01000"] {
            assert_eq!(check(asked(1000), reported(a, "XOF")), Ok(()), "{a}");
        }
        assert_eq!(check(asked(1000), reported("1000", "xof")), Ok(()));
    }

    #[test]
    fn another_amount_or_currency_is_a_mismatch() {
        for a in [
            "1", "999", "1001", "1000.5", "100000", "", "-1000", "1e3", "1,000", "abc",
        ] {
            let e = check(asked(1000), reported(a, "XOF")).unwrap_err();
            assert_eq!(e.code(), "amount_mismatch", "{a}");
        }
        let e = check(asked(1000), reported("1000", "XAF")).unwrap_err();
        assert_eq!(e.code(), "currency_mismatch");
        assert!(e.to_string().contains("XAF"), "{e}");
        assert_eq!(
            check(asked(1000), reported("1000", "")).unwrap_err().code(),
            "currency_mismatch"
        );
    }

    #[test]
    fn a_payouts_beneficiary_must_be_the_number_paid() {
        let payout = Asked {
            amount: 500,
            currency: "XOF",
            party: Some("+2290166000001"),
        };
        let to = |party| Reported {
            amount: "500",
            currency: "XOF",
            party,
        };
        assert_eq!(check(payout, to(None)), Ok(()), "an answer that names none");
        assert_eq!(check(payout, to(Some("2290166000001"))), Ok(()));
        assert_eq!(check(payout, to(Some("0166000001"))), Ok(()));
        // Benin's old forms of the same number, as aggregators' sandboxes write them.
        assert_eq!(check(payout, to(Some("22966000001"))), Ok(()));
        assert_eq!(check(payout, to(Some("66000001"))), Ok(()));
        for other in ["2290166000002", "0166000002", "1", ""] {
            assert_eq!(
                check(payout, to(Some(other))).unwrap_err().code(),
                "beneficiary_mismatch",
                "{other}"
            );
        }
        // In Côte d'Ivoire eight digits name no number: 01, 05 and 07 wallets
        // share them.
        let ci = Asked {
            party: Some("+2250766000001"),
            ..payout
        };
        assert_eq!(check(ci, to(Some("0766000001"))), Ok(()));
        assert_eq!(
            check(ci, to(Some("66000001"))).unwrap_err().code(),
            "beneficiary_mismatch"
        );
    }
}
