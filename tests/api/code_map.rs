//! docs/architecture.md's map is the territory: every crate of the workspace
//! and every top-level folder is on it, every module of the binary is named,
//! and every path or chapter the architecture names is in the tree.

use std::collections::BTreeSet;
use std::path::Path;

use crate::support::root as repo_root;

fn chapter() -> String {
    std::fs::read_to_string(repo_root().join("docs/architecture.md")).unwrap()
}

/// The fenced block under `## The map`.
fn map(chapter: &str) -> &str {
    let after = chapter
        .split_once("\n## The map\n")
        .expect("docs/architecture.md has a section `## The map`")
        .1;
    let section = after.split("\n## ").next().unwrap();
    let start = section.find("```").expect("the map is a fenced block") + 3;
    let end = start + section[start..].find("```").expect("the map's block ends");
    &section[start..end]
}

/// The workspace's members, as `Cargo.toml` lists them.
fn members() -> Vec<String> {
    let manifest: toml::Value =
        toml::from_str(&std::fs::read_to_string(repo_root().join("Cargo.toml")).unwrap()).unwrap();
    manifest["workspace"]["members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap().to_string())
        .collect()
}

/// The tree's top-level folders that git keeps.
fn top_level_folders() -> BTreeSet<String> {
    let listed = std::process::Command::new("git")
        .args(["ls-files"])
        .current_dir(repo_root())
        .output()
        .expect("git lists the tree");
    String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .filter_map(|f| f.split_once('/').map(|(top, _)| top.to_string()))
        .filter(|top| !top.starts_with('.'))
        .collect()
}

/// Words that look like paths in the tree: they start with a top-level folder.
fn paths_named(text: &str, tops: &BTreeSet<String>) -> BTreeSet<String> {
    text.split(|c: char| c.is_whitespace() || "`()[],;:*".contains(c))
        .filter(|w| w.split_once('/').is_some_and(|(top, _)| tops.contains(top)))
        .map(|w| w.trim_end_matches(['.', '\'', '"']).to_string())
        .filter(|w| !w.contains("://") && !w.contains('<') && !w.contains('…'))
        .collect()
}

#[test]
fn the_architecture_map_names_every_crate_and_folder_and_only_what_exists() {
    let root = repo_root();
    let chapter = chapter();
    let map = map(&chapter);
    let tops = top_level_folders();

    let unnamed: Vec<_> = members()
        .into_iter()
        .filter(|m| !map.contains(m.as_str()))
        .collect();
    assert!(
        unnamed.is_empty(),
        "crates of the workspace the map does not name by their path: {unnamed:?}"
    );

    let folders: Vec<_> = tops
        .iter()
        .filter(|top| !map.contains(&format!("{top}/")))
        .collect();
    assert!(
        folders.is_empty(),
        "top-level folders the map does not name (as `folder/`): {folders:?}"
    );

    // The binary's own modules, by their paths.
    let main = std::fs::read_to_string(root.join("host/src/main.rs")).unwrap();
    let modules: Vec<_> = main
        .lines()
        .filter_map(|l| l.strip_prefix("mod "))
        .map(|m| m.trim_end_matches(';'))
        .filter(|m| !map.contains(&format!("host/src/{m}")))
        .collect();
    assert!(
        modules.is_empty(),
        "modules of the binary the map does not name: {modules:?}"
    );

    let missing: Vec<_> = paths_named(&chapter, &tops)
        .into_iter()
        .filter(|p| !root.join(p).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "paths docs/architecture.md names that are not in the tree: {missing:?}"
    );

    // Chapters and notes it refers to: only files of the tree.
    let files = std::process::Command::new("git")
        .args(["ls-files"])
        .current_dir(&root)
        .output()
        .unwrap();
    let names: BTreeSet<String> = String::from_utf8(files.stdout)
        .unwrap()
        .lines()
        .filter_map(|f| Path::new(f).file_name())
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    let absent: Vec<_> = chapter
        .split(|c: char| c.is_whitespace() || "`()[],;:*#/".contains(c))
        .map(|w| w.trim_end_matches(['.', '\'', '"']))
        .filter(|w| w.ends_with(".md") && !names.contains(*w))
        .collect();
    assert!(
        absent.is_empty(),
        "documents docs/architecture.md refers to that are not in the tree: {absent:?}"
    );
}

/// Every source file of the host, under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A file a newcomer reads whole: none of the host's or the crates' is over
/// 600 lines (a folder of pieces, each named for what it holds, instead).
#[test]
fn no_source_file_of_the_host_or_its_crates_is_over_600_lines() {
    let mut files = Vec::new();
    rust_files(&repo_root().join("host/src"), &mut files);
    rust_files(&repo_root().join("crates"), &mut files);
    assert!(files.len() > 200, "the sources are found: {}", files.len());
    let long: Vec<String> = files
        .iter()
        .map(|f| (f, std::fs::read_to_string(f).unwrap().lines().count()))
        .filter(|(_, n)| *n > 600)
        .map(|(f, n)| format!("{} ({n} lines)", f.display()))
        .collect();
    assert!(long.is_empty(), "split these: {long:?}");
}

/// A crate a newcomer can hold in their head, and whose edits rebuild
/// little: none of the host's or the shared crates is over 6,000 lines.
#[test]
fn no_crate_of_the_host_or_the_shared_ones_is_over_6000_lines() {
    let root = repo_root();
    let mut places: Vec<std::path::PathBuf> = vec![root.join("host")];
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        places.push(entry.unwrap().path());
    }
    assert!(places.len() > 20, "the crates are found: {}", places.len());
    let large: Vec<String> = places
        .iter()
        .map(|p| {
            let mut files = Vec::new();
            rust_files(&p.join("src"), &mut files);
            let lines: usize = files
                .iter()
                .map(|f| std::fs::read_to_string(f).unwrap().lines().count())
                .sum();
            (p, lines)
        })
        .filter(|(_, n)| *n > 6000)
        .map(|(p, n)| format!("{} ({n} lines)", p.display()))
        .collect();
    assert!(large.is_empty(), "split these: {large:?}");
}
