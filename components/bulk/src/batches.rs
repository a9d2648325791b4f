//! The bulk-payments endpoints: create (JSON), import (CSV), read, list,
//! items, and the validation workflow. A batch is stored whole or not at
//! all: any bad line is a 400 listing every problem of every line.

use std::collections::BTreeSet;

use serde_json::{Value, json};

use crate::items::{self, Problem, RawItem, ValidItem, problem};
use crate::mmc::adapter::router;
use crate::mmc::adapter::types::OperatorInfo;
use crate::mmc::api::http_types::{Caller, Request, Response};
use crate::mmc::platform::{clock, signing};
use crate::store::{self, Batch, BatchStatus, Counts, IdemRecord, Item, ItemStatus, Tx};
use crate::wire::{self, json_response};
use crate::{ApiError, csv, jobs, multipart, settings};

/// Idempotency keys are honoured for 24 hours, as for payments.
const IDEMPOTENCY_TTL_MS: u64 = 24 * 3600 * 1000;
const MAX_NAME: usize = 100;
const MAX_DESCRIPTION: usize = 255;
const ROOT: &str = "/api/v1/bulk-payments/";

/// A batch whose every line is valid, ready to store.
struct NewBatch {
    name: String,
    description: Option<String>,
    /// `api` or `csv`.
    source: &'static str,
    /// (line, item): CSV line, or 1-based position in `items`.
    lines: Vec<(u32, ValidItem)>,
    /// Hash of the request: tells an idempotent replay from a reused key.
    request_hash: String,
}

// ---- POST /bulk-payments/ ----

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
    let list = match m.get("items") {
        Some(Value::Array(a)) if !a.is_empty() => a,
        Some(Value::Array(_)) => {
            return Err(ApiError::invalid(
                "items_empty",
                "items",
                "items must hold at least one payout.",
            ));
        }
        None | Some(Value::Null) => {
            return Err(ApiError::invalid(
                "parameter_missing",
                "items",
                "items is required: an array of payouts.",
            ));
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "parameter_invalid_array",
                "items",
                "items must be an array of payouts.",
            ));
        }
    };
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
        return Err(ApiError::invalid_items(
            "invalid_items",
            "items",
            "item",
            rows,
            errors,
        ));
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

/// Checks every line (None: unreadable, already reported) and the
/// uniqueness of references; adds the problems, keyed by line index, to
/// `problems`. A field already reported is not reported again.
fn check_lines(
    raws: &[Option<RawItem>],
    catalogue: &[OperatorInfo],
    environment: &str,
    name_of: impl Fn(usize) -> String,
    problems: &mut Vec<(usize, Problem)>,
) -> Vec<(usize, ValidItem)> {
    let mut valid = Vec::new();
    for (i, raw) in raws.iter().enumerate() {
        let Some(raw) = raw else { continue };
        let reported: Vec<String> = problems
            .iter()
            .filter(|(j, _)| *j == i)
            .map(|(_, p)| p.field.clone())
            .collect();
        match items::check(raw, catalogue, environment) {
            Ok(item) if reported.is_empty() => valid.push((i, item)),
            Ok(_) => {}
            Err(found) => problems.extend(
                found
                    .into_iter()
                    .filter(|p| !reported.contains(&p.field))
                    .map(|p| (i, p)),
            ),
        }
    }
    let references = raws.iter().enumerate().filter_map(|(i, r)| {
        r.as_ref()?
            .reference
            .as_deref()
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| (i, s))
    });
    for (repeat, first) in items::duplicates(references) {
        let reference = raws[repeat]
            .as_ref()
            .and_then(|r| r.reference.as_deref())
            .unwrap_or_default()
            .trim();
        problems.push((
            repeat,
            problem(
                "reference",
                "reference_duplicate",
                format!(
                    "reference '{reference}' is already used by {} of this batch; references must be unique within a batch.",
                    name_of(first)
                ),
            ),
        ));
    }
    // Stable: a line's problems stay in field order.
    problems.sort_by_key(|(i, _)| *i);
    valid
}

// ---- POST /bulk-payments/import_csv/ ----

const CSV_HELP: &str = "Send the CSV as multipart/form-data (fields file, name, description) or as a text/csv body with ?name=...&description=...";

