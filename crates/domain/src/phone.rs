//! Numbering plans of Benin, Togo and Côte d'Ivoire: normalise to E.164 and
//! infer the operator from the prefix where the plan allows it.

use crate::operators::{self, Country, Operator};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PhoneError {
    /// Not a number at all (letters, empty).
    Malformed,
    /// A number of another country.
    WrongCountry,
    /// Wrong length or prefix for the country's plan.
    NotMobile,
}

impl std::fmt::Display for PhoneError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            PhoneError::Malformed => {
                "phone must contain digits only, optionally starting with + or 00"
            }
            PhoneError::WrongCountry => "phone belongs to another country",
            PhoneError::NotMobile => "phone is not a mobile number of the country's numbering plan",
        })
    }
}

/// Normalises a local or international number to E.164 (`+229…`).
/// Benin: 10 digits starting `01` since Nov 2024; old 8-digit numbers get `01` in front.
/// Togo: 8 digits. Côte d'Ivoire: 10 digits.
pub fn normalize(country: Country, input: &str) -> Result<String, PhoneError> {
    let compact: String = input
        .chars()
        .filter(|c| !matches!(c, ' ' | '-' | '.' | '(' | ')'))
        .collect();
    let (international, digits) = if let Some(rest) = compact.strip_prefix('+') {
        (true, rest)
    } else if let Some(rest) = compact.strip_prefix("00") {
        (true, rest)
    } else {
        (false, compact.as_str())
    };
    if digits.is_empty() || digits.len() > 15 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(PhoneError::Malformed);
    }
    let dial = country.dial_code();
    let national = if international {
        digits.strip_prefix(dial).ok_or(PhoneError::WrongCountry)?
    } else if digits.len() > 10 && digits.starts_with(dial) {
        // MSISDN without the plus, as aggregators write it.
        &digits[dial.len()..]
    } else {
        digits
    };
    let national = match country {
        Country::Bj => match national.len() {
            10 if national.starts_with("01") => national.to_string(),
            // Old mobile numbers never began with 0: `01 66 00 10` is a
            // new number cut short, not an old one.
            8 if !national.starts_with('0') => format!("01{national}"),
            _ => return Err(PhoneError::NotMobile),
        },
        Country::Tg => match national.len() {
            8 if matches!(&national[..1], "7" | "9") => national.to_string(),
            _ => return Err(PhoneError::NotMobile),
        },
        Country::Ci => match national.len() {
            10 if matches!(&national[..2], "01" | "05" | "07") => national.to_string(),
            _ => return Err(PhoneError::NotMobile),
        },
    };
    Ok(format!("+{dial}{national}"))
}

/// Finds the country of an E.164 or international number.
pub fn country_of(input: &str) -> Option<Country> {
    let digits = input
        .trim()
        .trim_start_matches('+')
        .trim_start_matches("00");
    Country::ALL
        .into_iter()
        .find(|c| digits.starts_with(c.dial_code()))
}

/// The operator that owns the prefix of a normalised number, where the plan
/// tells (portability makes this wrong for a few percent of numbers; Wave
/// runs on every network and is never inferred).
pub fn infer_operator(e164: &str) -> Option<&'static Operator> {
    let country = country_of(e164)?;
    let national = e164
        .trim_start_matches('+')
        .get(country.dial_code().len()..)?;
    let slug = match country {
        Country::Bj => {
            let p: u32 = national.get(..4)?.parse().ok()?;
            match p {
                142
                | 146
                | 150..=154
                | 156
                | 157
                | 159
                | 161
                | 162
                | 166
                | 167
                | 169
                | 190
                | 191
                | 196
                | 197 => "mtn-bj",
                145 | 155 | 158 | 160 | 163..=165 | 168 | 194 | 195 | 198 | 199 => "moov-bj",
                120..=124 | 128 | 129 | 140 | 141 | 143 | 144 | 147..=149 => "celtiis-bj",
                _ => return None,
            }
        }
        Country::Tg => match national.get(..2)? {
            "70" | "71" | "90" | "91" | "92" | "93" => "togocom-tg",
            "79" | "96" | "97" | "98" | "99" => "moov-tg",
            _ => return None,
        },
        Country::Ci => match national.get(..2)? {
            "07" => "orange-ci",
            "05" => "mtn-ci",
            "01" => "moov-ci",
            _ => return None,
        },
    };
    operators::find(slug)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benin_old_numbers_get_01() {
        assert_eq!(
            normalize(Country::Bj, "97000001").unwrap(),
            "+2290197000001"
        );
        assert_eq!(
            normalize(Country::Bj, "+229 01 97 00 00 01").unwrap(),
            "+2290197000001"
        );
        assert_eq!(
            normalize(Country::Bj, "2290197000001").unwrap(),
            "+2290197000001"
        );
        assert_eq!(
            normalize(Country::Bj, "0297000001"),
            Err(PhoneError::NotMobile)
        );
        // A new number cut short is not an old one.
        assert_eq!(
            normalize(Country::Bj, "+229 01 66 00 10"),
            Err(PhoneError::NotMobile)
        );
        assert_eq!(
            normalize(Country::Bj, "0097000001"),
            Err(PhoneError::WrongCountry),
            "00 is the international prefix"
        );
    }

    #[test]
    fn togo_and_ivory_coast() {
        assert_eq!(normalize(Country::Tg, "90000001").unwrap(), "+22890000001");
        assert_eq!(
            normalize(Country::Tg, "+22860000001"),
            Err(PhoneError::NotMobile)
        );
        assert_eq!(
            normalize(Country::Ci, "0700000001").unwrap(),
            "+2250700000001"
        );
        assert_eq!(
            normalize(Country::Ci, "2700000001"),
            Err(PhoneError::NotMobile)
        );
        assert_eq!(
            normalize(Country::Ci, "+22990000001"),
            Err(PhoneError::WrongCountry)
        );
        assert_eq!(normalize(Country::Ci, "07abc"), Err(PhoneError::Malformed));
    }

    #[test]
    fn operator_inference() {
        assert_eq!(infer_operator("+2290166000001").unwrap().slug, "mtn-bj");
        assert_eq!(infer_operator("+2290195000001").unwrap().slug, "moov-bj");
        assert_eq!(infer_operator("+2290140000001").unwrap().slug, "celtiis-bj");
        assert_eq!(infer_operator("+22899000001").unwrap().slug, "moov-tg");
        assert_eq!(infer_operator("+2250500000001").unwrap().slug, "mtn-ci");
        assert!(infer_operator("+2290192000001").is_none());
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Any input: no panic; a success is E.164 of the country, and normalising it again changes nothing.
        #[test]
        fn normalize_is_total_and_idempotent(input in ".{0,40}", c in 0usize..3) {
            let country = Country::ALL[c];
            if let Ok(e164) = normalize(country, &input) {
                let prefix = format!("+{}", country.dial_code());
                prop_assert!(e164.starts_with(&prefix), "{} does not start with {}", e164, prefix);
                prop_assert!(e164[1..].bytes().all(|b| b.is_ascii_digit()));
                prop_assert_eq!(normalize(country, &e164), Ok(e164.clone()));
                prop_assert_eq!(country_of(&e164), Some(country));
            }
        }

        #[test]
        fn digits_only_inputs_never_panic(input in "[+0-9 ]{0,20}") {
            for c in Country::ALL {
                let _ = normalize(c, &input);
            }
            let _ = infer_operator(&input);
        }
    }
}
