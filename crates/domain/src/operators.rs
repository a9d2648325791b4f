//! The operators we serve, with the facts adapters describe them with.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Country {
    #[serde(rename = "BJ")]
    Bj,
    #[serde(rename = "TG")]
    Tg,
    #[serde(rename = "CI")]
    Ci,
}

impl Country {
    pub const ALL: [Country; 3] = [Country::Bj, Country::Tg, Country::Ci];

    pub fn parse(code: &str) -> Option<Country> {
        match code {
            "BJ" => Some(Country::Bj),
            "TG" => Some(Country::Tg),
            "CI" => Some(Country::Ci),
            _ => None,
        }
    }

    pub fn code(self) -> &'static str {
        match self {
            Country::Bj => "BJ",
            Country::Tg => "TG",
            Country::Ci => "CI",
        }
    }

    /// All three countries use the West African CFA franc.
    pub fn currency(self) -> &'static str {
        "XOF"
    }

    pub fn dial_code(self) -> &'static str {
        match self {
            Country::Bj => "229",
            Country::Tg => "228",
            Country::Ci => "225",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    pub slug: &'static str,
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub country: Country,
    pub requires_otp: bool,
    pub min_amount: u64,
    pub max_amount: u64,
    /// pawaPay's provider code for this operator; `None` where pawaPay does
    /// not serve it (its v2 provider list for Benin has MTN and Moov only:
    /// Celtiis and Coris Money go through FedaPay, see docs/operators.md).
    pub provider_code: Option<&'static str>,
}

impl Operator {
    pub fn currency(&self) -> &'static str {
        self.country.currency()
    }
}

const MIN: u64 = 100;
const MAX: u64 = 2_000_000;

pub static OPERATORS: &[Operator] = &[
    Operator {
        slug: "mtn-bj",
        name: "MTN Mobile Money Bénin",
        aliases: &["mtn", "momo-bj"],
        country: Country::Bj,
        requires_otp: false,
        min_amount: MIN,
        max_amount: MAX,
        provider_code: Some("MTN_MOMO_BEN"),
    },
    Operator {
        slug: "moov-bj",
        name: "Moov Money Bénin",
        aliases: &["moov-money-bj", "flooz-bj"],
        country: Country::Bj,
        requires_otp: false,
        min_amount: MIN,
        max_amount: MAX,
        provider_code: Some("MOOV_BEN"),
    },
    Operator {
        slug: "celtiis-bj",
        name: "Celtiis Cash",
        aliases: &["celtiis"],
        country: Country::Bj,
        requires_otp: false,
        min_amount: MIN,
        max_amount: MAX,
        provider_code: None,
    },
    Operator {
        slug: "coris-bj",
        name: "Coris Money Bénin",
        aliases: &["coris"],
        country: Country::Bj,
        requires_otp: true,
        min_amount: MIN,
        max_amount: MAX,
        provider_code: None,
    },
    Operator {
        slug: "togocom-tg",
        name: "Mixx by Yas (T-Money)",
        aliases: &["tmoney", "togocel", "yas"],
        country: Country::Tg,
        requires_otp: false,
        min_amount: MIN,
        max_amount: MAX,
        provider_code: Some("TOGOCOM_TGO"),
    },
    Operator {
        slug: "moov-tg",
        name: "Moov Money Togo (Flooz)",
        aliases: &["flooz"],
        country: Country::Tg,
        requires_otp: false,
        min_amount: MIN,
        max_amount: MAX,
        provider_code: Some("MOOV_TGO"),
    },
    Operator {
        slug: "orange-ci",
        name: "Orange Money Côte d'Ivoire",
        aliases: &["orange"],
        country: Country::Ci,
        requires_otp: false,
        min_amount: MIN,
        max_amount: MAX,
        provider_code: Some("ORANGE_CIV"),
    },
    Operator {
        slug: "mtn-ci",
        name: "MTN MoMo Côte d'Ivoire",
        aliases: &["momo-ci"],
        country: Country::Ci,
        requires_otp: false,
        min_amount: MIN,
        max_amount: MAX,
        provider_code: Some("MTN_MOMO_CIV"),
    },
    Operator {
        slug: "moov-ci",
        name: "Moov Money Côte d'Ivoire",
        aliases: &["moov-money-ci"],
        country: Country::Ci,
        requires_otp: false,
        min_amount: MIN,
        max_amount: MAX,
        provider_code: Some("MOOV_CIV"),
    },
    Operator {
        slug: "wave-ci",
        name: "Wave Côte d'Ivoire",
        aliases: &["wave"],
        country: Country::Ci,
        requires_otp: false,
        min_amount: MIN,
        max_amount: MAX,
        provider_code: Some("WAVE_CIV"),
    },
];

/// Finds an operator by slug or alias (case-insensitive).
pub fn find(slug_or_alias: &str) -> Option<&'static Operator> {
    let wanted = slug_or_alias.trim().to_ascii_lowercase();
    OPERATORS
        .iter()
        .find(|op| op.slug == wanted || op.aliases.contains(&wanted.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aliases_resolve_to_their_slug() {
        assert_eq!(find("tmoney").unwrap().slug, "togocom-tg");
        assert_eq!(find("YAS").unwrap().slug, "togocom-tg");
        assert_eq!(find("flooz").unwrap().slug, "moov-tg");
        assert!(find("airtel").is_none());
    }

    #[test]
    fn exactly_one_otp_operator_in_benin() {
        let otp: Vec<_> = OPERATORS.iter().filter(|o| o.requires_otp).collect();
        assert_eq!(otp.len(), 1);
        assert_eq!(otp[0].slug, "coris-bj");
    }

    #[test]
    fn slugs_and_aliases_are_unique() {
        let mut names: Vec<&str> = OPERATORS
            .iter()
            .flat_map(|o| std::iter::once(o.slug).chain(o.aliases.iter().copied()))
            .collect();
        let before = names.len();
        names.sort();
        names.dedup();
        assert_eq!(before, names.len());
    }
}
