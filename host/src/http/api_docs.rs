//! `/docs/api`: the API reference, rendered on the server from the OpenAPI
//! documents the service itself serves (the current generation's from
//! `collect`, the legacy one's from `legacy`), so it cannot drift from them
//! and needs nothing from elsewhere: no script, no CDN, the same policy as
//! `/docs`. Operations are grouped by tag, each with an anchor named by its
//! `operationId` (`/docs/api#createPayment`; the legacy generation's are
//! `#legacy-<operationId>`), then the schemas they name.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use parking_lot::Mutex;
use pulldown_cmark::{Event, Options, Parser, html};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::App;
use crate::runtime::bindings::http_types::Request;

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

const METHODS: [&str; 8] = [
    "get", "post", "put", "patch", "delete", "head", "options", "trace",
];

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

/// A JSON object, or an empty one.
fn obj(v: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    v.as_object().unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

/// HTML-escaped text.
fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// An `id` attribute's value from any text: letters, digits, `-`, `_`.
fn anchor(prefix: &str, name: &str) -> String {
    let clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("{prefix}{clean}")
}

/// A description (CommonMark in OpenAPI) as HTML; raw HTML in it is shown
/// as text, never interpreted.
fn markdown(text: &str) -> String {
    let events = Parser::new_ext(text, Options::ENABLE_TABLES).map(|e| match e {
        Event::Html(h) | Event::InlineHtml(h) => Event::Text(h),
        e => e,
    });
    let mut out = String::new();
    html::push_html(&mut out, events);
    out
}

/// Follows a local `$ref` (`#/components/…`) once, or gives the value back.
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix('#')
            .and_then(|pointer| doc.pointer(pointer))
            .unwrap_or(v),
        None => v,
    }
}

/// A schema in a few words, with named schemas linked to their section.
fn type_label(prefix: &str, schema: &Value) -> String {
    if let Some(r) = schema.get("$ref").and_then(Value::as_str) {
        let name = r.rsplit('/').next().unwrap_or(r);
        return format!(
            "<a href=\"#{}\">{}</a>",
            anchor(&format!("{prefix}schema-"), name),
            esc(name)
        );
    }
    for (key, sep) in [("oneOf", " | "), ("anyOf", " | "), ("allOf", " & ")] {
        if let Some(list) = schema.get(key).and_then(Value::as_array) {
            return list
                .iter()
                .map(|s| type_label(prefix, s))
                .collect::<Vec<_>>()
                .join(sep);
        }
    }
    if let Some(c) = schema.get("const") {
        return format!("<code>{}</code>", esc(&c.to_string()));
    }
    let types: Vec<&str> = match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let mut label = if types.is_empty() {
        if schema.get("properties").is_some() {
            "object".to_string()
        } else {
            "any".to_string()
        }
    } else {
        types
            .iter()
            .map(|t| match *t {
                "array" => format!(
                    "array of {}",
                    type_label(prefix, schema.get("items").unwrap_or(&Value::Null))
                ),
                t => esc(t),
            })
            .collect::<Vec<_>>()
            .join(" | ")
    };
    if let Some(f) = schema.get("format").and_then(Value::as_str) {
        let _ = write!(label, " ({})", esc(f));
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let shown: Vec<String> = values
            .iter()
            .map(|v| format!("<code>{}</code>", esc(v.as_str().unwrap_or(&v.to_string()))))
            .collect();
        let _ = write!(label, ": {}", shown.join(", "));
    }
    label
}

/// Constraints worth a reader's eye (bounds, lengths, defaults).
fn constraints(schema: &Value) -> String {
    let mut parts = Vec::new();
    for (key, word) in [
        ("minimum", "≥"),
        ("maximum", "≤"),
        ("minLength", "min length"),
        ("maxLength", "max length"),
        ("default", "default"),
    ] {
        if let Some(v) = schema.get(key) {
            parts.push(format!("{word} {}", esc(&v.to_string())));
        }
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!(" <small>({})</small>", parts.join(", "))
    }
}

