//! `POST /bulk-payments/`: a batch from JSON, its payouts in `items`. Each
//! item's fields are read as the CSV's are (text, an amount as an integer),
//! then checked alike; a bad item is reported by its index.

use super::storing::{replay_committed, store_new};
use super::*;

pub fn create(caller: &Caller, req: &Request) -> Result<Response, ApiError> {
    let key = wire::idempotency_key(req)?;
    let m = wire::body_object(req, false)?;
    // The parsed body re-serialised: serde_json's maps are sorted, so neither
    // the order of fields nor spacing makes a retry look like another request.
    let request_hash = hash(&serde_json::to_vec(&m).expect("JSON values serialise"));
    if let Some(replay) = replay_committed(caller, &key, &request_hash)? {
        return Ok(replay);
    }
    wire::reject_unknown(&m, &["name", "description", "items"])?;
    let name = wire::batch_name(wire::opt_string(&m, "name", MAX_NAME)?)?;
    let description =
        wire::opt_string(&m, "description", MAX_DESCRIPTION)?.filter(|d| !d.is_empty());
    let list = items_array(m.get("items"))?;
    check_item_count(list.len())?;

    let mut problems = Vec::new();
    let raws: Vec<Option<RawItem>> = list
        .iter()
        .enumerate()
        .map(|(i, v)| raw_from_json(v, |p| problems.push((i, p))))
        .collect();
    let catalogue = router::catalogue(&caller.environment);
    let valid = check_lines(
        &raws,
        &catalogue,
        &caller.environment,
        |i| format!("items[{i}]"),
        &mut problems,
    );
    if !problems.is_empty() {
        return Err(items_errors(problems));
    }
    let new = NewBatch {
        name,
        description,
        source: "api",
        lines: valid.into_iter().map(|(i, v)| (i as u32 + 1, v)).collect(),
        request_hash,
    };
    store_new(caller, new, key)
}

/// `items`: an array of at least one payout.
fn items_array(items: Option<&Value>) -> Result<&Vec<Value>, ApiError> {
    match items {
        Some(Value::Array(a)) if !a.is_empty() => Ok(a),
        Some(Value::Array(_)) => Err(ApiError::invalid(
            "items_empty",
            "items",
            "items must hold at least one payout.",
        )),
        None | Some(Value::Null) => Err(ApiError::invalid(
            "parameter_missing",
            "items",
            "items is required: an array of payouts.",
        )),
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid_array",
            "items",
            "items must be an array of payouts.",
        )),
    }
}

/// The 400 of a rejected batch: every problem with its item's index and
/// field (`items[2].phone`).
fn items_errors(problems: Vec<(usize, Problem)>) -> ApiError {
    let rows = problems
        .iter()
        .map(|(i, _)| *i)
        .collect::<BTreeSet<_>>()
        .len();
    let errors = problems
        .into_iter()
        .map(|(i, p)| {
            let param = if p.field.is_empty() {
                format!("items[{i}]")
            } else {
                format!("items[{i}].{}", p.field)
            };
            json!({"index": i, "param": param, "code": p.code, "message": p.message})
        })
        .collect();
    ApiError::invalid_items("invalid_items", "items", "item", rows, errors)
}

/// The text fields of one JSON item, or None when it is not an object.
fn raw_from_json(v: &Value, mut report: impl FnMut(Problem)) -> Option<RawItem> {
    let Value::Object(o) = v else {
        report(problem(
            "",
            "parameter_invalid_object",
            "each item must be an object.",
        ));
        return None;
    };
    let mut raw = RawItem::default();
    for (k, val) in o {
        let text = match (k.as_str(), val) {
            (_, Value::Null) => continue,
            // An integer as JSON Schema sees it (5000 and 5000.0, as the create API
            // takes them), 5000.0 written 5000. What the amount check refuses (1.5,
            // -3.0, a saturated 1e300) keeps its spelling, so the refusal echoes it.
            ("amount", Value::Number(n)) => match mmc_domain::json::integer(n) {
                Some(i) if n.is_f64() && i > 0 && i < i64::MAX => i.to_string(),
                _ => n.to_string(),
            },
            ("amount", _) => {
                report(problem(
                    "amount",
                    "parameter_invalid_integer",
                    "amount must be an integer (major units).",
                ));
                continue;
            }
            (_, Value::String(s)) => s.clone(),
            (field, _) => {
                report(problem(
                    field,
                    "parameter_invalid_string",
                    format!("{field} must be a string."),
                ));
                continue;
            }
        };
        if !raw.set(k, text) {
            report(problem(
                k,
                "parameter_unknown",
                format!("Unknown parameter '{k}'."),
            ));
        }
    }
    Some(raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn amount_of(json: &str) -> Option<String> {
        let v: Value = serde_json::from_str(json).unwrap();
        raw_from_json(&v, |_| panic!("no problem expected")).and_then(|r| r.amount)
    }

    #[test]
    fn a_json_amount_is_an_integer_as_json_schema_sees_it() {
        assert_eq!(amount_of(r#"{"amount": 5000}"#).as_deref(), Some("5000"));
        assert_eq!(amount_of(r#"{"amount": 5000.0}"#).as_deref(), Some("5000"));
        // Not whole numbers: kept as written, for the amount check to refuse by name.
        assert_eq!(amount_of(r#"{"amount": 1.5}"#).as_deref(), Some("1.5"));
        assert_eq!(amount_of(r#"{"amount": -3}"#).as_deref(), Some("-3"));
        assert_eq!(amount_of(r#"{"amount": -3.0}"#).as_deref(), Some("-3.0"));
    }
}
