//! Legacy wire formats: flat requests in minor units, the Collection shape
//! (from `mmc_domain::legacy`, shared with collect's legacy events), the
//! legacy catalogue.

use serde_json::{Map, Value, json};

use crate::errors::LegacyError;
use crate::mmc::adapter::router;
use crate::mmc::api::http_types::Request;
use crate::mmc::api::payment_types::Payment;
use crate::mmc::platform::signing;

pub fn header<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    mmc_domain::http::header(&req.headers, name)
}

pub fn query_param<'a>(req: &'a Request, name: &str) -> Option<&'a str> {
    mmc_domain::http::query_param(&req.query, name)
}

/// Legacy keys are free-form strings; the shared rules take a UUID: derive
/// one from the key's SHA-256, so the same key always maps to the same UUID.
pub fn key_as_uuid(key: &str) -> String {
    let h = signing::sha256(format!("legacy-idempotency:{key}").as_bytes());
    let hex = hex::encode(&h[..16]);
    format!(
        "{}-{}-4{}-8{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[13..16],
        &hex[17..20],
        &hex[20..32]
    )
}

fn object(body: &[u8]) -> Result<Map<String, Value>, LegacyError> {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        _ => Err(LegacyError::invalid("The body must be a JSON object.")),
    }
}

fn string(
    m: &Map<String, Value>,
    field: &str,
    required: bool,
) -> Result<Option<String>, LegacyError> {
    match m.get(field) {
        None | Some(Value::Null) if required => {
            Err(LegacyError::invalid(format!("{field} is required.")))
        }
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if required && s.trim().is_empty() => {
            Err(LegacyError::invalid(format!("{field} is required.")))
        }
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(LegacyError::invalid(format!("{field} must be a string."))),
    }
}

/// A legacy initiation. Unknown fields are ignored (the legacy contract).
pub struct Initiate {
    pub amount_minor: u64,
    pub phone: String,
    pub country: String,
    pub operator: String,
    pub reference: String,
    pub currency: String,
    pub description: Option<String>,
    pub first_name: Option<String>,
    pub last_name: Option<String>,
}

impl Initiate {
    pub fn parse(body: &[u8]) -> Result<Initiate, LegacyError> {
        let m = object(body)?;
        let amount_minor = match m.get("amount") {
            None | Some(Value::Null) => return Err(LegacyError::invalid("amount is required.")),
            // JSON Schema's integer: 150000 and 150000.0 alike.
            Some(Value::Number(n)) => n
                .as_u64()
                .or_else(|| {
                    n.as_f64()
                        .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1e18)
                        .map(|f| f as u64)
                })
                .ok_or_else(|| {
                    LegacyError::invalid("amount must be a positive integer in minor units.")
                })?,
            Some(_) => {
                return Err(LegacyError::invalid(
                    "amount must be an integer in minor units.",
                ));
            }
        };
        let phone = string(&m, "phone", true)?.unwrap_or_default();
        let country = string(&m, "country", true)?.unwrap_or_default();
        let operator = string(&m, "operator", true)?.unwrap_or_default();
        let reference = string(&m, "reference", true)?.unwrap_or_default();
        let currency = string(&m, "currency", false)?.unwrap_or_else(|| "XOF".into());
        let description = string(&m, "description", false)?;
        if description
            .as_ref()
            .is_some_and(|d| d.chars().count() > 255)
        {
            return Err(LegacyError::invalid(
                "description must be at most 255 characters.",
            ));
        }
        if amount_minor < 10_000 {
            return Err(LegacyError::new(
                400,
                "amount_too_low",
                "amount must be at least 10000 minor units (100 XOF).",
            ));
        }
        if amount_minor % 100 != 0 {
            return Err(LegacyError::invalid(
                "amount must be a multiple of 100 minor units: XOF has no subunit.",
            ));
        }
        Ok(Initiate {
            amount_minor,
            phone,
            country,
            operator,
            reference,
            currency,
            description,
            first_name: string(&m, "customer_first_name", false)?,
            last_name: string(&m, "customer_last_name", false)?,
        })
    }
}

/// `{reference, otp}`; the OTP is 4 to 8 digits.
pub fn parse_confirm(body: &[u8]) -> Result<(String, String), LegacyError> {
    let m = object(body)?;
    let reference = string(&m, "reference", true)?.unwrap_or_default();
    let otp = string(&m, "otp", true)?.unwrap_or_default();
    if !(4..=8).contains(&otp.len()) || !otp.bytes().all(|b| b.is_ascii_digit()) {
        return Err(LegacyError::new(
            400,
            "invalid_otp",
            "otp must be 4 to 8 digits.",
        ));
    }
    Ok((reference, otp))
}

pub fn collection(p: &Payment, replay: bool) -> Value {
    mmc_domain::legacy::collection_json(
        &mmc_domain::legacy::Collection {
            id: &p.id,
            reference: &p.reference,
            status: &p.status,
            amount: p.amount,
            currency: &p.currency,
            country: &p.country,
            operator: p.operator.as_deref(),
            phone: p.phone.as_deref(),
            psp_reference: p.psp_reference.as_deref(),
            failure_message: p.failure_message.as_deref(),
        },
        replay,
    )
}

/// `{"countries":[{"country","currency","operators":[{"slug","name","alias","requires_otp"}]}]}`:
/// the same operators as the current catalogue, from the adapters.
pub fn catalogue(environment: &str) -> Value {
    let ops = router::catalogue(environment);
    let countries: Vec<Value> = ["BJ", "TG", "CI"]
        .iter()
        .map(|c| {
            let operators: Vec<Value> = ops
                .iter()
                .filter(|o| o.country == *c)
                .map(|o| json!({"slug": o.slug, "name": o.name, "alias": o.aliases, "requires_otp": o.requires_otp}))
                .collect();
            json!({"country": c, "currency": "XOF", "operators": operators})
        })
        .collect();
    json!({"countries": countries})
}
