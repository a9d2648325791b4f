//! `mmc adapters new NAME --lang LANG`: a new adapter's starting point in a
//! checkout of this repository, a working example operator, Acme (initiate,
//! status and a signed callback over a made-up but coherent wire format),
//! renamed NAME:
//!
//! - `--lang rust`: a crate under `components/NAME` on the adapter kit;
//! - `--lang python`: `components/NAME/app.py` and `transformers.py` on the
//!   Python adapter kit, built by componentize-py;
//!
//! and, whatever the language, its fake under `tests/support/fakes/NAME.rs`
//! on the fake-operator kit (the fake speaks the provider's wire format,
//! not the adapter's language) and `tests/adapters/NAME.rs` with its
//! registry entry and a test. The files the adapter must be listed in (the
//! workspace and the Makefile's components, or the Makefile's Python
//! adapters; the fakes, the adapter tests, the registry) are edited when
//! they are found as this repository has them; anything not done is
//! returned as a next step.
//!
//! The templates are the example operator itself (`scaffold/rust/`,
//! `scaffold/python/`, and the shared `scaffold/fake.rs` and
//! `scaffold/test.rs`), its name `acme` replaced by NAME; the fake template
//! is compiled with the other fakes, so it cannot rot.

use std::path::{Path, PathBuf};

/// The languages an adapter can be scaffolded in. Another one is a variant
/// here, its `--lang` name in `from_str` and a module like [`rust`] whose
/// `plan` gives its files, listings and next steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    /// A Rust crate on `mmc-adapter-kit`.
    Rust,
    /// `app.py` on the Python adapter kit (`crates/adapter-kit/python`).
    Python,
}

impl std::str::FromStr for Lang {
    type Err = ScaffoldError;

    fn from_str(s: &str) -> Result<Lang, ScaffoldError> {
        match s {
            "rust" => Ok(Lang::Rust),
            "python" => Ok(Lang::Python),
            other => Err(ScaffoldError::UnknownLanguage(other.to_string())),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ScaffoldError {
    #[error("unknown language {0:?}: adapters can be scaffolded in rust or python")]
    UnknownLanguage(String),
    #[error(
        "invalid adapter name {0:?}: lowercase ASCII letters and digits, starting with a letter"
    )]
    InvalidName(String),
    #[error("{0} exists already: nothing was written")]
    Exists(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// What a scaffold did, and what is left to the engineer.
#[derive(Debug, Default)]
pub struct Scaffolded {
    pub created: Vec<PathBuf>,
    pub edited: Vec<PathBuf>,
    pub next_steps: Vec<String>,
}

/// The name the templates are written with.
const TEMPLATE_NAME: &str = "acme";

/// A file the scaffold creates: its path under the root and its text.
struct NewFile {
    path: String,
    text: String,
}

/// A line the scaffold adds to a file the repository has: after the last
/// line that `after` matches, unless the line is there already.
struct Listing {
    path: &'static str,
    after: fn(&str) -> bool,
    line: String,
    /// What to do by hand when the file or the place is not found.
    by_hand: String,
}

/// Scaffolds adapter `name` in `lang` under `root` (a checkout of this
/// repository, or any directory: listings not found become next steps).
pub fn new_adapter(root: &Path, name: &str, lang: Lang) -> Result<Scaffolded, ScaffoldError> {
    if !valid_name(name) {
        return Err(ScaffoldError::InvalidName(name.into()));
    }
    let (files, listings, mut next_steps) = match lang {
        Lang::Rust => rust::plan(name),
        Lang::Python => python::plan(name),
    };
    for f in &files {
        let path = root.join(&f.path);
        if path.exists() {
            return Err(ScaffoldError::Exists(path));
        }
    }
    let mut done = Scaffolded::default();
    for f in files {
        let path = root.join(&f.path);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        std::fs::write(&path, f.text).map_err(io(&path))?;
        done.created.push(path);
    }
    for l in listings {
        let path = root.join(l.path);
        match add_line(&path, l.after, &l.line)? {
            true => done.edited.push(path),
            false => next_steps.push(l.by_hand),
        }
    }
    done.next_steps = next_steps;
    Ok(done)
}

/// Lowercase letters and digits, starting with a letter: one name for the
/// crate, the component file, its configuration, the fake's module and the
/// test module.
fn valid_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && name.len() <= 40
        // The example's own name: its fake is compiled as `fakes::acme`.
        && name != TEMPLATE_NAME
}

/// A template's text for adapter `name`: `acme`, `Acme` and `ACME` renamed.
fn render(template: &str, name: &str) -> String {
    let mut title = name.to_string();
    title[..1].make_ascii_uppercase();
    template
        .replace(TEMPLATE_NAME, name)
        .replace("Acme", &title)
        .replace("ACME", &name.to_ascii_uppercase())
}

/// Adds `line` after the last line `after` matches; `false` when the file or
/// such a line is missing. A line present already is left alone.
fn add_line(path: &Path, after: fn(&str) -> bool, line: &str) -> Result<bool, ScaffoldError> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(false);
    };
    if text.lines().any(|l| l.trim() == line.trim()) {
        return Ok(true);
    }
    let lines: Vec<&str> = text.lines().collect();
    let Some(at) = lines.iter().rposition(|l| after(l)) else {
        return Ok(false);
    };
    let mut out: Vec<&str> = lines[..=at].to_vec();
    out.push(line);
    out.extend_from_slice(&lines[at + 1..]);
    let mut joined = out.join("\n");
    if text.ends_with('\n') {
        joined.push('\n');
    }
    std::fs::write(path, joined).map_err(io(path))?;
    Ok(true)
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> ScaffoldError + '_ {
    move |source| ScaffoldError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The fake and the test, whatever the adapter's language.
const FAKE: &str = include_str!("templates/fake.rs");
const TEST: &str = include_str!("templates/test.rs");

/// The fake and the test of adapter `name`.
fn fake_and_test(name: &str) -> [NewFile; 2] {
    [
        NewFile {
            path: format!("tests/support/fakes/{name}.rs"),
            text: render(FAKE, name),
        },
        NewFile {
            path: format!("tests/adapters/{name}.rs"),
            text: render(TEST, name),
        },
    ]
}

/// Where the fake, the test and the registry entry are listed.
fn test_listings(name: &str) -> [Listing; 3] {
    [
        Listing {
            path: "tests/support/fakes/mod.rs",
            after: |l| l.starts_with("pub mod "),
            line: format!("pub mod {name};"),
            by_hand: format!("declare the fake: `pub mod {name};` in tests/support/fakes/mod.rs"),
        },
        Listing {
            path: "tests/adapters/main.rs",
            after: |l| l.starts_with("mod ") && l.ends_with(';'),
            line: format!("mod {name};"),
            by_hand: format!("declare the tests: `mod {name};` in tests/adapters/main.rs"),
        },
        Listing {
            path: "tests/adapters/registry.rs",
            after: |l| l.trim_start().starts_with("&crate::") && l.ends_with("::ENTRY,"),
            line: format!("    &crate::{name}::ENTRY,"),
            by_hand: format!(
                "register it: `&crate::{name}::ENTRY,` in ADAPTERS (tests/adapters/registry.rs)"
            ),
        },
    ]
}

/// A Rust adapter on the adapter kit.
mod rust {
    use super::{Listing, NewFile, fake_and_test, render, test_listings};

