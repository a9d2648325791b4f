//! `POST /bulk-payments/import_csv/`: a batch from a CSV file, sent as a
//! multipart form or as a `text/csv` body. The header names the columns;
//! every row is read under them and checked as a JSON item is, and a bad
//! row is reported by its line number.

use std::borrow::Cow;

use mmc_api_kit::multipart;

use super::storing::{replay_committed, store_new};
use super::*;

const CSV_HELP: &str = "Send the CSV as multipart/form-data (fields file, name, description) or as a text/csv body with ?name=...&description=...";

pub fn import_csv(caller: &Caller, req: &Request) -> Result<Response, ApiError> {
    let key = wire::idempotency_key(req)?;
    let Upload {
        file,
        name,
        description,
    } = upload(req)?;
    let name = wire::batch_name(
        name.map(|n| wire::check_text("name", &n, MAX_NAME))
            .transpose()?,
    )?;
    let description = description
        .map(|d| wire::check_text("description", &d, MAX_DESCRIPTION))
        .transpose()?
        .filter(|d| !d.is_empty());
    let request_hash = csv_request_hash(&name, description.as_deref(), &file);
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
    let text = csv::decode(&file).map_err(|e| {
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
    /// The request's body itself, or a copy of the form's file part.
    file: Cow<'a, [u8]>,
    name: Option<String>,
    description: Option<String>,
}

/// The file, and the batch's name and description: a form's fields (else
/// the query's), or a `text/csv` body with the query's.
fn upload(req: &Request) -> Result<Upload<'_>, ApiError> {
    match wire::media_type(req).as_str() {
        "multipart/form-data" => {
            let form = form_fields(req)?;
            Ok(Upload {
                name: form.name.or(wire::query_param(req, "name")?),
                description: form.description.or(wire::query_param(req, "description")?),
                ..form
            })
        }
        "text/csv" | "application/csv" => Ok(Upload {
            file: Cow::Borrowed(req.body.as_slice()),
            name: wire::query_param(req, "name")?,
            description: wire::query_param(req, "description")?,
        }),
        "" => Err(ApiError::unsupported_media_type(format!(
            "Content-Type is missing. {CSV_HELP}"
        ))),
        other => Err(ApiError::unsupported_media_type(format!(
            "Content-Type {other} is not accepted here. {CSV_HELP}"
        ))),
    }
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
                if file.replace(Cow::Owned(part.body.to_vec())).is_some() {
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
    let raws = raw_rows(&rows, &columns, &mut problems);
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

/// Each row's fields under the header's column names; a row with another
/// number of fields than the header is reported, by its index, and left out.
fn raw_rows(
    rows: &[csv::Record],
    columns: &[String],
    problems: &mut Vec<(usize, Problem)>,
) -> Vec<Option<RawItem>> {
    rows.iter()
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
        .collect()
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

/// The header's columns, as a refusal names them.
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
