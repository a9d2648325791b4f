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

    /// Skips whitespace, then a string literal: (its text, what follows).
    fn literal(s: &str) -> Option<(&str, &str)> {
        let s = s.trim_start().strip_prefix('"')?;
        let end = s.find('"')?;
        Some((&s[..end], &s[end + 1..]))
    }

    /// Skips whitespace, then `token`.
    fn after<'a>(s: &'a str, token: &str) -> Option<&'a str> {
        s.trim_start().strip_prefix(token)
    }

    fn is_code(s: &str) -> bool {
        s.starts_with(|c: char| c.is_ascii_lowercase())
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    }

    /// What follows each `needle` in `src`.
    fn each_after<'a>(src: &'a str, needle: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        src.match_indices(needle)
            .map(move |(i, _)| &src[i + needle.len()..])
    }

    /// The error codes `src` passes to an error's constructor: the first
    /// literal argument of `ApiError::<fn>(…)` (after the status and type of
    /// `new`), a `code: "…"` field, a `("…_error", "…")` (type, code) pair.
    /// Messages are not codes: a code is one snake_case word.
    fn current_codes(src: &str) -> Vec<&str> {
        let mut codes = Vec::new();
        for rest in each_after(src, "ApiError::") {
            let Some(open) = rest.find('(') else { continue };
            if !rest[..open]
                .chars()
                .all(|c| c.is_ascii_lowercase() || c == '_')
            {
                continue;
            }
            let mut args = &rest[open + 1..];
            let status = args.trim_start();
            let digits = status.len()
                - status
                    .trim_start_matches(|c: char| c.is_ascii_digit())
                    .len();
            if digits > 0 {
                let Some(more) = after(&status[digits..], ",") else {
                    continue;
                };
                let Some((kind, more)) = literal(more) else {
                    continue;
                };
                let Some(more) = after(more, ",") else {
                    continue;
                };
                assert!(kind.ends_with("error"), "{kind}");
                args = more;
            }
            if let Some((code, _)) = literal(args).filter(|(c, _)| is_code(c)) {
                codes.push(code);
            }
        }
        // `ApiError { …, code: "…", … }` (a payment's `Failure { code }` is no HTTP error).
        for rest in each_after(src, "ApiError {") {
            let fields = &rest[..rest.find('}').unwrap_or(rest.len())];
            if let Some((code, _)) = fields
                .split_once("code:")
                .and_then(|(_, v)| literal(v))
                .filter(|(c, _)| is_code(c))
            {
                codes.push(code);
            }
        }
        for rest in each_after(src, "(\"") {
            let Some(end) = rest.find('"') else { continue };
            if !rest[..end].ends_with("_error") || !is_code(&rest[..end]) {
                continue;
            }
            if let Some((code, _)) = after(&rest[end + 1..], ",")
                .and_then(literal)
                .filter(|(c, more)| is_code(c) && more.trim_start().starts_with(')'))
            {
                codes.push(code);
            }
        }
        codes
    }

    /// The legacy generation's codes in `src`: `LegacyError::new(<status>,
    /// "…"`, and the `=> "…"` and `Some("…")` of its mappings (`mappings`:
    /// the legacy component's errors.rs and the host's `legacy_code`).
    fn legacy_codes(src: &str, mappings: bool) -> Vec<&str> {
        let mut codes = Vec::new();
        for rest in each_after(src, "LegacyError::new(") {
            let status = rest.trim_start();
            let digits = status.len()
                - status
                    .trim_start_matches(|c: char| c.is_ascii_digit())
                    .len();
            if let Some((code, _)) = after(&status[digits..], ",").and_then(literal) {
                codes.push(code);
            }
        }
        if mappings {
            for rest in each_after(src, "=>").chain(each_after(src, "Some(")) {
                let rest = after(rest, "{").unwrap_or(rest);
                if let Some((code, _)) = literal(rest).filter(|(c, _)| is_code(c)) {
                    codes.push(code);
                }
            }
        }
        codes
    }

    /// Every `.rs` file under `dir` (the repository's), without its tests.
    fn sources(dir: &str) -> Vec<(std::path::PathBuf, String)> {
        let mut files = Vec::new();
        let mut dirs = vec![
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("..")
                .join(dir),
        ];
        while let Some(d) = dirs.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let code = match text.find("#[cfg(test)]") {
                        Some(i) => text[..i].to_string(),
                        None => text,
                    };
                    files.push((path, code));
                }
            }
        }
        assert!(!files.is_empty(), "{dir}");
        files
    }

    /// Every error code the service can answer in the current generation's
    /// shape has its row and anchor in `/docs` (its `doc_url`), found by
    /// reading the sources of the components and the host, so a new code
    /// without a row fails here. Every `/docs#…` a source links to exists,
    /// and every legacy code has its row in the legacy table.
    #[test]
    fn every_error_code_the_code_emits_has_its_anchor() {
        let html = page();
        let mut current = std::collections::BTreeMap::<String, String>::new();
        let mut legacy = std::collections::BTreeMap::<String, String>::new();
        let mut fragments = Vec::new();
        for dir in ["components/collect/src", "components/bulk/src", "host/src"] {
            for (path, src) in sources(dir) {
                for code in current_codes(&src) {
                    current.insert(code.to_string(), path.display().to_string());
                }
                if path.ends_with("host/src/http/errors.rs") {
                    let start = src.find("fn legacy_code").expect("legacy_code");
                    let body = &src[start..start + src[start..].find("\n    }\n").unwrap()];
                    for code in legacy_codes(body, true) {
                        legacy.insert(code.to_string(), path.display().to_string());
                    }
                }
            }
        }
        for (path, src) in sources("components/legacy/src") {
            let mappings = path.ends_with("errors.rs");
            for code in legacy_codes(&src, mappings) {
                legacy.insert(code.to_string(), path.display().to_string());
            }
            for rest in each_after(&src, "/docs#") {
                let end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'));
                fragments.push(rest[..end.unwrap_or(rest.len())].to_string());
            }
        }
        // The scan finds what it must (a broken one would pass vacuously).
        for known in [
            "phone_invalid",
            "missing_api_key",
            "callback_unauthenticated",
            "invalid_csv",
            "adapter_not_found",
            "rate_limited",
        ] {
            assert!(
                current.contains_key(known),
                "{known} not found: {current:?}"
            );
        }
        assert!(current.len() > 60, "{current:?}");
        for known in ["invalid_operator", "otp_not_required", "forbidden"] {
            assert!(legacy.contains_key(known), "{known} not found: {legacy:?}");
        }
        let missing: Vec<String> = current
            .iter()
            .filter(|(code, _)| {
                !html.contains(&format!("<a id=\"{code}\"></a><code>{code}</code>"))
            })
            .map(|(code, path)| format!("{code} ({path})"))
            .collect();
        assert!(
            missing.is_empty(),
            "no row with an anchor in README.md's Error codes: {missing:?}"
        );
        assert!(fragments.contains(&"migrating-from-the-legacy-generation".to_string()));
        for fragment in &fragments {
            assert!(html.contains(&format!("id=\"{fragment}\"")), "#{fragment}");
        }
        let table = crate::README
            .split_once("Legacy generation (`{\"error\": \"<message>\", \"code\": \"<code>\"}`):")
            .expect("the legacy table")
            .1;
        let table = &table[..table.find("\n## ").unwrap()];
        let missing: Vec<&String> = legacy
            .keys()
            .filter(|code| !table.contains(&format!("\n| `{code}` |")))
            .collect();
        assert!(
            missing.is_empty(),
            "not in README.md's legacy table: {missing:?}"
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