    const CARGO_TOML: &str = include_str!("templates/rust/Cargo.toml.tmpl");
    const LIB: &str = include_str!("templates/rust/lib.rs");
    const TRANSFORMERS: &str = include_str!("templates/rust/transformers.rs");

    pub(super) fn plan(name: &str) -> (Vec<NewFile>, Vec<Listing>, Vec<String>) {
        let file = |path: String, template: &str| NewFile {
            path,
            text: render(template, name),
        };
        let mut files = vec![
            file(format!("components/{name}/Cargo.toml"), CARGO_TOML),
            file(format!("components/{name}/src/lib.rs"), LIB),
            file(
                format!("components/{name}/src/transformers.rs"),
                TRANSFORMERS,
            ),
        ];
        files.extend(fake_and_test(name));
        let mut listings = vec![
            Listing {
                path: "Cargo.toml",
                after: |l| l.trim_start().starts_with("\"components/") && l.ends_with("\","),
                line: format!("    \"components/{name}\","),
                by_hand: format!("add \"components/{name}\" to the workspace's members"),
            },
            Listing {
                path: "Makefile",
                after: |l| l.starts_with("COMPONENTS :="),
                line: format!("COMPONENTS += {name}"),
                by_hand: format!("add {name} to the Makefile's COMPONENTS"),
            },
        ];
        listings.extend(test_listings(name));
        let next_steps = vec![
            format!("build it: cargo build --profile components --target wasm32-wasip2 -p {name}"),
            format!(
                "check the contract: mmc adapters test target/wasm32-wasip2/components/{name}.wasm"
            ),
            format!(
                "replace Acme's wire format with your provider's in components/{name}/src/transformers.rs and tests/support/fakes/{name}.rs (docs/adapters.md)"
            ),
        ];
        (files, listings, next_steps)
    }
}

/// A Python adapter on the Python adapter kit, built by componentize-py.
mod python {
    use super::{Listing, NewFile, fake_and_test, render, test_listings};

    const APP: &str = include_str!("templates/python/app.py");
    const TRANSFORMERS: &str = include_str!("templates/python/transformers.py");

