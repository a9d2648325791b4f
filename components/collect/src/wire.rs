//! Wire formats of the current generation: parsing and validating requests
//! (every constraint of the spec's table, naming the offending `param`), and
//! the JSON shapes of Payment, NextAction and the catalogue.

use mmc_domain::operators::{self, Country};
use mmc_domain::{Mode, Status, phone, time};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::mmc::adapter::types::OperatorInfo;
use crate::mmc::api::http_types::{Request, Response};
use crate::store::{Customer, Failure, Payment};
use crate::{API_VERSION, ApiError};

pub fn json_response(status: u16, body: &impl Serialize) -> Response {
    Response {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: serde_json::to_vec(body).expect("JSON values serialise"),
    }
}

pub fn header<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    mmc_domain::http::header(&req.headers, name)
}

pub fn query_param<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    mmc_domain::http::query_param(&req.query, name)
}

/// `Api-Version`: absent or `2026-06`.
pub fn check_api_version(req: &Request) -> Result<(), ApiError> {
    match header(req, "api-version") {
        None => Ok(()),
        Some(v) if v.trim() == API_VERSION => Ok(()),
        Some(v) => Err(ApiError::invalid(
            "api_version_unsupported",
            "Api-Version",
            format!("Api-Version '{v}' is not supported; the supported version is {API_VERSION}."),
        )),
    }
}

/// `sync` accepts true/false and 1/0.
pub fn parse_bool_param(req: &Request, name: &str) -> Result<bool, ApiError> {
    match query_param(req, name) {
        None => Ok(false),
        Some("true") | Some("1") => Ok(true),
        Some("false") | Some("0") => Ok(false),
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid_boolean",
            name,
            format!("{name} must be true, false, 1 or 0."),
        )),
    }
}

pub fn body_object(req: &Request) -> Result<Map<String, Value>, ApiError> {
    mmc_domain::http::json_object(&req.body).map_err(body_error)
}

/// The shared body error, in this generation's codes.
fn body_error(e: mmc_domain::http::BodyError) -> ApiError {
    use mmc_domain::http::BodyError;
    match e {
        BodyError::Missing => {
            ApiError::bad_request("body_missing", "A JSON object body is required.")
        }
        BodyError::NotObject => {
            ApiError::bad_request("invalid_json", "The body must be a JSON object.")
        }
        BodyError::Invalid(e) => {
            ApiError::bad_request("invalid_json", format!("The body is not valid JSON: {e}."))
        }
    }
}

/// For endpoints whose body is optional: nothing, or JSON `null`, is an empty object.
pub fn optional_body_object(req: &Request) -> Result<Map<String, Value>, ApiError> {
    let text = String::from_utf8_lossy(&req.body);
    if text.trim().is_empty() || text.trim() == "null" {
        return Ok(Map::new());
    }
    body_object(req)
}

pub fn reject_unknown(m: &Map<String, Value>, known: &[&str]) -> Result<(), ApiError> {
    match m.keys().find(|k| !known.contains(&k.as_str())) {
        Some(unknown) => Err(ApiError::invalid(
            "parameter_unknown",
            unknown,
            format!("Unknown parameter '{unknown}'."),
        )),
        None => Ok(()),
    }
}

/// The legacy Collection view of a payment (shape shared with the legacy facade).
pub fn legacy_collection(p: &Payment, replay: bool) -> Value {
    mmc_domain::legacy::collection_json(
        &mmc_domain::legacy::Collection {
            id: &p.id,
            reference: &p.reference,
            status: p.status.as_str(),
            amount: p.amount,
            currency: &p.currency,
            country: &p.country,
            operator: p.operator.as_deref(),
            phone: p.customer.as_ref().and_then(|c| c.phone.as_deref()),
            psp_reference: p.psp_reference.as_deref(),
            failure_message: p.failure.as_ref().map(|f| f.message.as_str()),
        },
        replay,
    )
}

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

fn opt_string(
    m: &Map<String, Value>,
    field: &str,
    param: &str,
    max: usize,
) -> Result<Option<String>, ApiError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() > max => Err(ApiError::invalid(
            "parameter_too_long",
            param,
            format!("{param} must be at most {max} characters."),
        )),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid_string",
            param,
            format!("{param} must be a string."),
        )),
    }
}

