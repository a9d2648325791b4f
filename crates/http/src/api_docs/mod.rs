//! `/docs/api`: the API reference, rendered on the server from the OpenAPI
//! documents the service itself serves (the current generation's from
//! `collect`, the legacy one's from `legacy`), so it cannot drift from them
//! and needs nothing from elsewhere: no script, no CDN, the same policy as
//! `/docs`. Operations are grouped by tag, each with an anchor named by its
//! `operationId` (`/docs/api#createPayment`; the legacy generation's are
//! `#legacy-<operationId>`), then the schemas they name.
//!
//! Here: the documents fetched and the page around them, rendered again only
//! when a document changed. One document's sections: [`document`]; how a
//! schema, a description or an anchor is written: [`words`].

mod document;
mod words;

use std::fmt::Write;
use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::Value;
use sha2::{Digest, Sha256};

use self::document::render_document;
use self::words::esc;
use super::App;
use mmc_runtime::bindings::http_types::Request;

/// One document to render: a heading, the anchors' prefix, and the JSON
/// (or why it could not be had).
pub struct Document {
    pub title: &'static str,
    /// Where the service serves it.
    pub path: &'static str,
    pub anchor_prefix: &'static str,
    pub json: Result<Value, String>,
}

/// The documents, where the service serves them: fetched through the
/// components that serve them, as a client would get them.
const SOURCES: [(&str, &str, &str); 2] = [
    ("Current generation", "/api/v1/collect/openapi.json", ""),
    (
        "Legacy generation (deprecated)",
        "/api/v1/collect/mobile-money/openapi.json",
        "legacy-",
    ),
];

/// The page, rendered from the documents as they are now (a page rendered
/// from the same documents is reused).
pub async fn page(app: &Arc<App>) -> Arc<str> {
    static LAST: Mutex<Option<(Vec<u8>, Arc<str>)>> = Mutex::new(None);
    let mut fetched = Vec::new();
    for (title, path, anchor_prefix) in SOURCES {
        fetched.push((title, path, anchor_prefix, fetch(app, path).await));
    }
    let mut hasher = Sha256::new();
    for (_, _, _, doc) in &fetched {
        match doc {
            Ok(bytes) => hasher.update(bytes),
            Err(e) => hasher.update(e.as_bytes()),
        }
        hasher.update([0]);
    }
    let key = hasher.finalize().to_vec();
    if let Some((k, html)) = LAST.lock().as_ref()
        && *k == key
    {
        return html.clone();
    }
    let docs: Vec<Document> = fetched
        .into_iter()
        .map(|(title, path, anchor_prefix, doc)| Document {
            title,
            path,
            anchor_prefix,
            json: doc.and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string())),
        })
        .collect();
    let html: Arc<str> = render(&docs).into();
    *LAST.lock() = Some((key, html.clone()));
    html
}

/// `GET path` from the component its route names, without a key.
async fn fetch(app: &Arc<App>, path: &'static str) -> Result<Vec<u8>, String> {
    let route = app
        .route(path)
        .ok_or_else(|| "no component serves it".to_string())?;
    let (runtime, component) = (app.runtime.clone(), route.component.clone());
    let request = Request {
        method: "GET".into(),
        path: path.into(),
        query: String::new(),
        headers: Vec::new(),
        body: Vec::new(),
    };
    let resp = tokio::task::spawn_blocking(move || runtime.handle(&component, None, &request))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    if resp.status != 200 {
        return Err(format!("status {}", resp.status));
    }
    Ok(resp.body)
}

/// The page for `docs`, in the order given.
pub fn render(docs: &[Document]) -> String {
    let mut nav = String::new();
    let mut body = String::new();
    for doc in docs {
        match &doc.json {
            Ok(json) => render_document(doc, json, &mut nav, &mut body),
            Err(why) => {
                let _ = write!(
                    body,
                    "<h2>{}</h2><p>The document at <code>{}</code> could not be read: {}</p>",
                    esc(doc.title),
                    esc(doc.path),
                    esc(why)
                );
            }
        }
    }
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>API reference — Mobile Money Collection Service</title><style>{}</style></head>\
         <body><main><p><a href=\"/docs\">Guide</a> · API reference</p>\
         <h1>API reference</h1><p>Rendered from the OpenAPI documents this service serves.</p>\
         <nav aria-label=\"Operations\">{nav}</nav>{body}</main></body></html>",
        super::docs::STYLE
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn page(json: Value) -> String {
        render(&[Document {
            title: "Current generation",
            path: "/api/v1/collect/openapi.json",
            anchor_prefix: "",
            json: Ok(json),
        }])
    }

    #[test]
    fn operations_are_grouped_by_tag_with_their_parameters_bodies_and_responses() {
        let html = page(json!({
            "openapi": "3.1.0",
            "info": {"title": "T", "version": "1", "description": "Hello <script>x</script>"},
            "servers": [{"url": "/api/v1"}],
            "tags": [{"name": "payments", "description": "Money in."}],
            "paths": {"/collect/payments": {"post": {
                "operationId": "createPayment", "summary": "Create a payment", "tags": ["payments"],
                "parameters": [{"$ref": "#/components/parameters/Key"}],
                "requestBody": {"required": true, "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/CreatePayment"}}}},
                "responses": {"201": {"description": "Created.", "content": {"application/json": {
                    "schema": {"$ref": "#/components/schemas/Payment"}}}},
                              "401": {"$ref": "#/components/responses/Unauthorized"}}
            }}},
            "components": {
                "parameters": {"Key": {"name": "Idempotency-Key", "in": "header", "required": true,
                                       "schema": {"type": "string", "format": "uuid"}}},
                "responses": {"Unauthorized": {"description": "No key."}},
                "schemas": {
                    "CreatePayment": {"type": "object", "required": ["amount"], "example": {"amount": 1500},
                                      "properties": {"amount": {"type": "integer", "minimum": 100}}},
                    "Payment": {"type": "object", "properties": {"status": {"type": "string", "enum": ["pending", "completed"]}}}
                }
            }
        }));
        for needle in [
            r#"<section id="createPayment" class="op">"#,
            r#"<span class="method">POST</span> <code>/api/v1/collect/payments</code>"#,
            r#"<h3 id="tag-payments">payments</h3>"#,
            "<code>Idempotency-Key</code></td><td>header</td><td>yes</td><td>string (uuid)",
            r##"<code>application/json</code>: <a href="#schema-CreatePayment">CreatePayment</a>"##,
            r##"<td><code>201</code></td><td><p>Created.</p>"##,
            r##"<td><code>401</code></td><td><p>No key.</p>"##,
            r#"<section id="schema-Payment">"#,
            "<code>pending</code>, <code>completed</code>",
            "integer <small>(≥ 100)</small>",
            "&quot;amount&quot;: 1500",
            r##"<a href="#createPayment">"##,
        ] {
            assert!(html.contains(needle), "{needle}\n{html}");
        }
        assert!(!html.contains("<script"), "{html}");
    }

    #[test]
    fn a_document_that_cannot_be_read_is_said_so() {
        let html = render(&[Document {
            title: "Legacy generation",
            path: "/legacy.json",
            anchor_prefix: "legacy-",
            json: Err("status 500".into()),
        }]);
        assert!(html.contains("could not be read: status 500"), "{html}");
    }
}
