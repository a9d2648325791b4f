//! Amounts as providers write them (`"1000"`, `"1000.00"`, `"12.5"`), held
//! exactly in hundredths of a major unit: the XOF has no subunit, but a
//! provider may still write one, and a fee may be a fraction.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// An unsigned amount in hundredths of a major unit; written and read as
/// providers write it (`"1000"`, `"12.5"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Amount(pub u64);

impl Serialize for Amount {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_major())
    }
}

impl<'de> Deserialize<'de> for Amount {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Amount, D::Error> {
        let written = String::deserialize(d)?;
        Amount::parse(&written)
            .ok_or_else(|| serde::de::Error::custom(format!("{written:?} is not an amount")))
    }
}

impl Amount {
    pub const ZERO: Amount = Amount(0);

    /// `major` whole units.
    pub fn whole(major: u64) -> Amount {
        Amount(major.saturating_mul(100))
    }

    /// A decimal as written: digits, then at most two decimals (more are
    /// refused unless they are zeros). None for anything else (a sign, an
    /// exponent, an empty string).
    pub fn parse(written: &str) -> Option<Amount> {
        let s = written.trim();
        let (int, frac) = s.split_once('.').unwrap_or((s, ""));
        if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if !frac.bytes().all(|b| b.is_ascii_digit()) || (s.contains('.') && frac.is_empty()) {
            return None;
        }
        let (kept, rest) = frac.split_at(frac.len().min(2));
        if rest.bytes().any(|b| b != b'0') {
            return None;
        }
        let major: u64 = int.parse().ok()?;
        let minor: u64 = format!("{kept:0<2}").parse().ok()?;
        major.checked_mul(100)?.checked_add(minor).map(Amount)
    }

    /// In major units, as providers write it: `1000`, `12.5`, `0.05`.
    pub fn to_major(self) -> String {
        match self.0 % 100 {
            0 => (self.0 / 100).to_string(),
            c if c % 10 == 0 => format!("{}.{}", self.0 / 100, c / 10),
            c => format!("{}.{c:02}", self.0 / 100),
        }
    }

    /// A signed decimal as written (`"-12.5"`), in hundredths.
    pub fn parse_signed(written: &str) -> Option<i64> {
        let s = written.trim();
        let (negative, digits) = match s.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let n = i64::try_from(Amount::parse(digits)?.0).ok()?;
        Some(if negative { -n } else { n })
    }

    /// Signed hundredths written in major units: `-12.5`.
    pub fn signed_major(hundredths: i64) -> String {
        let major = Amount(hundredths.unsigned_abs()).to_major();
        if hundredths < 0 {
            format!("-{major}")
        } else {
            major
        }
    }

    pub fn saturating_add(self, other: Amount) -> Amount {
        Amount(self.0.saturating_add(other.0))
    }
}

impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_major())
    }
}

#[cfg(test)]
mod tests {
    use super::Amount;

    #[test]
    fn written_amounts_are_read_exactly() {
        assert_eq!(Amount::parse("1000"), Some(Amount::whole(1000)));
        assert_eq!(Amount::parse("1000.00"), Some(Amount::whole(1000)));
        assert_eq!(Amount::parse("12.5"), Some(Amount(1250)));
        assert_eq!(Amount::parse(" 0.05 "), Some(Amount(5)));
        assert_eq!(Amount::parse("1.230"), Some(Amount(123)));
        for bad in [
            "",
            "-5",
            "+5",
            "1e3",
            "1.",
            ".5",
            "1.234",
            "1,5",
            "abc",
            "99999999999999999999",
        ] {
            assert_eq!(Amount::parse(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn amounts_are_written_as_providers_write_them() {
        assert_eq!(Amount::whole(1000).to_major(), "1000");
        assert_eq!(Amount(1250).to_major(), "12.5");
        assert_eq!(Amount(5).to_major(), "0.05");
    }

    #[test]
    fn a_balance_may_be_negative() {
        assert_eq!(Amount::parse_signed("-12.5"), Some(-1250));
        assert_eq!(Amount::parse_signed("1001485"), Some(100_148_500));
        assert_eq!(Amount::parse_signed("--1"), None);
        assert_eq!(Amount::signed_major(-1250), "-12.5");
        assert_eq!(Amount::signed_major(100_148_500), "1001485");
    }

    #[test]
    fn an_amount_is_stored_as_written() {
        let json = serde_json::to_string(&Amount(1250)).unwrap();
        assert_eq!(json, r#""12.5""#);
        assert_eq!(serde_json::from_str::<Amount>(&json).unwrap(), Amount(1250));
        assert!(serde_json::from_str::<Amount>(r#""-1""#).is_err());
    }

    proptest::proptest! {
        #[test]
        fn what_is_written_reads_back(n in 0u64..1_000_000_000_000) {
            proptest::prop_assert_eq!(Amount::parse(&Amount(n).to_major()), Some(Amount(n)));
        }
    }
}
