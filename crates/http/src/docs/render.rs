//! Markdown to HTML (pulldown-cmark, not a hand-written conversion), with
//! GitHub-style heading ids, so that `doc_url`s (`/docs/errors#<code>`) and
//! the book's own links (`payments.md#payment-lifecycle`) land where they
//! point. Links are rewritten by the caller: the served pages and the static
//! book resolve a chapter's file name differently.

use pulldown_cmark::{CowStr, Event, HeadingLevel, Options, Parser, Tag, TagEnd, html};

/// The pages' only style sheet (the book's and the API reference's),
/// allowed by hash in their CSP.
pub const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:960px;margin:0 auto;padding:16px;line-height:1.5;color:#1d2330}\
table{border-collapse:collapse;display:block;overflow-x:auto}td,th{border:1px solid #c5cad3;padding:4px 8px;vertical-align:top}\
code{background:#f1f3f6;padding:0 3px;border-radius:3px}pre{background:#f1f3f6;padding:12px;overflow-x:auto}\
tr:target,:target{background:#fff4c2}.op{border-top:1px solid #c5cad3;margin-top:24px}\
td p{margin:0}.method{font-family:monospace;font-weight:bold;background:#1d2330;color:#fff;padding:1px 6px;border-radius:3px}";

/// `Known and unknown outcomes (the money rule)` → `known-and-unknown-outcomes-the-money-rule`.
pub fn slug(text: &str) -> String {
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

fn options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH
}

/// Every link's destination in `markdown` (links and images), as written.
#[cfg(test)]
pub fn links(markdown: &str) -> Vec<String> {
    Parser::new_ext(markdown, options())
        .filter_map(|e| match e {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => {
                Some(dest_url.to_string())
            }
            _ => None,
        })
        .collect()
}

/// `markdown` as HTML: headings with ids, and each link's destination passed
/// through `resolve` — `Some` is the new destination, `None` leaves only the
/// link's text (a page the reader cannot reach from here).
pub fn body(markdown: &str, resolve: &dyn Fn(&str) -> Option<String>) -> String {
    let mut events: Vec<Event> = Vec::new();
    let mut heading: Option<(HeadingLevel, Vec<Event>)> = None;
    let mut seen = std::collections::HashMap::<String, usize>::new();
    let mut dropped_link = false;
    for event in Parser::new_ext(markdown, options()) {
        let event = match event {
            Event::Start(Tag::Link {
                link_type,
                dest_url,
                title,
                id,
            }) => match resolve(&dest_url) {
                Some(to) => Event::Start(Tag::Link {
                    link_type,
                    dest_url: CowStr::from(to),
                    title,
                    id,
                }),
                None => {
                    dropped_link = true;
                    continue;
                }
            },
            Event::End(TagEnd::Link) if dropped_link => {
                dropped_link = false;
                continue;
            }
            e => e,
        };
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
    let mut out = String::new();
    html::push_html(&mut out, events.into_iter());
    out
}

/// Every `id="…"` in rendered HTML: the anchors a link may point at.
#[cfg(test)]
pub fn ids(html: &str) -> Vec<&str> {
    html.match_indices("id=\"")
        .filter_map(|(i, _)| {
            let rest = &html[i + 4..];
            rest.find('"').map(|end| &rest[..end])
        })
        .collect()
}

/// The first heading's text: a chapter's title.
pub fn title(markdown: &str) -> String {
    markdown
        .lines()
        .find_map(|l| l.strip_prefix("# "))
        .unwrap_or("Mobile Money Collection Service")
        .replace('`', "")
}

/// A whole page: `nav` (HTML) above the body, the one style sheet inline.
pub fn page(title: &str, nav: &str, body: &str) -> String {
    let title = html_escape(title);
    format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <title>{title}</title><style>{STYLE}</style></head>\
         <body><main><p>{nav}</p>{body}</main></body></html>"
    )
}

pub fn html_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headings_get_ids_and_error_rows_keep_their_anchors() {
        let html = body(
            "# Error codes\n\n| Code | HTTP |\n|---|---|\n| <a id=\"invalid_phone\"></a>`invalid_phone` | 400 |\n\n## Error codes\n",
            &|d| Some(d.to_string()),
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
        assert_eq!(
            ids(&html),
            ["error-codes", "invalid_phone", "error-codes-1"]
        );
    }

    #[test]
    fn links_are_rewritten_or_left_as_text() {
        let md = "See [errors](errors.md#x) and [the design](architecture.md), or [out](https://e.test/).";
        let html = body(md, &|d| {
            (!d.starts_with("architecture")).then(|| d.replace("errors.md", "/docs/errors"))
        });
        assert!(
            html.contains(r##"<a href="/docs/errors#x">errors</a>"##),
            "{html}"
        );
        assert!(html.contains(" and the design, or "), "{html}");
        assert!(
            html.contains(r#"<a href="https://e.test/">out</a>"#),
            "{html}"
        );
        assert_eq!(
            links(md),
            ["errors.md#x", "architecture.md", "https://e.test/"]
        );
    }
}