pub fn import_csv(caller: &Caller, req: &Request) -> Result<Response, ApiError> {
    let key = wire::idempotency_key(req)?;
    let Upload {
        file,
        name,
        description,
    } = match wire::media_type(req).as_str() {
        // The form's fields, else the query's (as for a text/csv body).
        "multipart/form-data" => {
            let form = form_fields(req)?;
            Upload {
                name: form.name.or(wire::query_param(req, "name")?),
                description: form.description.or(wire::query_param(req, "description")?),
                ..form
            }
        }
        "text/csv" | "application/csv" => Upload {
            file: req.body.as_slice(),
            name: wire::query_param(req, "name")?,
            description: wire::query_param(req, "description")?,
        },
        "" => {
            return Err(ApiError::unsupported_media_type(format!(
                "Content-Type is missing. {CSV_HELP}"
            )));
        }
        other => {
            return Err(ApiError::unsupported_media_type(format!(
                "Content-Type {other} is not accepted here. {CSV_HELP}"
            )));
        }
    };
    let name = wire::batch_name(
        name.map(|n| wire::check_text("name", &n, MAX_NAME))
            .transpose()?,
    )?;
    let description = description
        .map(|d| wire::check_text("description", &d, MAX_DESCRIPTION))
        .transpose()?
        .filter(|d| !d.is_empty());
    let request_hash = csv_request_hash(&name, description.as_deref(), file);
    if let Some(replay) = replay_committed(caller, &key, &request_hash)? {
        return Ok(replay);
    }
    let max = settings::max_csv_bytes();
    if file.len() > max {
        return Err(ApiError::too_large(
            "csv_too_large",
            "file",
            format!(
                "The CSV file is {} bytes; the limit is {max} bytes per import. Split it into several batches.",
                file.len()
            ),
        ));
    }
    let text = csv::decode(file).map_err(|e| {
        csv_errors(vec![(
            e.line,
            problem("", "csv_encoding_invalid", e.message),
        )])
    })?;
    let parsed = csv::parse(text);
    let lines = read_rows(parsed, &caller.environment)?;
    store_new(
        caller,
        NewBatch {
            name,
            description,
            source: "csv",
            lines,
            request_hash,
        },
        key,
    )
}

/// A CSV file with the batch's name and description.
struct Upload<'a> {
    file: &'a [u8],
    name: Option<String>,
    description: Option<String>,
}

/// The fields of a multipart form.
fn form_fields(req: &Request) -> Result<Upload<'_>, ApiError> {
    let content_type = wire::header(req, "content-type").unwrap_or_default();
    let boundary = multipart::boundary(content_type).ok_or_else(|| {
        ApiError::invalid(
            "multipart_invalid",
            "Content-Type",
            "multipart/form-data needs a boundary parameter in its Content-Type.",
        )
    })?;
    let parts = multipart::parse(&req.body, &boundary).map_err(|m| {
        ApiError::bad_request(
            "multipart_invalid",
            format!("The multipart body cannot be read: {m}."),
        )
    })?;
    let (mut file, mut name, mut description) = (None, None, None);
    for part in parts {
        let slot = match part.name.as_str() {
            "file" => {
                if file.replace(part.body).is_some() {
                    return Err(ApiError::invalid(
                        "parameter_duplicate",
                        "file",
                        "Send one file per import.",
                    ));
                }
                continue;
            }
            "name" => &mut name,
            "description" => &mut description,
            other => {
                return Err(ApiError::invalid(
                    "parameter_unknown",
                    other,
                    format!(
                        "Unknown form field '{other}'; the fields are file, name and description."
                    ),
                ));
            }
        };
        let value = String::from_utf8(part.body.to_vec()).map_err(|_| {
            ApiError::invalid(
                "parameter_invalid",
                &part.name,
                format!("{} must be UTF-8 text.", part.name),
            )
        })?;
        *slot = Some(value);
    }
    let file = file.ok_or_else(|| {
        ApiError::invalid(
            "parameter_missing",
            "file",
            "The form has no file field: attach the CSV as field 'file'.",
        )
    })?;
    Ok(Upload {
        file,
        name,
        description,
    })
}

/// The header's column names, normalised: `Beneficiary Name` reads as `beneficiary_name`.
fn column_name(s: &str) -> String {
    s.trim().to_lowercase().replace([' ', '-'], "_")
}

