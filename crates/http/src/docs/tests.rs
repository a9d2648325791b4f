//! The book's promises, checked against the sources: every error code has
//! its anchored row (the target of its `doc_url`), and every link in
//! README.md and docs/ resolves.

use super::*;

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
            .join("../..")
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
/// shape has its row and anchor in `/docs/errors` (its `doc_url`), found by
/// reading the sources of the components and the host, so a new code
/// without a row fails here. Every `/docs/<chapter>#…` a source links to
/// exists, and every legacy code has its row in the legacy table.
#[test]
fn every_error_code_the_code_emits_has_its_anchor() {
    let html = chapter(ERRORS).expect("the errors chapter");
    let mut current = std::collections::BTreeMap::<String, String>::new();
    let mut legacy = std::collections::BTreeMap::<String, String>::new();
    let mut fragments = Vec::new();
    for dir in [
        "components/collect/src",
        "components/bulk/src",
        "crates",
        "host/src",
    ] {
        for (path, src) in sources(dir) {
            for code in current_codes(&src) {
                current.insert(code.to_string(), path.display().to_string());
            }
            if path.ends_with("crates/http/src/errors.rs") {
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
        for rest in each_after(&src, "/docs/") {
            let word = |s: &str| {
                let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'));
                s[..end.unwrap_or(s.len())].to_string()
            };
            let page = word(rest);
            if let Some(fragment) = rest[page.len()..].strip_prefix('#') {
                fragments.push((page, word(fragment)));
            }
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
        .filter(|(code, _)| !html.contains(&format!("<a id=\"{code}\"></a><code>{code}</code>")))
        .map(|(code, path)| format!("{code} ({path})"))
        .collect();
    assert!(
        missing.is_empty(),
        "no row with an anchor in docs/errors.md: {missing:?}"
    );
    let migrating = (
        "legacy".to_string(),
        "migrating-from-the-legacy-generation".to_string(),
    );
    assert!(fragments.contains(&migrating), "{fragments:?}");
    for (page, fragment) in &fragments {
        let target = chapter(page).unwrap_or_else(|| panic!("/docs/{page}"));
        assert!(
            target.contains(&format!("id=\"{fragment}\"")),
            "/docs/{page}#{fragment}"
        );
    }
    let errors = SERVED.iter().find(|c| c.slug == ERRORS).unwrap().markdown;
    let table = errors
        .split_once("Legacy generation (`{\"error\": \"<message>\", \"code\": \"<code>\"}`):")
        .expect("the legacy table")
        .1;
    let table = &table[..table.find("\n## ").unwrap_or(table.len())];
    let missing: Vec<&String> = legacy
        .keys()
        .filter(|code| !table.contains(&format!("\n| `{code}` |")))
        .collect();
    assert!(
        missing.is_empty(),
        "not in docs/errors.md's legacy table: {missing:?}"
    );
}

#[test]
fn the_served_chapters_render_with_every_error_anchor_and_no_script() {
    let html = chapter(ERRORS).unwrap();
    for code in ["phone_invalid", "operator_busy", "idempotency_key_reused"] {
        assert!(html.contains(&format!(r#"id="{code}""#)), "{code}");
    }
    for c in SERVED {
        let page = chapter(c.slug).unwrap();
        assert!(!page.contains("<script"), "{}", c.slug);
        assert!(index().contains(&format!("<a href=\"/docs/{}\">", c.slug)));
        // A served page links only to served pages (or outside the book).
        for (i, _) in page.match_indices("href=\"") {
            let href = &page[i + 6..];
            let href = &href[..href.find('"').unwrap()];
            assert!(
                href.starts_with("/docs") || href.starts_with('#') || href.contains("://"),
                "{}: {href}",
                c.slug
            );
        }
    }
    assert!(
        chapter("architecture").is_none(),
        "operators' chapters are not served"
    );
}

/// The files the link check reads: README.md and every Markdown file under
/// docs/, relative to the repository's root.
fn book_files() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = vec![root.join("README.md")];
    let mut dirs = vec![root.join("docs")];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files
}

/// The anchors a Markdown file offers: its headings' ids as `/docs` and
/// the book compute them, and the `id="…"` of its inline HTML.
fn anchors(markdown: &str) -> Vec<String> {
    let html = render::body(markdown, &|d| Some(d.to_string()));
    render::ids(&html).into_iter().map(str::to_string).collect()
}

/// Every relative link in README.md and docs/ names a file that exists, and
/// its `#anchor`, if any, a heading or an anchor of that file. Links to the
/// web and to paths on a running server (`/docs/api`) are not checked here.
#[test]
fn every_link_in_the_readme_and_the_book_resolves() {
    let files = book_files();
    assert!(files.len() > 10, "{files:?}");
    let mut broken = Vec::new();
    let mut checked = 0;
    for file in &files {
        let markdown = std::fs::read_to_string(file).unwrap();
        for dest in render::links(&markdown) {
            if dest.starts_with('/') || dest.contains("://") || dest.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, fragment) = dest.split_once('#').unwrap_or((&dest, ""));
            let target = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !target.exists() {
                broken.push(format!("{}: {dest} (no such file)", file.display()));
                continue;
            }
            if fragment.is_empty() {
                continue;
            }
            let found = target.extension().is_some_and(|e| e == "md")
                && anchors(&std::fs::read_to_string(&target).unwrap())
                    .iter()
                    .any(|a| a == fragment);
            if !found {
                broken.push(format!("{}: {dest} (no such anchor)", file.display()));
            }
        }
    }
    assert!(checked > 50, "the check found the links: {checked}");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The check itself: a missing file and a missing anchor are both found.
#[test]
fn the_link_check_finds_a_missing_anchor() {
    let ids = anchors("# Payments\n\n## Create a payment\n\n<a id=\"x_y\"></a>\n");
    assert_eq!(ids, ["payments", "create-a-payment", "x_y"]);
    assert!(!ids.contains(&"create".to_string()));
}
