//! One OpenAPI document as HTML: its heading, its operations grouped by tag
//! (each with its parameters, request body and responses), then its
//! schemas; and its entries in the page's navigation.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

use super::Document;
use super::words::{anchor, constraints, esc, markdown, obj, resolve, str_of, type_label};

/// The operations' methods, in the order a path's are shown.
const METHODS: [&str; 8] = [
    "get", "post", "put", "patch", "delete", "head", "options", "trace",
];

/// One operation: a method on a path.
struct Op<'a> {
    method: &'a str,
    path: &'a str,
    op: &'a Value,
    /// Parameters declared on the path, for every method.
    shared: &'a [Value],
}

/// `doc` (whose JSON is `json`) into `body`, and its operations into `nav`.
pub(super) fn render_document(doc: &Document, json: &Value, nav: &mut String, body: &mut String) {
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
    let _ = write!(nav, "<p><strong>{}</strong></p><ul>", esc(doc.title));
    let by_tag = operations_by_tag(json);
    for (tag, description) in tag_order(json, &by_tag) {
        let _ = write!(
            body,
            "<h3 id=\"{}\">{}</h3>{}",
            anchor(&format!("{prefix}tag-"), &tag),
            esc(&tag),
            markdown(&description)
        );
        let _ = write!(nav, "<li>{}<ul>", esc(&tag));
        for op in &by_tag[&tag] {
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

/// The operations by their first tag (`operations` for those without one).
fn operations_by_tag(json: &Value) -> BTreeMap<String, Vec<Op<'_>>> {
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
    by_tag
}

/// The tags to show, with their descriptions: the document's tags in its
/// order, then any other by name; a tag without an operation is left out.
fn tag_order(json: &Value, by_tag: &BTreeMap<String, Vec<Op>>) -> Vec<(String, String)> {
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
    order
}

fn operation_anchor(prefix: &str, op: &Op) -> String {
    match op.op.get("operationId").and_then(Value::as_str) {
        Some(id) => anchor(prefix, id),
        None => anchor(prefix, &format!("{}-{}", op.method, op.path)),
    }
}

/// One operation's section: its heading, then its parameters, request body
/// and responses.
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
    render_parameters(doc, prefix, op, out);
    if let Some(rb) = o.get("requestBody").map(|rb| resolve(doc, rb)) {
        render_request_body(doc, prefix, rb, out);
    }
    render_responses(
        doc,
        prefix,
        obj(o.get("responses").unwrap_or(&Value::Null)),
        out,
    );
    out.push_str("</section>");
}

/// The path's parameters, then the operation's: a table, if there are any.
fn render_parameters(doc: &Value, prefix: &str, op: &Op, out: &mut String) {
    let params: Vec<&Value> = op
        .shared
        .iter()
        .chain(
            op.op
                .get("parameters")
                .and_then(Value::as_array)
                .map(Vec::as_slice)
                .unwrap_or_default(),
        )
        .map(|p| resolve(doc, p))
        .collect();
    if params.is_empty() {
        return;
    }
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

/// A request body: its media types and their schemas, and one example, the
/// first the document gives, so a reader can start from it.
fn render_request_body(doc: &Value, prefix: &str, rb: &Value, out: &mut String) {
    let required = if rb.get("required").and_then(Value::as_bool) == Some(true) {
        "required"
    } else {
        "optional"
    };
    let _ = write!(out, "<p>Request body ({required}):</p><ul>");
    let content = obj(rb.get("content").unwrap_or(&Value::Null));
    for (media, c) in content {
        let schema = c.get("schema").unwrap_or(&Value::Null);
        let _ = write!(
            out,
            "<li><code>{}</code>: {}</li>",
            esc(media),
            type_label(prefix, schema)
        );
    }
    out.push_str("</ul>");
    let example = content.values().find_map(|c| {
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

/// The responses by status: a table, if there are any.
fn render_responses(
    doc: &Value,
    prefix: &str,
    responses: &serde_json::Map<String, Value>,
    out: &mut String,
) {
    if responses.is_empty() {
        return;
    }
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

/// A named schema's section: its type, and its fields in a table.
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