/// Checks the header and every row; the valid lines, or a 400 listing
/// every bad line (syntax and content) by its line number.
fn read_rows(parsed: csv::Parsed, environment: &str) -> Result<Vec<(u32, ValidItem)>, ApiError> {
    let mut records = parsed.records.into_iter();
    let syntax: Vec<(u32, Problem)> = parsed
        .errors
        .into_iter()
        .map(|e| (e.line, problem("", "csv_syntax", e.message)))
        .collect();
    let Some(header) = records.next() else {
        return Err(if syntax.is_empty() {
            ApiError::invalid(
                "csv_empty",
                "file",
                format!(
                    "The CSV is empty. Its first line must be the header: {}.",
                    columns_help()
                ),
            )
        } else {
            csv_errors(syntax)
        });
    };
    // A broken line before the header: the header cannot be trusted.
    if syntax.first().is_some_and(|(line, _)| *line < header.line) {
        return Err(csv_errors(syntax));
    }
    let columns = read_header(&header)?;
    let rows: Vec<csv::Record> = records.collect();
    check_item_count(rows.len() + syntax.len())?;

    let mut problems: Vec<(usize, Problem)> = Vec::new();
    let raws: Vec<Option<RawItem>> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if r.fields.len() != columns.len() {
                problems.push((
                    i,
                    problem(
                        "",
                        "csv_field_count",
                        format!(
                            "expected {} fields as in the header, found {}.",
                            columns.len(),
                            r.fields.len()
                        ),
                    ),
                ));
                return None;
            }
            let mut raw = RawItem::default();
            for (column, value) in columns.iter().zip(&r.fields) {
                raw.set(column, value.clone());
            }
            Some(raw)
        })
        .collect();
    let catalogue = router::catalogue(environment);
    let valid = check_lines(
        &raws,
        &catalogue,
        environment,
        |i| format!("line {}", rows[i].line),
        &mut problems,
    );
    let mut all: Vec<(u32, Problem)> = problems
        .into_iter()
        .map(|(i, p)| (rows[i].line, p))
        .chain(syntax)
        .collect();
    if !all.is_empty() {
        all.sort_by_key(|(line, _)| *line);
        return Err(csv_errors(all));
    }
    if valid.is_empty() {
        return Err(ApiError::invalid(
            "csv_no_rows",
            "file",
            "The CSV has a header but no payout lines.",
        ));
    }
    Ok(valid
        .into_iter()
        .map(|(i, item)| (rows[i].line, item))
        .collect())
}

/// Column names in file order; a 400 on line 1 if the header is not right.
fn read_header(header: &csv::Record) -> Result<Vec<String>, ApiError> {
    let names: Vec<String> = header.fields.iter().map(|f| column_name(f)).collect();
    let mut problems = Vec::new();
    for (i, n) in names.iter().enumerate() {
        if !items::REQUIRED.contains(&n.as_str()) && !items::OPTIONAL.contains(&n.as_str()) {
            problems.push(problem(
                n,
                "csv_column_unknown",
                format!(
                    "unknown column '{}' in the header. The columns are {}.",
                    header.fields[i].trim(),
                    columns_help()
                ),
            ));
        } else if names[..i].contains(n) {
            problems.push(problem(
                n,
                "csv_column_duplicate",
                format!("column '{n}' appears twice in the header."),
            ));
        }
    }
    for required in items::REQUIRED {
        if !names.iter().any(|n| n == required) {
            problems.push(problem(
                required,
                "csv_column_missing",
                format!(
                    "the header has no '{required}' column. The first line must be the header: {}.",
                    columns_help()
                ),
            ));
        }
    }
    if problems.is_empty() {
        Ok(names)
    } else {
        Err(csv_errors(
            problems.into_iter().map(|p| (header.line, p)).collect(),
        ))
    }
}

fn columns_help() -> String {
    format!(
        "{} (and optionally {})",
        items::REQUIRED.join(","),
        items::OPTIONAL.join(",")
    )
}

/// The 400 of a rejected CSV: every problem with its line and column.
fn csv_errors(problems: Vec<(u32, Problem)>) -> ApiError {
    let rows = problems
        .iter()
        .map(|(line, _)| *line)
        .collect::<BTreeSet<_>>()
        .len();
    let errors = problems
        .into_iter()
        .map(|(line, p)| {
            json!({
                "line": line,
                "column": (!p.field.is_empty()).then_some(p.field),
                "code": p.code,
                "message": p.message,
            })
        })
        .collect();
    ApiError::invalid_items("invalid_csv", "file", "line", rows, errors)
}