fn required_string(m: &Map<String, Value>, field: &str, max: usize) -> Result<String, ApiError> {
    match opt_string(m, field, field, max)? {
        Some(s) if !s.trim().is_empty() => Ok(s),
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid_empty",
            field,
            format!("{field} must not be empty."),
        )),
        None => Err(ApiError::invalid(
            "parameter_missing",
            field,
            format!("{field} is required."),
        )),
    }
}

fn opt_integer(m: &Map<String, Value>, field: &str) -> Result<Option<i64>, ApiError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match mmc_domain::json::integer(n) {
            Some(i) => Ok(Some(i)),
            None => Err(ApiError::invalid(
                "parameter_invalid_integer",
                field,
                format!("{field} must be an integer."),
            )),
        },
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid_integer",
            field,
            format!("{field} must be an integer."),
        )),
    }
}

/// http(s)://host[...]: https always; plain http only in the test environment.
/// The documented shape: `https://host[:port][/path][?query]` (plain http
/// only in the test environment); the path and query take what RFC 3986
/// allows there. No user info (credentials in a URL we store and log), no
/// fragment (never sent), no IP-literal host.
fn check_url(url: &str, environment: &str) -> Result<(), &'static str> {
    // RFC 3986 `pchar` less the letters and digits: unreserved, `%` of an
    // escape, sub-delims, `:` and `@`.
    const PCHAR: &[u8] = b"-._~%!$&'()*+,;=:@";
    const BAD: &str =
        "callback_url must be an absolute https URL (host, optional port, path and query).";
    let rest = if let Some(r) = url.strip_prefix("https://") {
        r
    } else if let Some(r) = url.strip_prefix("http://") {
        if environment != "test" {
            return Err("callback_url must use https.");
        }
        r
    } else {
        return Err(BAD);
    };
    let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = match before_query.find('/') {
        Some(i) => before_query.split_at(i),
        None => (before_query, ""),
    };
    let (host, port) = authority.split_once(':').unwrap_or((authority, ""));
    let ok_host = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
    let ok_port = !authority.contains(':')
        || ((1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit()));
    let ok_path = path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || PCHAR.contains(&b) || b == b'/');
    let ok_query = query
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || PCHAR.contains(&b) || b"/?".contains(&b));
    if ok_host && ok_port && ok_path && ok_query && url.len() <= 2048 {
        Ok(())
    } else {
        Err(BAD)
    }
}

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

#[derive(Serialize)]
struct NextAction<'a> {
    checkout_url: Option<&'a str>,
    message: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
}

fn next_action(p: &Payment) -> NextAction<'_> {
    let (kind, message) = match p.status {
        Status::Processing => (
            "await_customer_validation",
            "Ask the customer to approve the payment on their phone.",
        ),
        Status::AwaitingOtp => (
            "confirm_otp",
            "Send the one-time code the customer received to POST /collect/payments/{id}/confirm.",
        ),
        Status::AwaitingPayment => (
            "redirect_to_checkout",
            "Send the customer to checkout_url to pay.",
        ),
        Status::Pending => ("none", "The payment is being submitted to the operator."),
        _ => ("none", "No action is needed."),
    };
    let checkout_url = if p.status == Status::AwaitingPayment {
        p.checkout_url.as_deref()
    } else {
        None
    };
    NextAction {
        checkout_url,
        message,
        kind,
    }
}

/// `metadata` of a payment or a refund: an object of at most 50 keys of up
/// to 40 characters, each value flat (a string of at most 500 characters,
/// an integer or a boolean); `None` when absent or null.
pub fn metadata(value: Option<&Value>) -> Result<Option<Value>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => {
            if o.len() > 50 || o.keys().any(|k| k.chars().count() > 40) {
                return Err(ApiError::invalid(
                    "metadata_too_large",
                    "metadata",
                    "metadata allows at most 50 keys of up to 40 characters.",
                ));
            }
            // Flat values only: strings (up to 500 characters), integers, booleans.
            let flat = |v: &Value| match v {
                Value::String(s) => s.chars().count() <= 500,
                Value::Number(n) => mmc_domain::json::integer(n).is_some(),
                Value::Bool(_) => true,
                _ => false,
            };
            if let Some(k) = o.iter().find(|(_, v)| !flat(v)).map(|(k, _)| k) {
                return Err(ApiError::invalid(
                    "metadata_invalid",
                    "metadata",
                    format!(
                        "metadata.{k} must be a string of at most 500 characters, an integer or a boolean."
                    ),
                ));
            }
            Ok(Some(Value::Object(o.clone())))
        }
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid_object",
            "metadata",
            "metadata must be an object.",
        )),
    }
}

