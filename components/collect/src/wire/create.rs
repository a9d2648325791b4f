//! The create request: every constraint of the spec's table, checked field
//! by field in the order its `param` errors are reported.

use mmc_domain::operators::{self, Country};
use mmc_domain::{Mode, phone};
use serde_json::{Map, Value};

use crate::ApiError;
use crate::store::Customer;

use super::fields::{check_url, metadata, opt_integer, opt_string, required_string};
use super::http::reject_unknown;

/// The longest a hosted payment waits to be paid: 30 days.
pub const MAX_HOSTED_EXPIRY_SECONDS: u64 = 30 * 24 * 3600;

/// A validated create request.
#[derive(Debug, Clone)]
pub struct CreatePayment {
    pub reference: String,
    pub amount: u64,
    pub currency: String,
    pub country: Country,
    pub mode: Mode,
    pub customer: Option<Customer>,
    /// Canonical slug (aliases resolved).
    pub operator: Option<&'static operators::Operator>,
    pub description: Option<String>,
    pub callback_url: Option<String>,
    pub expires_in_seconds: u64,
    pub external_merchant_id: Option<String>,
    pub metadata: Option<Value>,
}

/// Largest amount any operator takes (per-operator limits are checked against the catalogue).
const MAX_AMOUNT: i64 = 2_000_000;

const CREATE_FIELDS: &[&str] = &[
    "reference",
    "amount",
    "currency",
    "country",
    "mode",
    "customer",
    "operator",
    "description",
    "callback_url",
    "expires_in_seconds",
    "external_merchant_id",
    "metadata",
];

/// A create request's body, each field read and checked in the order its
/// errors are reported: the first bad field is the one named.
pub fn parse_create_object(
    m: &Map<String, Value>,
    environment: &str,
) -> Result<CreatePayment, ApiError> {
    reject_unknown(m, CREATE_FIELDS)?;
    let reference = parse_reference(m)?;
    let amount = parse_amount(m)?;
    let (currency, country) = parse_currency_and_country(m)?;
    let mode = parse_mode(m)?;
    let customer = parse_customer(m, country)?;
    let operator = parse_operator(m, mode, country)?;
    if mode == Mode::Direct && customer.as_ref().and_then(|c| c.phone.as_ref()).is_none() {
        return Err(ApiError::invalid(
            "parameter_missing",
            "customer.phone",
            "customer.phone is required when mode is direct.",
        ));
    }
    let description = opt_string(m, "description", "description", 255)?;
    let callback_url = opt_string(m, "callback_url", "callback_url", 2048)?;
    if let Some(url) = &callback_url {
        check_url(url, environment)
            .map_err(|msg| ApiError::invalid("url_invalid", "callback_url", msg))?;
    }
    let expires_in_seconds = parse_expiry(m, mode)?;
    let external_merchant_id = opt_string(m, "external_merchant_id", "external_merchant_id", 100)?;
    let metadata = metadata(m.get("metadata"))?;
    Ok(CreatePayment {
        reference,
        amount,
        currency,
        country,
        mode,
        customer,
        operator,
        description,
        callback_url,
        expires_in_seconds,
        external_merchant_id,
        metadata,
    })
}

/// `reference`: required, at most 100 characters, usable in a path.
fn parse_reference(m: &Map<String, Value>) -> Result<String, ApiError> {
    let reference = required_string(m, "reference", 100)?;
    if reference.contains('/') || reference.chars().any(char::is_control) {
        return Err(ApiError::invalid(
            "parameter_invalid",
            "reference",
            "reference must not contain '/' or control characters.",
        ));
    }
    Ok(reference)
}

/// `amount`: required, in major units, from 100 to [`MAX_AMOUNT`].
fn parse_amount(m: &Map<String, Value>) -> Result<u64, ApiError> {
    match opt_integer(m, "amount")? {
        None => Err(ApiError::invalid(
            "parameter_missing",
            "amount",
            "amount is required.",
        )),
        Some(a) if a < 100 => Err(ApiError::invalid(
            "amount_too_small",
            "amount",
            "amount must be at least 100 (major units).",
        )),
        Some(a) if a > MAX_AMOUNT => Err(ApiError::invalid(
            "amount_out_of_range",
            "amount",
            format!("amount must be at most {MAX_AMOUNT}."),
        )),
        Some(a) => Ok(a as u64),
    }
}

/// `currency` and `country`: a served country, paid in its own currency.
fn parse_currency_and_country(m: &Map<String, Value>) -> Result<(String, Country), ApiError> {
    let currency = required_string(m, "currency", 3)?;
    if currency != "XOF" && currency != "XAF" {
        return Err(ApiError::invalid(
            "parameter_invalid",
            "currency",
            "currency must be XOF or XAF.",
        ));
    }
    let country_code = required_string(m, "country", 2)?;
    let country = Country::parse(&country_code).ok_or_else(|| {
        ApiError::invalid(
            "country_not_supported",
            "country",
            "country must be one of BJ, TG, CI.",
        )
    })?;
    if currency != country.currency() {
        return Err(ApiError::invalid(
            "currency_not_supported",
            "currency",
            format!(
                "{} payments are in {}, not {currency}.",
                country.code(),
                country.currency()
            ),
        ));
    }
    Ok((currency, country))
}

/// `mode`: `direct` (the default) or `hosted`.
fn parse_mode(m: &Map<String, Value>) -> Result<Mode, ApiError> {
    match opt_string(m, "mode", "mode", 10)?.as_deref() {
        None | Some("direct") => Ok(Mode::Direct),
        Some("hosted") => Ok(Mode::Hosted),
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid",
            "mode",
            "mode must be direct or hosted.",
        )),
    }
}

