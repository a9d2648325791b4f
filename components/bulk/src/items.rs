//! Validation of payout lines, shared by the JSON and CSV inputs: every
//! problem of a line is collected, so the client sees them all at once.
//! Country and operator come from the phone number; an
//! `operator` field is accepted where the prefix cannot tell (Wave, ported
//! numbers).

use std::collections::HashMap;

use mmc_domain::operators::Country;
use mmc_domain::{operators, phone};

use crate::mmc::adapter::types::OperatorInfo;

pub const REQUIRED: [&str; 5] = [
    "beneficiary_name",
    "phone",
    "amount",
    "currency",
    "reference",
];
pub const OPTIONAL: [&str; 1] = ["operator"];

const MAX_NAME: usize = 100;
const MAX_REFERENCE: usize = 100;

/// A line as given: text per field (JSON integers arrive as their digits).
#[derive(Debug, Default, Clone)]
pub struct RawItem {
    pub beneficiary_name: Option<String>,
    pub phone: Option<String>,
    pub amount: Option<String>,
    pub currency: Option<String>,
    pub reference: Option<String>,
    pub operator: Option<String>,
}

impl RawItem {
    /// Sets a known field; false for an unknown name.
    pub fn set(&mut self, field: &str, value: String) -> bool {
        let slot = match field {
            "beneficiary_name" => &mut self.beneficiary_name,
            "phone" => &mut self.phone,
            "amount" => &mut self.amount,
            "currency" => &mut self.currency,
            "reference" => &mut self.reference,
            "operator" => &mut self.operator,
            _ => return false,
        };
        *slot = Some(value);
        true
    }
}

#[derive(Debug, Clone)]
pub struct ValidItem {
    pub beneficiary_name: String,
    /// E.164.
    pub phone: String,
    pub country: &'static str,
    /// Canonical slug.
    pub operator: String,
    pub amount: u64,
    pub currency: String,
    pub reference: String,
}

/// One problem of one line.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    /// The field at fault; empty for the line as a whole.
    pub field: String,
    pub code: &'static str,
    pub message: String,
}

pub fn problem(field: &str, code: &'static str, message: impl Into<String>) -> Problem {
    Problem {
        field: field.into(),
        code,
        message: message.into(),
    }
}

/// A required text field, trimmed, non-empty, at most `max` characters.
fn text(
    value: &Option<String>,
    field: &'static str,
    max: usize,
    problems: &mut Vec<Problem>,
) -> Option<String> {
    match value.as_deref().map(str::trim) {
        None | Some("") => {
            problems.push(problem(
                field,
                "parameter_missing",
                format!("{field} is required."),
            ));
            None
        }
        Some(s) if s.chars().count() > max => {
            problems.push(problem(
                field,
                "parameter_too_long",
                format!("{field} must be at most {max} characters."),
            ));
            None
        }
        Some(s) => Some(s.to_string()),
    }
}

/// Checks one line against the numbering plans and the operators of the
/// environment (`catalogue`, as the adapters describe them).
pub fn check(
    raw: &RawItem,
    catalogue: &[OperatorInfo],
    environment: &str,
) -> Result<ValidItem, Vec<Problem>> {
    let mut problems = Vec::new();
    let beneficiary_name = text(
        &raw.beneficiary_name,
        "beneficiary_name",
        MAX_NAME,
        &mut problems,
    );
    let reference = check_reference(raw, &mut problems);
    let currency = text(&raw.currency, "currency", 3, &mut problems).map(|c| c.to_uppercase());
    // Phone → country → operator.
    let located = locate(raw, &mut problems);
    let operator = located.as_ref().and_then(|(country, e164)| {
        let op = choose_operator(raw, *country, e164, &mut problems)?;
        match catalogue.iter().find(|o| o.slug == op.slug) {
            Some(info) => Some(info),
            None => {
                problems.push(problem(
                    "operator",
                    "operator_unavailable",
                    format!(
                        "{} is not available in the {environment} environment.",
                        op.slug
                    ),
                ));
                None
            }
        }
    });
    let amount = check_amount(raw, operator, &mut problems);
    if let (Some(c), Some((country, _))) = (&currency, &located)
        && c != country.currency()
    {
        problems.push(problem(
            "currency",
            "currency_not_supported",
            format!(
                "Payouts in {} are in {}, not {c}.",
                country.code(),
                country.currency()
            ),
        ));
    }

    if !problems.is_empty() {
        return Err(problems);
    }
    // Every field is present when nothing was reported.
    let (country, phone) = located.expect("checked");
    Ok(ValidItem {
        beneficiary_name: beneficiary_name.expect("checked"),
        phone,
        country: country.code(),
        operator: operator.expect("checked").slug.clone(),
        amount: amount.expect("checked"),
        currency: currency.expect("checked"),
        reference: reference.expect("checked"),
    })
}

