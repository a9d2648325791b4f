//! A bulk batch from a CSV file: the upload form posts the file here, and
//! the console hands it to the bulk component's own CSV import (multipart,
//! as a key would send it, with the form's Idempotency-Key, so a double
//! submit is one batch). A file with bad lines creates nothing; its report
//! lists every problem by line and column, as the API's 400 does.

use mmc_console_kit::api::Reading;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Response;
use serde_json::Value;

use crate::multipart;
use mmc_console_kit::html::{self, esc, t, text};
use mmc_console_kit::sessions::Session;
use mmc_console_kit::web::{ConsoleError, Req, same};
use mmc_console_kit::{Console, api, blocking};
use mmc_http::App;
use mmc_http::errors::HttpError;

type Resp = Response<Full<Bytes>>;

/// Where the form posts; its body may be as large as the API accepts.
pub const PATH: &str = "/console/bulk/upload";
const IMPORT: &str = "/api/v1/bulk-payments/import_csv/";

/// The upload form, with a fresh Idempotency-Key.
pub fn form(req: &Req, s: &Session) -> String {
    let l = req.lang;
    format!(
        "<h2>{upload}</h2><p>{columns} <code>beneficiary_name,phone,amount,currency,reference</code></p><form method=\"post\" action=\"{PATH}\" enctype=\"multipart/form-data\">{csrf}\
         <input type=\"hidden\" name=\"idempotency_key\" value=\"{key}\">\
         <fieldset><label>{name}<input name=\"name\" maxlength=\"100\" required></label>\
         <label>{description}<input name=\"description\" maxlength=\"255\"></label>\
         <label>{file}<input type=\"file\" name=\"file\" accept=\".csv,text/csv\" required></label></fieldset>\
         <button>{upload}</button></form>",
        upload = t(l, "upload"),
        columns = t(l, "csv_columns"),
        csrf = html::csrf_field(s),
        key = uuid::Uuid::new_v4(),
        name = t(l, "name"),
        description = t(l, "description"),
        file = t(l, "file"),
    )
}

/// The form's fields, once its CSRF token is checked.
struct Upload {
    idempotency_key: String,
    name: Option<String>,
    description: Option<String>,
    file: Option<(String, Vec<u8>)>,
}

/// Largest text field of the form (its token, key, name, description).
const MAX_FIELD_BYTES: usize = 4 * 1024;

/// Reads the form as it arrives: its text fields, which come first (the
/// CSRF token first of all), then its file, read only once the token is
/// found right. A file ahead of the token is refused unread; the whole
/// body is bounded by the API's body limit and the body read clock.
async fn read_form(app: &App, req: &Req, s: &Session) -> Result<Upload, ConsoleError> {
    let bad = || ConsoleError::Refused(400, t(req.lang, "bad_upload").into());
    let boundary = req
        .header("content-type")
        .and_then(|ct| multer::parse_boundary(ct).ok())
        .ok_or_else(bad)?;
    let body = req.take_unread().ok_or(ConsoleError::Csrf)?;
    let _reading = crate::body_permit(app, &format!("person {}", s.actor_id())).await?;
    let limits = multer::Constraints::new()
        .size_limit(multer::SizeLimit::new().whole_stream(app.max_body_bytes as u64));
    let mut form = multer::Multipart::with_constraints(
        http_body_util::BodyExt::into_data_stream(body),
        boundary,
        limits,
    );
    let too_large = |e: &multer::Error| matches!(e, multer::Error::StreamSizeExceeded { .. });
    let clock = Duration::from_millis(app.connections.config.body_read_timeout_ms);
    let read = async {
        let mut fields: Vec<(String, String)> = Vec::new();
        let mut csrf = false;
        let mut file = None;
        while let Some(mut part) = form.next_field().await? {
            let name = part.name().unwrap_or_default().to_string();
            if let Some(filename) = part.file_name().map(str::to_string) {
                if !csrf {
                    return Ok(Err(ConsoleError::Csrf));
                }
                let bytes = part.bytes().await?;
                if name == "file" && file.is_none() && !bytes.is_empty() {
                    file = Some((filename, bytes.to_vec()));
                }
                continue;
            }
            let mut value = Vec::new();
            while let Some(chunk) = part.chunk().await? {
                value.extend_from_slice(&chunk);
                if value.len() > MAX_FIELD_BYTES {
                    return Ok(Err(bad()));
                }
            }
            let value = String::from_utf8(value).unwrap_or_default();
            if name == "csrf" {
                if !same(value.trim(), &s.csrf) {
                    return Ok(Err(ConsoleError::Csrf));
                }
                csrf = true;
            }
            fields.push((name, value.trim().to_string()));
        }
        Ok::<_, multer::Error>(Ok((csrf, fields, file)))
    };
    let (csrf, fields, file) = match tokio::time::timeout(clock, read).await {
        Err(_) => {
            app.connections.cut(mmc_http::connections::Cut::BodyTimeout);
            return Err(ConsoleError::Body(HttpError::BodyTimeout));
        }
        Ok(Err(e)) if too_large(&e) => {
            return Err(ConsoleError::Body(HttpError::PayloadTooLarge(
                app.max_body_bytes,
            )));
        }
        Ok(Err(_)) => return Err(bad()),
        Ok(Ok(read)) => read?,
    };
    if !csrf {
        return Err(ConsoleError::Csrf);
    }
    let field = |name: &str| -> Option<String> {
        fields
            .iter()
            .find(|(k, v)| k == name && !v.is_empty())
            .map(|(_, v)| v.clone())
    };
    Ok(Upload {
        // Without one (a hand-made request), each submit is its own batch.
        idempotency_key: field("idempotency_key")
            .unwrap_or_else(|| uuid::Uuid::new_v4().to_string()),
        name: field("name"),
        description: field("description"),
        file,
    })
}