// ---- Shared by both inputs ----

fn check_item_count(n: usize) -> Result<(), ApiError> {
    let max = settings::max_items();
    if n > max {
        return Err(ApiError::too_large(
            "too_many_items",
            "items",
            format!(
                "The batch has {n} payout lines; the limit is {max} per batch. Split it into several batches."
            ),
        ));
    }
    Ok(())
}

fn hash(bytes: &[u8]) -> String {
    signing::sha256(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// What identifies a CSV import: its name and description (as JSON, so no
/// split between them is ambiguous) and the file's raw bytes.
fn csv_request_hash(name: &str, description: Option<&str>, file: &[u8]) -> String {
    let fields = json!({"name": name, "description": description});
    let mut bytes = b"csv\n".to_vec();
    bytes.extend_from_slice(&serde_json::to_vec(&fields).expect("JSON values serialise"));
    bytes.push(b'\n');
    bytes.extend_from_slice(file);
    hash(&bytes)
}

/// The batch an earlier request under this key created, if the key is known
/// and not expired: `Some` for the same request (a replay), 409
/// `idempotency_key_reused` for another one, `None` for a new or expired key.
fn earlier_batch(
    rec: Option<IdemRecord>,
    request_hash: &str,
    now: u64,
    read_batch: impl FnOnce(&str) -> Result<Option<Batch>, ApiError>,
) -> Result<Option<Batch>, ApiError> {
    let Some(rec) = rec.filter(|r| now.saturating_sub(r.created_ms) < IDEMPOTENCY_TTL_MS) else {
        return Ok(None);
    };
    if rec.request_hash != request_hash {
        return Err(ApiError::idempotency(
            "idempotency_key_reused",
            "This Idempotency-Key was used with a different request body.",
        ));
    }
    read_batch(&rec.batch_id)?
        .map(Some)
        .ok_or_else(|| ApiError::internal("idempotency record without batch"))
}

/// A retry answered from committed data before the request is checked
/// again: the batch exists, so a setting or the catalogue that changed since
/// (an item limit, an operator no longer served) must not turn it into a 400
/// saying nothing was created. [`store_new`] decides again in its
/// transaction, for two requests that race.
fn replay_committed(
    caller: &Caller,
    key: &str,
    request_hash: &str,
) -> Result<Option<Response>, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let earlier = earlier_batch(
        store::read_idem(env, merchant, key)?,
        request_hash,
        clock::now_ms(),
        |id| store::read_batch(env, merchant, id),
    )?;
    Ok(earlier.map(|b| batch_response(200, &b, true)))
}

/// Stores a new batch with its Idempotency-Key (or replays the one made
/// under the same key): 201, or 200 for a replay.
fn store_new(caller: &Caller, new: NewBatch, key: String) -> Result<Response, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let now = clock::now_ms();
    let id = uuid::Uuid::new_v4().to_string();
    let threshold = settings::validation_threshold(merchant);
    let total: u64 = new.lines.iter().map(|(_, i)| i.amount).sum();
    // Maker-checker outranks the threshold: with a second approver required,
    // no batch pays out on its creator's key alone, however small.
    let requires_validation = total > threshold || caller.require_second_approver;
    let items: Vec<Item> = new
        .lines
        .into_iter()
        .enumerate()
        .map(|(position, (line, v))| Item {
            id: uuid::Uuid::new_v4().to_string(),
            batch_id: id.clone(),
            position: position as u32,
            line,
            reference: v.reference,
            beneficiary_name: v.beneficiary_name,
            phone: v.phone,
            country: v.country.into(),
            operator: v.operator,
            amount: v.amount,
            currency: v.currency,
            status: ItemStatus::Pending,
            attempts: 0,
            psp_reference: None,
            failure: None,
            created_at_ms: now,
            updated_at_ms: now,
            submitted_at_ms: None,
            completed_at_ms: None,
            next_check_ms: None,
            checks: 0,
            review: None,
            route: None,
            tried: Vec::new(),
            held: None,
        })
        .collect();
    // Below the threshold: paid at once, as if validated on creation.
    let start = (!requires_validation).then_some(now);
    let batch = Batch {
        id: id.clone(),
        merchant_id: merchant.into(),
        environment: env.into(),
        name: new.name,
        description: new.description,
        source: new.source.into(),
        status: if requires_validation {
            BatchStatus::PendingValidation
        } else {
            BatchStatus::Processing
        },
        currency: items[0].currency.clone(),
        item_count: items.len() as u32,
        total_amount: total,
        counts: Counts {
            pending: items.len() as u32,
            ..Counts::default()
        },
        amount_completed: 0,
        amount_failed: 0,
        validation_threshold: threshold,
        requires_validation,
        cursor: 0,
        created_at_ms: now,
        updated_at_ms: now,
        validated_at_ms: None,
        processing_started_at_ms: start,
        completed_at_ms: None,
        rejected_at_ms: None,
        rejection_reason: None,
        queued_ms: start,
        created_by_key: Some(caller.key_id.clone()),
        validated_by_key: None,
    };

    // The key is stored in the transaction that inserts the batch: neither
    // exists without the other.
    let tx = Tx::begin()?;
    if let Some(earlier) = earlier_batch(
        tx.idem(env, merchant, &key)?,
        &new.request_hash,
        now,
        |id| tx.batch(env, merchant, id),
    )? {
        return Ok(batch_response(200, &earlier, true));
    }
    tx.put_idem(
        env,
        merchant,
        &key,
        &IdemRecord {
            request_hash: new.request_hash,
            batch_id: id,
            created_ms: now,
        },
    )?;
    tx.insert_batch(&batch, &items)?;
    tx.commit()?;
    Ok(batch_response(201, &batch, false))
}