/// The reference: present, at most [`MAX_REFERENCE`], usable in a path.
fn check_reference(raw: &RawItem, problems: &mut Vec<Problem>) -> Option<String> {
    text(&raw.reference, "reference", MAX_REFERENCE, problems).filter(|r| {
        let ok = !r.contains('/') && !r.chars().any(char::is_control);
        if !ok {
            problems.push(problem(
                "reference",
                "parameter_invalid",
                "reference must not contain '/' or control characters.",
            ));
        }
        ok
    })
}

/// The phone's country (from its country code) and its E.164 form.
fn locate(raw: &RawItem, problems: &mut Vec<Problem>) -> Option<(Country, String)> {
    let n = text(&raw.phone, "phone", 32, problems)?;
    let Some(country) = phone::country_of(&n) else {
        problems.push(problem(
            "phone",
            "phone_invalid",
            format!(
                "phone '{n}' must be written with its country code (+229 Benin, +228 Togo, +225 Côte d'Ivoire): the country is taken from it."
            ),
        ));
        return None;
    };
    match phone::normalize(country, &n) {
        Ok(e164) => Some((country, e164)),
        Err(e) => {
            problems.push(problem(
                "phone",
                "phone_invalid",
                format!(
                    "phone '{n}' is not a valid {} mobile number: {e}.",
                    country.code()
                ),
            ));
            None
        }
    }
}

/// The operator named in the row (of the phone's country), or else the one
/// the number's prefix tells.
fn choose_operator(
    raw: &RawItem,
    country: Country,
    e164: &str,
    problems: &mut Vec<Problem>,
) -> Option<&'static operators::Operator> {
    let chosen = raw
        .operator
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty());
    let Some(slug) = chosen else {
        let inferred = phone::infer_operator(e164);
        if inferred.is_none() {
            problems.push(problem(
                "phone",
                "operator_not_inferred",
                format!(
                    "The operator of {e164} cannot be told from its prefix; give it in the operator field."
                ),
            ));
        }
        return inferred;
    };
    match operators::find(slug) {
        None => {
            problems.push(problem(
                "operator",
                "operator_not_supported",
                format!("Unknown operator '{slug}'."),
            ));
            None
        }
        Some(op) if op.country != country => {
            problems.push(problem(
                "operator",
                "operator_country_mismatch",
                format!(
                    "{} operates in {}, but phone {e164} is in {}.",
                    op.slug,
                    op.country.code(),
                    country.code()
                ),
            ));
            None
        }
        Some(op) => Some(op),
    }
}

/// The amount: a positive whole number of major units, within the operator's limits.
fn check_amount(
    raw: &RawItem,
    operator: Option<&OperatorInfo>,
    problems: &mut Vec<Problem>,
) -> Option<u64> {
    let amount = match raw.amount.as_deref().map(str::trim) {
        None | Some("") => {
            problems.push(problem(
                "amount",
                "parameter_missing",
                "amount is required.",
            ));
            None
        }
        Some(a) => match a.parse::<u64>() {
            Ok(n) if n > 0 && a.bytes().all(|b| b.is_ascii_digit()) => Some(n),
            _ => {
                problems.push(problem(
                    "amount",
                    "amount_invalid",
                    format!(
                        "amount '{a}' must be a positive whole number of major units (XOF has no cents), e.g. 5000."
                    ),
                ));
                None
            }
        },
    };
    if let (Some(info), Some(a)) = (operator, amount)
        && !(info.min_amount..=info.max_amount).contains(&a)
    {
        problems.push(problem(
            "amount",
            "amount_out_of_range",
            format!(
                "{} pays out from {} to {} {}; {a} is outside.",
                info.slug, info.min_amount, info.max_amount, info.currency
            ),
        ));
    }
    amount
}

/// References used more than once: (index of the repeat, index of the first use).
pub fn duplicates<'a>(references: impl Iterator<Item = (usize, &'a str)>) -> Vec<(usize, usize)> {
    let mut first: HashMap<&str, usize> = HashMap::new();
    let mut repeats = Vec::new();
    for (i, r) in references {
        match first.get(r) {
            Some(&f) => repeats.push((i, f)),
            None => {
                first.insert(r, i);
            }
        }
    }
    repeats
}