/// The Payment object of the spec's table, serialised straight from the
/// record (a `json!` map cost a GET a tenth of its time). Fields in
/// alphabetical order, as the map had them.
#[derive(Serialize)]
pub struct PaymentView<'a> {
    amount: u64,
    amount_minor: u64,
    api_version: &'static str,
    checkout_url: Option<&'a str>,
    completed_at: Option<String>,
    country: &'a str,
    created_at: String,
    currency: &'a str,
    customer: Option<&'a Customer>,
    description: Option<&'a str>,
    environment: &'a str,
    expires_at: String,
    external_merchant_id: Option<&'a str>,
    failure_code: Option<&'a str>,
    failure_message: Option<&'a str>,
    id: &'a str,
    idempotent_replay: bool,
    metadata: Option<&'a Value>,
    mode: &'static str,
    next_action: NextAction<'a>,
    object: &'static str,
    operator: Option<&'a str>,
    psp_reference: Option<&'a str>,
    reference: &'a str,
    /// Only when flagged: an unflagged payment's JSON is as it always was.
    #[serde(skip_serializing_if = "Option::is_none")]
    review: Option<&'a Failure>,
    status: &'static str,
}

impl<'a> PaymentView<'a> {
    pub fn new(p: &'a Payment, replay: bool) -> PaymentView<'a> {
        PaymentView {
            amount: p.amount,
            amount_minor: p.amount * 100,
            api_version: API_VERSION,
            checkout_url: p.checkout_url.as_deref(),
            completed_at: p.completed_at_ms.map(time::rfc3339),
            country: &p.country,
            created_at: time::rfc3339(p.created_at_ms),
            currency: &p.currency,
            customer: p.customer.as_ref(),
            description: p.description.as_deref(),
            environment: &p.environment,
            expires_at: time::rfc3339(p.expires_at_ms),
            external_merchant_id: p.external_merchant_id.as_deref(),
            failure_code: p.failure.as_ref().map(|f| f.code.as_str()),
            failure_message: p.failure.as_ref().map(|f| f.message.as_str()),
            id: &p.id,
            idempotent_replay: replay,
            metadata: p.metadata.as_ref(),
            mode: p.mode.as_str(),
            next_action: next_action(p),
            object: "collect.payment",
            operator: p.operator.as_deref(),
            psp_reference: p.psp_reference.as_deref(),
            reference: &p.reference,
            review: p.review.as_ref(),
            status: p.status.as_str(),
        }
    }
}

/// `{"object":"list","data":[{"country","currency","operators":[…]}]}`.
pub fn catalogue_json(ops: &[OperatorInfo], country: Option<Country>) -> Value {
    let data: Vec<Value> = Country::ALL
        .into_iter()
        .filter(|c| country.is_none_or(|wanted| wanted == *c))
        .map(|c| {
            let operators: Vec<Value> = ops
                .iter()
                .filter(|o| o.country == c.code())
                .map(|o| {
                    json!({
                        "slug": o.slug, "name": o.name, "aliases": o.aliases, "requires_otp": o.requires_otp,
                        "modes": o.modes, "min_amount": o.min_amount, "max_amount": o.max_amount, "status": o.status,
                    })
                })
                .collect();
            json!({"country": c.code(), "currency": c.currency(), "operators": operators})
        })
        .collect();
    json!({"object": "list", "data": data})
}

#[cfg(test)]
mod tests {
    use super::check_url;

    #[test]
    fn a_callback_url_takes_what_rfc_3986_allows_in_its_path_and_query() {
        for ok in [
            "https://shop.example/hooks",
            "https://shop.example:8443/a/b;v=1/c@d/(x)!*,$'?next=https://x/y?z&a=1+2",
            "https://shop.example?t=a:b@c",
        ] {
            assert_eq!(check_url(ok, "live"), Ok(()), "{ok}");
        }
        for bad in [
            "https://user:pw@shop.example/hooks",
            "https://shop.example/hooks#frag",
            "https://[::1]/hooks",
            "https://shop.example/a b",
            "https://shop.example/\"x\"",
            "https://shop.example/<x>",
            "http://shop.example/hooks",
        ] {
            assert!(check_url(bad, "live").is_err(), "{bad}");
        }
        assert_eq!(check_url("http://localhost:9/h", "test"), Ok(()));
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