/// `customer`: an object of known fields; its phone a mobile number of the
/// payment's country, normalised to E.164.
fn parse_customer(m: &Map<String, Value>, country: Country) -> Result<Option<Customer>, ApiError> {
    let c = match m.get("customer") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(c)) => c,
        Some(_) => {
            return Err(ApiError::invalid(
                "parameter_invalid_object",
                "customer",
                "customer must be an object.",
            ));
        }
    };
    if let Some(unknown) = c
        .keys()
        .find(|k| !["phone", "first_name", "last_name"].contains(&k.as_str()))
    {
        let param = format!("customer.{unknown}");
        return Err(ApiError::invalid(
            "parameter_unknown",
            &param,
            format!("Unknown parameter '{param}'."),
        ));
    }
    let phone = match opt_string(c, "phone", "customer.phone", 32)? {
        Some(p) => Some(phone::normalize(country, &p).map_err(|e| {
            ApiError::invalid(
                "phone_invalid",
                "customer.phone",
                format!(
                    "customer.phone is not a valid {} mobile number: {e}.",
                    country.code()
                ),
            )
        })?),
        None => None,
    };
    Ok(Some(Customer {
        phone,
        first_name: opt_string(c, "first_name", "customer.first_name", 100)?,
        last_name: opt_string(c, "last_name", "customer.last_name", 100)?,
    }))
}

/// `operator`: required in direct mode; a known operator of the country.
fn parse_operator(
    m: &Map<String, Value>,
    mode: Mode,
    country: Country,
) -> Result<Option<&'static operators::Operator>, ApiError> {
    let Some(slug) = opt_string(m, "operator", "operator", 40)? else {
        if mode == Mode::Direct {
            return Err(ApiError::invalid(
                "parameter_missing",
                "operator",
                "operator is required when mode is direct.",
            ));
        }
        return Ok(None);
    };
    let op = operators::find(&slug).ok_or_else(|| {
        ApiError::invalid(
            "operator_not_supported",
            "operator",
            format!("Unknown operator '{slug}'. See GET /collect/payments/operators/."),
        )
    })?;
    if op.country != country {
        return Err(ApiError::invalid(
            "operator_country_mismatch",
            "operator",
            format!(
                "{} operates in {}, not {}.",
                op.slug,
                op.country.code(),
                country.code()
            ),
        ));
    }
    Ok(Some(op))
}

/// `expires_in_seconds`: 900 by default; up to an hour for a direct
/// payment, and longer for a hosted one (a payment link, sent days before
/// it is paid).
fn parse_expiry(m: &Map<String, Value>, mode: Mode) -> Result<u64, ApiError> {
    let max_expiry = if mode == Mode::Hosted {
        MAX_HOSTED_EXPIRY_SECONDS
    } else {
        3600
    };
    match opt_integer(m, "expires_in_seconds")? {
        None => Ok(900),
        Some(s) if (300..=max_expiry as i64).contains(&s) => Ok(s as u64),
        Some(_) => Err(ApiError::invalid(
            "parameter_out_of_range",
            "expires_in_seconds",
            format!(
                "expires_in_seconds must be between 300 and {max_expiry} for a {} payment.",
                if mode == Mode::Hosted {
                    "hosted"
                } else {
                    "direct"
                }
            ),
        )),
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;
    use serde_json::{Map, Value, json};

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|i| json!(i)),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(|f| json!(f)),
            ".{0,12}".prop_map(Value::String),
            prop_oneof![
                Just("BJ"),
                Just("TG"),
                Just("CI"),
                Just("XOF"),
                Just("mtn-bj"),
                Just("+2290166000001"),
                Just("hosted")
            ]
            .prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(3, 16, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map(".{0,8}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn create_body() -> impl Strategy<Value = Map<String, Value>> {
        let field = prop_oneof![
            Just("reference"),
            Just("amount"),
            Just("currency"),
            Just("country"),
            Just("mode"),
            Just("customer"),
            Just("operator"),
            Just("description"),
            Just("callback_url"),
            Just("expires_in_seconds"),
            Just("external_merchant_id"),
            Just("metadata"),
            Just("surprise")
        ];
        prop::collection::vec((field, json_value()), 0..12)
            .prop_map(|kvs| kvs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
    }

    proptest! {
        /// Request parsing never panics; what it accepts respects every documented limit,
        /// and what it refuses names a parameter.
        #[test]
        fn create_parsing_is_total_and_sound(body in create_body(), live in any::<bool>()) {
            match super::parse_create_object(&body, if live { "live" } else { "test" }) {
                Ok(p) => {
                    prop_assert!((100..=2_000_000).contains(&p.amount));
                    prop_assert!(!p.reference.is_empty() && p.reference.chars().count() <= 100);
                    let max = if p.mode == mmc_domain::Mode::Hosted { super::MAX_HOSTED_EXPIRY_SECONDS } else { 3600 };
                    prop_assert!((300..=max).contains(&p.expires_in_seconds));
                    prop_assert_eq!(p.currency.as_str(), p.country.currency());
                    if p.mode == mmc_domain::Mode::Direct {
                        prop_assert!(p.operator.is_some());
                        prop_assert!(p.customer.as_ref().and_then(|c| c.phone.as_ref()).is_some());
                    }
                }
                Err(e) => {
                    prop_assert_eq!(e.status, 400);
                    prop_assert!(e.param.is_some(), "{:?}", e);
                }
            }
        }
    }
}