fn batch_response(status: u16, b: &Batch, replay: bool) -> Response {
    let mut body = wire::batch_json(b);
    body["idempotent_replay"] = Value::Bool(replay);
    json_response(status, &body)
}

// ---- Reads ----

pub fn get(caller: &Caller, id: &str) -> Result<Response, ApiError> {
    let b = store::read_batch(&caller.environment, &caller.merchant_id, id)?
        .ok_or_else(|| ApiError::batch_not_found(id))?;
    Ok(json_response(200, &wire::batch_json(&b)))
}

pub fn list(caller: &Caller, req: &Request) -> Result<Response, ApiError> {
    let page = wire::page(req)?;
    let (count, batches) = store::list_batches(
        &caller.environment,
        &caller.merchant_id,
        page.offset(),
        page.size,
    )?;
    let results = batches.iter().map(wire::batch_json).collect();
    Ok(json_response(
        200,
        &wire::page_json(&caller.base_url, ROOT, &[], page, count, results),
    ))
}

/// Items in batch order; `?status=` keeps one status.
pub fn items(caller: &Caller, req: &Request, id: &str) -> Result<Response, ApiError> {
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let batch =
        store::read_batch(env, merchant, id)?.ok_or_else(|| ApiError::batch_not_found(id))?;
    let page = wire::page(req)?;
    let status_param = wire::query_param(req, "status")?;
    let status = status_param
        .as_deref()
        .map(|s| {
            ItemStatus::parse(s).ok_or_else(|| {
                ApiError::invalid(
                    "parameter_invalid",
                    "status",
                    "status must be pending, processing, completed or failed.",
                )
            })
        })
        .transpose()?;
    let offset = page.offset().min(u32::MAX as u64) as u32;
    let (count, found) = match status {
        // Positions are dense: the page is one scan.
        None => (
            batch.item_count,
            store::scan_items(env, merchant, id, offset, page.size)?,
        ),
        Some(wanted) => (
            batch.counts.of(wanted),
            items_with_status(env, merchant, id, wanted, offset, page.size)?,
        ),
    };
    let keep: Vec<(&str, &str)> = status_param
        .as_deref()
        .map(|s| ("status", s))
        .into_iter()
        .collect();
    let results = found.iter().map(wire::item_json).collect();
    Ok(json_response(
        200,
        &wire::page_json(
            &caller.base_url,
            &format!("{ROOT}{id}/items/"),
            &keep,
            page,
            count as u64,
            results,
        ),
    ))
}