struct Op<'a> {
    method: &'a str,
    path: &'a str,
    op: &'a Value,
    /// Parameters declared on the path, for every method.
    shared: &'a [Value],
}

fn render_document(doc: &Document, json: &Value, nav: &mut String, body: &mut String) {
    let prefix = doc.anchor_prefix;
    let base = json
        .pointer("/servers/0/url")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let info = json.get("info").unwrap_or(&Value::Null);
    let _ = write!(
        body,
        "<h2 id=\"{}\">{}</h2><p>{} · version <code>{}</code> · <a href=\"{}\">the OpenAPI document</a></p>{}",
        anchor(prefix, "document"),
        esc(doc.title),
        esc(str_of(info, "title")),
        esc(str_of(info, "version")),
        esc(doc.path),
        markdown(str_of(info, "description"))
    );

    // Operations by tag: the document's tags in its order, then any other.
    let mut by_tag: BTreeMap<String, Vec<Op>> = BTreeMap::new();
    for (path, item) in obj(json.get("paths").unwrap_or(&Value::Null)) {
        let shared = item
            .get("parameters")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default();
        for method in METHODS {
            if let Some(op) = item.get(method) {
                let tag = op
                    .pointer("/tags/0")
                    .and_then(Value::as_str)
                    .unwrap_or("operations");
                by_tag.entry(tag.to_string()).or_default().push(Op {
                    method,
                    path,
                    op,
                    shared,
                });
            }
        }
    }
    let declared: Vec<(String, String)> = json
        .get("tags")
        .and_then(Value::as_array)
        .map(|tags| {
            tags.iter()
                .map(|t| {
                    (
                        str_of(t, "name").to_string(),
                        str_of(t, "description").to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let mut order: Vec<(String, String)> = declared
        .into_iter()
        .filter(|(name, _)| by_tag.contains_key(name))
        .collect();
    for name in by_tag.keys() {
        if !order.iter().any(|(n, _)| n == name) {
            order.push((name.clone(), String::new()));
        }
    }

    let _ = write!(nav, "<p><strong>{}</strong></p><ul>", esc(doc.title));
    for (tag, description) in &order {
        let ops = &by_tag[tag];
        let _ = write!(
            body,
            "<h3 id=\"{}\">{}</h3>{}",
            anchor(&format!("{prefix}tag-"), tag),
            esc(tag),
            markdown(description)
        );
        let _ = write!(nav, "<li>{}<ul>", esc(tag));
        for op in ops {
            let id = operation_anchor(prefix, op);
            let _ = write!(
                nav,
                "<li><a href=\"#{id}\"><code>{} {}{}</code></a> {}</li>",
                op.method.to_uppercase(),
                esc(base),
                esc(op.path),
                esc(str_of(op.op, "summary"))
            );
            render_operation(json, prefix, base, op, &id, body);
        }
        nav.push_str("</ul></li>");
    }
    nav.push_str("</ul>");

    if let Some(schemas) = json
        .pointer("/components/schemas")
        .and_then(Value::as_object)
    {
        let _ = write!(
            body,
            "<h3 id=\"{}\">Schemas</h3>",
            anchor(prefix, "schemas")
        );
        for (name, schema) in schemas {
            render_schema(prefix, name, schema, body);
        }
    }
}

fn operation_anchor(prefix: &str, op: &Op) -> String {
    match op.op.get("operationId").and_then(Value::as_str) {
        Some(id) => anchor(prefix, id),
        None => anchor(prefix, &format!("{}-{}", op.method, op.path)),
    }
}

fn render_operation(doc: &Value, prefix: &str, base: &str, op: &Op, id: &str, out: &mut String) {
    let o = op.op;
    let deprecated = if o.get("deprecated").and_then(Value::as_bool) == Some(true) {
        " <small>(deprecated)</small>"
    } else {
        ""
    };
    let _ = write!(
        out,
        "<section id=\"{id}\" class=\"op\"><h4><span class=\"method\">{}</span> <code>{}{}</code>{deprecated}</h4>\
         <p><strong>{}</strong> <small><code>{}</code></small></p>{}",
        op.method.to_uppercase(),
        esc(base),
        esc(op.path),
        esc(str_of(o, "summary")),
        esc(str_of(o, "operationId")),
        markdown(str_of(o, "description"))
    );

    let params: Vec<&Value> = op
        .shared
        .iter()
        .chain(
            o.get("parameters")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default(),
        )
        .map(|p| resolve(doc, p))
        .collect();
    if !params.is_empty() {
        out.push_str(
            "<table><thead><tr><th>Parameter</th><th>In</th><th>Required</th><th>Type</th><th>Description</th></tr></thead><tbody>",
        );
        for p in params {
            let schema = p.get("schema").unwrap_or(&Value::Null);
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}{}</td><td>{}</td></tr>",
                esc(str_of(p, "name")),
                esc(str_of(p, "in")),
                if p.get("required").and_then(Value::as_bool) == Some(true) {
                    "yes"
                } else {
                    "no"
                },
                type_label(prefix, schema),
                constraints(schema),
                markdown(str_of(p, "description"))
            );
        }
        out.push_str("</tbody></table>");
    }

    if let Some(rb) = o.get("requestBody").map(|rb| resolve(doc, rb)) {
        let required = if rb.get("required").and_then(Value::as_bool) == Some(true) {
            "required"
        } else {
            "optional"
        };
        let _ = write!(out, "<p>Request body ({required}):</p><ul>");
        for (media, content) in obj(rb.get("content").unwrap_or(&Value::Null)) {
            let schema = content.get("schema").unwrap_or(&Value::Null);
            let _ = write!(
                out,
                "<li><code>{}</code>: {}</li>",
                esc(media),
                type_label(prefix, schema)
            );
        }
        out.push_str("</ul>");
        // One example, the first the document gives, so a reader can start from it.
        let example = obj(rb.get("content").unwrap_or(&Value::Null))
            .values()
            .find_map(|c| {
                c.get("example")
                    .or_else(|| resolve(doc, c.get("schema")?).get("example"))
            });
        if let Some(example) = example {
            let text = match example {
                Value::String(s) => s.clone(),
                v => serde_json::to_string_pretty(v).unwrap_or_default(),
            };
            let _ = write!(out, "<pre><code>{}</code></pre>", esc(&text));
        }
        let _ = write!(out, "{}", markdown(str_of(rb, "description")));
    }

    let responses = obj(o.get("responses").unwrap_or(&Value::Null));
    if !responses.is_empty() {
        out.push_str(
            "<table><thead><tr><th>Status</th><th>Description</th><th>Body</th></tr></thead><tbody>",
        );
        for (code, r) in responses {
            let r = resolve(doc, r);
            let bodies: Vec<String> = obj(r.get("content").unwrap_or(&Value::Null))
                .iter()
                .map(|(media, c)| {
                    format!(
                        "<code>{}</code>: {}",
                        esc(media),
                        type_label(prefix, c.get("schema").unwrap_or(&Value::Null))
                    )
                })
                .collect();
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
                esc(code),
                markdown(str_of(r, "description")),
                bodies.join("<br>")
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>");
}

fn render_schema(prefix: &str, name: &str, schema: &Value, out: &mut String) {
    let _ = write!(
        out,
        "<section id=\"{}\"><h4><code>{}</code></h4><p>{}{}</p>{}",
        anchor(&format!("{prefix}schema-"), name),
        esc(name),
        type_label(prefix, schema),
        constraints(schema),
        markdown(str_of(schema, "description"))
    );
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        let required: Vec<&str> = schema
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        out.push_str(
            "<table><thead><tr><th>Field</th><th>Type</th><th>Required</th><th>Description</th></tr></thead><tbody>",
        );
        for (field, s) in props {
            let _ = write!(
                out,
                "<tr><td><code>{}</code></td><td>{}{}</td><td>{}</td><td>{}</td></tr>",
                esc(field),
                type_label(prefix, s),
                constraints(s),
                if required.contains(&field.as_str()) {
                    "yes"
                } else {
                    "no"
                },
                markdown(str_of(s, "description"))
            );
        }
        out.push_str("</tbody></table>");
    }
    out.push_str("</section>");
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