    pub(super) fn plan(name: &str) -> (Vec<NewFile>, Vec<Listing>, Vec<String>) {
        let file = |path: String, template: &str| NewFile {
            path,
            text: render(template, name),
        };
        let mut files = vec![
            file(format!("components/{name}/app.py"), APP),
            file(format!("components/{name}/transformers.py"), TRANSFORMERS),
        ];
        files.extend(fake_and_test(name));
        let mut listings = vec![Listing {
            path: "Makefile",
            after: |l| l.starts_with("PY_ADAPTERS :=") || l.starts_with("PY_ADAPTERS +="),
            line: format!("PY_ADAPTERS += {name}"),
            by_hand: format!("add {name} to the Makefile's PY_ADAPTERS"),
        }];
        listings.extend(test_listings(name));
        let next_steps = vec![
            format!(
                "build it: make python-adapters (target/python-components/{name}.wasm, componentize-py in target/venv)"
            ),
            format!("check the contract: mmc adapters test target/python-components/{name}.wasm"),
            format!(
                "replace Acme's wire format with your provider's in components/{name}/transformers.py and tests/support/fakes/{name}.rs (docs/adapters.md)"
            ),
        ];
        (files, listings, next_steps)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_one_lowercase_word() {
        for good in ["zedpay", "kkiapay", "pay2"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "", "acme", "Zed", "2pay", "acme-pay", "acme_pay", "../x", "a b",
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn an_unknown_language_is_refused_by_name() {
        let err = "cobol".parse::<Lang>().unwrap_err();
        assert!(err.to_string().contains("\"cobol\""), "{err}");
        assert_eq!("rust".parse::<Lang>().unwrap(), Lang::Rust);
        assert_eq!("python".parse::<Lang>().unwrap(), Lang::Python);
    }

    #[test]
    fn every_template_is_renamed_whole() {
        let (mut files, mut listings, _) = rust::plan("zedpay");
        let (python_files, python_listings, _) = python::plan("zedpay");
        files.extend(python_files);
        listings.extend(python_listings);
        for f in &files {
            assert!(!f.text.contains("acme"), "{} keeps acme", f.path);
            assert!(!f.text.contains("Acme"), "{} keeps Acme", f.path);
            assert!(!f.text.contains("ACME"), "{} keeps ACME", f.path);
        }
        let fake = &files
            .iter()
            .find(|f| f.path.ends_with("fakes/zedpay.rs"))
            .unwrap()
            .text;
        assert!(fake.contains("pub type FakeZedpay = FakeServer<Zedpay>;"));
        assert!(
            listings
                .iter()
                .any(|l| l.line == "    &crate::zedpay::ENTRY,")
        );
        assert!(listings.iter().any(|l| l.line == "PY_ADAPTERS += zedpay"));
    }

    #[test]
    fn a_python_adapter_is_listed_among_the_python_adapters() {
        let root = tempfile::tempdir().unwrap();
        let makefile = "COMPONENTS := collect wave\nPY_ADAPTERS := cinetpay\nall:\n";
        std::fs::write(root.path().join("Makefile"), makefile).unwrap();
        let done = new_adapter(root.path(), "zedpay", Lang::Python).unwrap();
        let created: Vec<_> = done
            .created
            .iter()
            .map(|p| p.strip_prefix(root.path()).unwrap().to_str().unwrap())
            .collect();
        assert_eq!(
            created,
            [
                "components/zedpay/app.py",
                "components/zedpay/transformers.py",
                "tests/support/fakes/zedpay.rs",
                "tests/adapters/zedpay.rs",
            ]
        );
        let makefile = std::fs::read_to_string(root.path().join("Makefile")).unwrap();
        assert!(
            makefile.contains("PY_ADAPTERS := cinetpay\nPY_ADAPTERS += zedpay\n"),
            "{makefile}"
        );
        // Not a crate: the workspace is not a next step.
        assert!(!done.next_steps.iter().any(|s| s.contains("workspace")));
        assert!(done.next_steps.iter().any(|s| s.contains("ADAPTERS")));
    }

    #[test]
    fn scaffolding_writes_the_files_and_lists_the_adapter() {
        let root = tempfile::tempdir().unwrap();
        let members = "[workspace]\nmembers = [\n    \"host\",\n    \"components/wave\",\n]\n";
        std::fs::write(root.path().join("Cargo.toml"), members).unwrap();
        let done = new_adapter(root.path(), "zedpay", Lang::Rust).unwrap();
        assert_eq!(done.created.len(), 5);
        let cargo = std::fs::read_to_string(root.path().join("Cargo.toml")).unwrap();
        assert!(
            cargo.contains("    \"components/wave\",\n    \"components/zedpay\",\n]"),
            "{cargo}"
        );
        // No Makefile, fakes or registry here: each is a next step.
        assert!(done.next_steps.iter().any(|s| s.contains("COMPONENTS")));
        assert!(done.next_steps.iter().any(|s| s.contains("ADAPTERS")));
        // A second run writes nothing.
        let again = new_adapter(root.path(), "zedpay", Lang::Rust).unwrap_err();
        assert!(matches!(again, ScaffoldError::Exists(_)), "{again}");
    }
}