/// Walks the batch in order for the page of items in `wanted`.
fn items_with_status(
    env: &str,
    merchant: &str,
    batch: &str,
    wanted: ItemStatus,
    offset: u32,
    size: u32,
) -> Result<Vec<Item>, ApiError> {
    let (mut position, mut skipped, mut out) = (0, 0, Vec::new());
    loop {
        let chunk = store::scan_items(env, merchant, batch, position, 500)?;
        let Some(last) = chunk.last() else {
            return Ok(out);
        };
        position = last.position + 1;
        for item in chunk.into_iter().filter(|i| i.status == wanted) {
            if skipped < offset {
                skipped += 1;
            } else {
                out.push(item);
                if out.len() as u32 == size {
                    return Ok(out);
                }
            }
        }
    }
}

// ---- POST /bulk-payments/{id}/validate/ ----

/// Approves a batch waiting for validation (it is then paid), or rejects it
/// with `{"action":"reject","reason":…}`.
pub fn validate(caller: &Caller, req: &Request, id: &str) -> Result<Response, ApiError> {
    let body = wire::body_object(req, true)?;
    wire::reject_unknown(&body, &["action", "reason"])?;
    let reject = match wire::opt_string(&body, "action", 20)?.as_deref() {
        None | Some("approve") => false,
        Some("reject") => true,
        Some(_) => {
            return Err(ApiError::invalid(
                "parameter_invalid",
                "action",
                "action must be approve (the default) or reject.",
            ));
        }
    };
    let reason = wire::opt_string(&body, "reason", MAX_DESCRIPTION)?;
    if reason.is_some() && !reject {
        return Err(ApiError::invalid(
            "parameter_invalid",
            "reason",
            "reason goes with action reject.",
        ));
    }
    let (env, merchant) = (caller.environment.as_str(), caller.merchant_id.as_str());
    let now = clock::now_ms();
    let tx = Tx::begin()?;
    let mut b = tx
        .batch(env, merchant, id)?
        .ok_or_else(|| ApiError::batch_not_found(id))?;
    if b.status != BatchStatus::PendingValidation {
        return Err(not_awaiting_validation(&b));
    }
    // Maker-checker: paying out takes a second person (a second key);
    // rejecting moves no money, so the creator may withdraw their batch.
    if !reject
        && caller.require_second_approver
        && b.created_by_key.as_deref() == Some(caller.key_id.as_str())
    {
        return Err(ApiError::forbidden(
            "second_approver_required",
            format!(
                "Bulk payment {} was created with this API key; another key (with scope bulk:approve) must approve it.",
                b.id
            ),
        ));
    }
    let previous_queue = b.queued_ms;
    b.updated_at_ms = now;
    if reject {
        b.status = BatchStatus::Rejected;
        b.rejected_at_ms = Some(now);
        b.rejection_reason = reason;
        jobs::emit(&tx, &b)?;
    } else {
        b.status = BatchStatus::Processing;
        b.validated_at_ms = Some(now);
        b.validated_by_key = Some(caller.key_id.clone());
        b.processing_started_at_ms = Some(now);
        b.queued_ms = Some(now);
    }
    tx.save_batch(&b, previous_queue)?;
    tx.commit()?;
    Ok(json_response(200, &wire::batch_json(&b)))
}

/// The 409 for a batch that is past validation, saying why.
fn not_awaiting_validation(b: &Batch) -> ApiError {
    let status = b.status.as_str();
    if let Some(at) = b.validated_at_ms {
        return ApiError::state(
            "batch_already_validated",
            format!(
                "Bulk payment {} was already validated at {}; it is {status}.",
                b.id,
                mmc_domain::time::rfc3339(at)
            ),
        );
    }
    match b.status {
        BatchStatus::Rejected => ApiError::state(
            "batch_rejected",
            format!(
                "Bulk payment {} was rejected; it cannot be validated.",
                b.id
            ),
        ),
        BatchStatus::Processing => ApiError::state(
            "batch_already_processing",
            format!(
                "Bulk payment {} is already processing: its total {} is within the validation threshold {}, so it needed no validation.",
                b.id, b.total_amount, b.validation_threshold
            ),
        ),
        _ => ApiError::state(
            "batch_not_pending_validation",
            format!(
                "Bulk payment {} is {status}; only a batch in pending_validation can be validated.",
                b.id
            ),
        ),
    }
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
