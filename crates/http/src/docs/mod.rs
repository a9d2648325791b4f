//! `/docs`: the merchant's chapters of the book in `docs/`, as HTML, compiled
//! into the binary so they are served offline. `/docs` is their index and
//! `/docs/<chapter>` each one (`/docs/errors#<code>` is every error's
//! `doc_url`). The chapters for operators of the service and adapter authors
//! are not served: `mmc docs` renders the whole book (`book`).

pub mod book;
mod render;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::sync::OnceLock;

pub use render::STYLE;

/// A chapter served under `/docs/<slug>`.
pub struct Chapter {
    pub slug: &'static str,
    pub markdown: &'static str,
}

macro_rules! chapter {
    ($slug:literal) => {
        Chapter {
            slug: $slug,
            markdown: include_str!(concat!("../../../../docs/", $slug, ".md")),
        }
    };
}

/// The merchant's guide, in reading order.
pub const SERVED: &[Chapter] = &[
    chapter!("keys"),
    chapter!("payments"),
    chapter!("idempotency"),
    chapter!("webhooks"),
    chapter!("errors"),
    chapter!("test-numbers"),
    chapter!("going-live"),
    chapter!("bulk-payouts"),
    chapter!("reconciliation"),
    chapter!("legacy"),
    chapter!("api-reference"),
    chapter!("console"),
];

/// The errors chapter: the target of every `doc_url`.
pub const ERRORS: &str = "errors";

const NAV: &str = "<a href=\"/docs\">Guide</a> · <a href=\"/docs/api\">API reference</a>: every operation, rendered from the OpenAPI documents";

/// A link as a served page writes it: a chapter's file becomes its path,
/// anything not served (operators' chapters, source files) only text.
fn served_link(dest: &str) -> Option<String> {
    if dest.starts_with('#') || dest.starts_with('/') || dest.contains("://") {
        return Some(dest.to_string());
    }
    let (path, fragment) = match dest.split_once('#') {
        Some((p, f)) => (p, format!("#{f}")),
        None => (dest, String::new()),
    };
    let stem = path.trim_start_matches("./").strip_suffix(".md")?;
    if stem == "README" {
        return Some(format!("/docs{fragment}"));
    }
    SERVED
        .iter()
        .any(|c| c.slug == stem)
        .then(|| format!("/docs/{stem}{fragment}"))
}

/// The index page (`/docs`).
pub fn index() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| {
        let mut list = String::from("<ol>");
        for c in SERVED {
            list.push_str(&format!(
                "<li><a href=\"/docs/{}\">{}</a></li>",
                c.slug,
                render::html_escape(&render::title(c.markdown))
            ));
        }
        list.push_str("</ol>");
        let body = format!(
            "<h1 id=\"mobile-money-collection-service\">Mobile Money Collection Service</h1>\
             <p>The merchant's guide: collecting payments, webhooks, errors, testing and going live.</p>{list}"
        );
        render::page("Mobile Money Collection Service", NAV, &body)
    })
}

/// A served chapter's page, by its slug.
pub fn chapter(slug: &str) -> Option<&'static str> {
    static PAGES: OnceLock<BTreeMap<&'static str, String>> = OnceLock::new();
    PAGES
        .get_or_init(|| {
            SERVED
                .iter()
                .map(|c| {
                    let body = render::body(c.markdown, &served_link);
                    (c.slug, render::page(&render::title(c.markdown), NAV, &body))
                })
                .collect()
        })
        .get(slug)
        .map(String::as_str)
}

/// The pages' Content-Security-Policy: nothing runs, nothing is loaded,
/// nothing frames them.
pub fn content_security_policy() -> String {
    use base64::Engine;
    use sha2::Digest;
    let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(STYLE));
    format!(
        "default-src 'none'; style-src 'sha256-{hash}'; img-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    )
}
