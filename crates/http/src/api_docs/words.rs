//! How a piece of a document is shown: text escaped, a description's
//! Markdown made safe, anchors, `$ref`s followed, and a schema in a few
//! words with the constraints a reader needs.

use std::fmt::Write;

use pulldown_cmark::{Event, Options, Parser, html};
use serde_json::{Map, Value};

/// A JSON object, or an empty one.
pub(super) fn obj(v: &Value) -> &Map<String, Value> {
    static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
    v.as_object().unwrap_or_else(|| EMPTY.get_or_init(Map::new))
}

/// A string field of `v`, or empty.
pub(super) fn str_of<'a>(v: &'a Value, key: &str) -> &'a str {
    v.get(key).and_then(Value::as_str).unwrap_or_default()
}

pub(super) use crate::escape::html as esc;

/// An `id` attribute's value from any text: letters, digits, `-`, `_`.
pub(super) fn anchor(prefix: &str, name: &str) -> String {
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
pub(super) fn markdown(text: &str) -> String {
    let events = Parser::new_ext(text, Options::ENABLE_TABLES).map(|e| match e {
        Event::Html(h) | Event::InlineHtml(h) => Event::Text(h),
        e => e,
    });
    let mut out = String::new();
    html::push_html(&mut out, events);
    out
}

/// Follows a local `$ref` (`#/components/…`) once, or gives the value back.
pub(super) fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => r
            .strip_prefix('#')
            .and_then(|pointer| doc.pointer(pointer))
            .unwrap_or(v),
        None => v,
    }
}

/// A schema in a few words, with named schemas linked to their section.
pub(super) fn type_label(prefix: &str, schema: &Value) -> String {
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
pub(super) fn constraints(schema: &Value) -> String {
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
