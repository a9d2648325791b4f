//! The whole book (`docs/*.md`) as static HTML (`mmc docs --out DIR`,
//! `make docs`): one page per chapter, `README.md` as `index.html`, links
//! between chapters made links between pages, and the book's other files
//! (the Grafana dashboard) copied beside them. Read from disk, so a chapter
//! added to `docs/` is in the next build of the book without a new binary.

use std::io;
use std::path::{Path, PathBuf};

use super::render;

/// The page a chapter's file becomes.
fn page_name(md: &str) -> String {
    match md.strip_suffix(".md") {
        Some("README") => "index.html".to_string(),
        Some(stem) => format!("{stem}.html"),
        None => md.to_string(),
    }
}

/// A link as the static book writes it: outside the book (`../SECURITY.md`,
/// source files) only text, since the book is read apart from the repository.
fn book_link(dest: &str) -> Option<String> {
    if dest.starts_with('#') || dest.starts_with('/') || dest.contains("://") {
        return Some(dest.to_string());
    }
    if dest.starts_with("../") {
        return None;
    }
    Some(match dest.split_once('#') {
        Some((path, fragment)) if path.ends_with(".md") => {
            format!("{}#{fragment}", page_name(path))
        }
        _ if dest.ends_with(".md") => page_name(dest),
        _ => dest.to_string(),
    })
}

/// Renders every chapter under `src` into `out`; returns the pages written.
pub fn write(src: &Path, out: &Path) -> io::Result<Vec<PathBuf>> {
    let mut pages = Vec::new();
    copy_tree(src, out, &mut |from, to| {
        if from.extension().is_some_and(|e| e == "md") {
            let markdown = std::fs::read_to_string(from)?;
            let name = from
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            let to = to.with_file_name(page_name(name));
            let body = render::body(&markdown, &book_link);
            let nav = "<a href=\"index.html\">Contents</a>";
            std::fs::write(&to, render::page(&render::title(&markdown), nav, &body))?;
            pages.push(to);
        } else {
            std::fs::copy(from, to)?;
        }
        Ok(())
    })?;
    pages.sort();
    Ok(pages)
}

/// Walks `src`, calling `each(file, its place under out)`, directories made.
fn copy_tree(
    src: &Path,
    out: &Path,
    each: &mut dyn FnMut(&Path, &Path) -> io::Result<()>,
) -> io::Result<()> {
    std::fs::create_dir_all(out)?;
    for entry in std::fs::read_dir(src)? {
        let path = entry?.path();
        let to = out.join(path.file_name().unwrap_or_default());
        if path.is_dir() {
            copy_tree(&path, &to, each)?;
        } else {
            each(&path, &to)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_book_renders_every_chapter_with_links_between_pages() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs");
        let out = tempfile::tempdir().unwrap();
        let pages = write(&src, out.path()).unwrap();
        let chapters = std::fs::read_dir(&src)
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .path()
                    .extension()
                    .is_some_and(|x| x == "md")
            })
            .count();
        assert_eq!(pages.len(), chapters);
        let index = std::fs::read_to_string(out.path().join("index.html")).unwrap();
        assert!(index.contains("<a href=\"errors.html\">"), "{index}");
        let security = std::fs::read_to_string(out.path().join("security.html")).unwrap();
        assert!(!security.contains("href=\"../SECURITY.md"), "{security}");
        assert!(
            out.path()
                .join("monitoring/grafana-dashboard.json")
                .is_file()
        );
        assert_eq!(
            book_link("fleet.md#walkthrough").unwrap(),
            "fleet.html#walkthrough"
        );
        assert_eq!(book_link("README.md").unwrap(), "index.html");
    }
}
