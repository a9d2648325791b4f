//! `/docs`: the README rendered to HTML (pulldown-cmark, not a hand-written
//! conversion), so that every error's `doc_url` (`/docs#<code>`) lands on its
//! row in a browser. Headings get GitHub-style ids, so the README's own
//! links (`#known-and-unknown-outcomes`) work too. Rendered once.

use std::sync::OnceLock;

use pulldown_cmark::{Event, HeadingLevel, Options, Parser, Tag, TagEnd, html};

/// The pages' only style sheet (this one's and the API reference's),
/// allowed by hash in their CSP.
pub const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:960px;margin:0 auto;padding:16px;line-height:1.5;color:#1d2330}\
table{border-collapse:collapse;display:block;overflow-x:auto}td,th{border:1px solid #c5cad3;padding:4px 8px;vertical-align:top}\
code{background:#f1f3f6;padding:0 3px;border-radius:3px}pre{background:#f1f3f6;padding:12px;overflow-x:auto}\
tr:target,:target{background:#fff4c2}.op{border-top:1px solid #c5cad3;margin-top:24px}\
td p{margin:0}.method{font-family:monospace;font-weight:bold;background:#1d2330;color:#fff;padding:1px 6px;border-radius:3px}";

/// The rendered page.
pub fn page() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| render(crate::README))
}

/// Its Content-Security-Policy: nothing runs, nothing is loaded, nothing frames it.
pub fn content_security_policy() -> String {
    use base64::Engine;
    use sha2::Digest;
    let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(STYLE));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )
}

/// `Known and unknown outcomes (the money rule)` → `known-and-unknown-outcomes-the-money-rule`.
fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            ' ' => Some('-'),
            _ => None,
        })
        .collect()
}

fn render(markdown: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    // Headings: collect their text first, then emit them with an id.
    let mut events: Vec<Event> = Vec::new();
    let mut heading: Option<(HeadingLevel, Vec<Event>)> = None;
    let mut seen = std::collections::HashMap::<String, usize>::new();
    for event in Parser::new_ext(markdown, options) {
        match (&mut heading, event) {
            (None, Event::Start(Tag::Heading { level, .. })) => heading = Some((level, Vec::new())),
            (Some(_), Event::End(TagEnd::Heading(_))) => {
                let (level, inner) = heading.take().expect("in a heading");
                let text: String = inner
                    .iter()
                    .filter_map(|e| match e {
                        Event::Text(t) | Event::Code(t) => Some(t.as_ref()),
                        _ => None,
                    })
                    .collect();
                let mut id = slug(&text);
                let n = seen.entry(id.clone()).or_insert(0);
                if *n > 0 {
                    id = format!("{id}-{n}");
                }
                *n += 1;
                let mut inner_html = String::new();
                html::push_html(&mut inner_html, inner.into_iter());
                events.push(Event::Html(
                    format!("<{level} id=\"{id}\">{inner_html}</{level}>\n").into(),
                ));
            }
            (Some((_, inner)), e) => inner.push(e),
            (None, e) => events.push(e),
        }
    }
    let mut body = String::new();
    html::push_html(&mut body, events.into_iter());
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>Mobile Money Collection Service</title><style>{STYLE}</style></head>\
         <body><main><p><a href=\"/docs/api\">API reference</a>: every operation, rendered from the OpenAPI documents</p>{body}</main></body></html>"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_get_ids_and_error_rows_keep_their_anchors() {
        let html = render(
            "# Error codes\n\n| Code | HTTP |\n|---|---|\n| <a id=\"invalid_phone\"></a>`invalid_phone` | 400 |\n\n## Error codes\n",
        );
        assert!(
            html.contains(r#"<h1 id="error-codes">Error codes</h1>"#),
            "{html}"
        );
        assert!(html.contains(r#"<h2 id="error-codes-1">"#), "{html}");
        assert!(
            html.contains(r#"<a id="invalid_phone"></a><code>invalid_phone</code>"#),
            "{html}"
        );
        assert_eq!(
            slug("Known and unknown outcomes (the money rule)"),
            "known-and-unknown-outcomes-the-money-rule"
        );
    }

    #[test]
    fn the_readme_renders_with_every_error_anchor() {
        let html = page();
        for code in ["phone_invalid", "operator_busy", "idempotency_key_reused"] {
            assert!(html.contains(&format!(r#"id="{code}""#)), "{code}");
        }
        assert!(!html.contains("<script"));
    }
}