/// The API's 400 for a CSV with bad lines, as a table: line, column, problem.
fn report(l: html::Lang, error: &Value) -> String {
    let mut out = html::notice(
        &format!(
            "{} {}",
            problem(l, error, &error["message"]),
            t(l, "csv_report")
        ),
        true,
    );
    let rows = error["errors"].as_array().cloned().unwrap_or_default();
    if rows.is_empty() {
        return out;
    }
    let _ = write!(
        out,
        "<table aria-label=\"{}\"><thead><tr><th>{}</th><th>{}</th><th>{}</th></tr></thead><tbody>",
        t(l, "csv_report"),
        t(l, "line"),
        t(l, "column"),
        t(l, "problem"),
    );
    for e in rows {
        let _ = write!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{} <code>{}</code></td></tr>",
            esc(&text(&e["line"])),
            esc(&text(&e["column"])),
            esc(&problem(l, &e, &e["message"])),
            esc(&text(&e["code"])),
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// A problem of the report in the page's language (see [`mmc_console_kit::refusals`]).
fn problem(l: html::Lang, e: &Value, message: &Value) -> String {
    mmc_console_kit::refusals::words(l, e["code"].as_str(), None, &text(message))
}

/// What an upload came to.
pub enum Uploaded {
    /// The batch is created (or was, by the same form): its page.
    Batch(Resp),
    /// Nothing is created: the status, and what to show above the list.
    Refused(u16, String),
}

/// The CSV to the bulk component's import: the batch, or the report of what
/// is wrong with the form or the file.
pub async fn upload(
    app: &Arc<App>,
    c: &Console,
    req: &Req,
    s: &Session,
) -> Result<Uploaded, ConsoleError> {
    let l = req.lang;
    // The role's scope first: a person who may not create a batch learns
    // that, not that their file is wrong.
    api::permitted(app, c, req, s, ("POST", IMPORT), ("bulk.upload", None)).await?;
    let form = read_form(app, req, s).await?;
    let Some((filename, file)) = form.file else {
        return Ok(Uploaded::Refused(400, html::notice(t(l, "no_file"), true)));
    };
    let mut fields = Vec::new();
    if let Some(name) = &form.name {
        fields.push(("name", name.as_str()));
    }
    if let Some(d) = &form.description {
        fields.push(("description", d.as_str()));
    }
    let (content_type, bytes) = multipart::encode(&fields, ("file", &filename, &file));
    let body = api::Body {
        content_type,
        bytes,
    };
    let request = api::call_with(
        app,
        s,
        "POST",
        IMPORT,
        body,
        Some(&form.idempotency_key),
        &req.request_id,
    );
    let audit = ("bulk.upload", None, Some(filename.as_str()));
    let (entry, answer) = match api::audited(app, c, req, s, audit, request).await? {
        Ok(accepted) => accepted,
        Err(refused) => {
            let error = refused.value()["error"].clone();
            if matches!(refused.status, 400 | 413 | 415) && error.is_object() {
                return Ok(Uploaded::Refused(refused.status, report(l, &error)));
            }
            return Err(refused.refusal(req.lang));
        }
    };
    let b = answer.value();
    let id = text(&b["id"]);
    let detail = format!(
        "{} ({} items, {} {})",
        text(&b["name"]),
        text(&b["item_count"]),
        text(&b["total_amount"]),
        text(&b["currency"])
    );
    // A replay (a double submit) is the same batch, audited once.
    blocking(|| c.audit.finish_once(entry, &id, &detail))?;
    Ok(Uploaded::Batch(mmc_console_kit::web::redirect(&format!(
        "/console/bulk/{id}?done=upload"
    ))))
}
