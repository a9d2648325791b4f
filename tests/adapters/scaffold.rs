//! `mmc adapters new`: a scaffolded adapter, in Rust or in Python, builds,
//! passes the conformance kit (`mmc adapters test`) and takes a payment from
//! its fake to completion.
//!
//! The adapter is scaffolded into a directory of its own under
//! `target/scaffold/` (the repository is not touched). A Rust one is built
//! in a workspace there into `target/scaffold/target` (kept between runs,
//! so only the first run builds the dependencies); a Python one by the
//! pinned componentize-py of the venv under `target/` (`make python-tools`,
//! which `make test` runs). Its fake is the template's, compiled with the
//! other fakes as `fakes::acme`: the scaffold renames it, and the wire
//! format stays the same.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mmc_runtime::bindings::adapter_types::*;

use crate::support::fakes::Outcome;
use crate::support::fakes::acme::{self, FakeAcme};
use crate::support::*;
use crate::{Direct, initiate_request, operation};
use mmc_test_kit::service_test;

const NAME: &str = "zedpay";
/// The Python adapter's name.
const PY_NAME: &str = "zedpy";

/// A workspace holding only what the scaffold writes, its dependencies on
/// the repository's crates by absolute path, the repository's profiles and
/// lock file.
fn workspace(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).unwrap();
    let repo = std::fs::read_to_string(root().join("Cargo.toml")).unwrap();
    let profiles = &repo[repo.find("[profile.").expect("profiles")..];
    let crates = root().join("crates").canonicalize().unwrap();
    let manifest = format!(
        "[workspace]\nresolver = \"3\"\nmembers = [\n]\n\n\
         [workspace.package]\nversion = \"0.1.0\"\nedition = \"2024\"\nlicense = \"Apache-2.0\"\n\n\
         [workspace.dependencies]\n\
         mmc-adapter-kit = {{ path = {kit:?} }}\n\
         mmc-domain = {{ path = {domain:?} }}\n\
         serde = {{ version = \"1\", features = [\"derive\"] }}\n\
         serde_json = \"1\"\n\n{profiles}",
        kit = crates.join("adapter-kit"),
        domain = crates.join("domain"),
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::copy(root().join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
}

/// Runs the `mmc` binary with its data in `data` and the tests'
/// compiled-component cache: whether it succeeded, its output and its errors.
fn mmc(data: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mmc"))
        .arg("--data-dir")
        .arg(data)
        .args(args)
        .env("MMC_CACHE_DIR", cache_dir())
        .output()
        .unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

/// Builds the scaffolded component; returns its file.
fn build(dir: &Path, target: &Path) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .current_dir(dir)
        .args(["build", "--offline", "--profile", "components"])
        .args(["--target", "wasm32-wasip2", "-p", NAME])
        .env("CARGO_TARGET_DIR", target)
        .env_remove("RUSTFLAGS")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the scaffolded adapter does not build:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    target.join(format!("wasm32-wasip2/components/{NAME}.wasm"))
}

#[service_test]
async fn a_scaffolded_rust_adapter_builds_passes_the_kit_and_collects_from_its_fake() {
    let base = target_dir().join("scaffold");
    let dir = base.join("workspace");
    workspace(&dir);

    let data = base.join("data");
    let mmc = |args: &[&str]| mmc(&data, args);

    // An unknown language is refused by name; nothing is written.
    let root = dir.to_str().unwrap();
    let (ok, _, errors) = mmc(&["adapters", "new", NAME, "--lang", "cobol", "--root", root]);
    assert!(!ok && errors.contains("cobol"), "{errors}");
    assert!(!dir.join("components").exists());

    let (ok, text, errors) = mmc(&["adapters", "new", NAME, "--lang", "rust", "--root", root]);
    assert!(ok, "{errors}");
    let answer: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!(
        answer["created"].as_array().map(Vec::len),
        Some(5),
        "{answer}"
    );
    // This workspace lists no component yet: adding it is a next step.
    assert!(text.contains("workspace's members"), "{answer}");
    let manifest = dir.join("Cargo.toml");
    let listed = std::fs::read_to_string(&manifest).unwrap().replace(
        "members = [\n]",
        &format!("members = [\"components/{NAME}\"]"),
    );
    std::fs::write(&manifest, listed).unwrap();

    writes_the_template_fake(&dir, NAME, "Zedpay");

    let wasm = tokio::task::block_in_place(|| build(&dir, &base.join("target")));

    tokio::task::block_in_place(|| passes_the_conformance_kit(&data, &wasm));
    collects_from_its_fake(NAME, &wasm).await;
}

/// The fake written is the template compiled here as `fakes::acme`, renamed.
fn writes_the_template_fake(dir: &Path, name: &str, title: &str) {
    let template =
        std::fs::read_to_string(root_path("crates/scaffold/src/templates/fake.rs")).unwrap();
    let written = std::fs::read_to_string(dir.join(format!("tests/support/fakes/{name}.rs")));
    assert_eq!(
        written.unwrap(),
        template
            .replace("acme", name)
            .replace("Acme", title)
            .replace("ACME", &name.to_ascii_uppercase())
    );
}

/// The pinned componentize-py, in the venv `make python-tools` makes.
fn componentize_py() -> PathBuf {
    let tool = target_dir().join("venv/bin/componentize-py");
    assert!(
        tool.exists(),
        "{} is missing: `make python-tools` installs it (`make test` does)",
        tool.display()
    );
    tool
}

/// Builds the scaffolded Python adapter in `dir` with the repository's
/// world and Python adapter kit, as `make python-adapters` does; returns
/// its file.
fn build_python(dir: &Path, out: &Path) -> PathBuf {
    let wasm = out.join(format!("{PY_NAME}.wasm"));
    let repo = root().canonicalize().unwrap();
    let output = Command::new(componentize_py())
        .arg("-d")
        .arg(repo.join("wit/platform"))
        .arg("-d")
        .arg(repo.join("wit/adapter"))
        .args(["-w", "mmc:adapter/bookkeeping-adapter", "componentize"])
        .arg("-p")
        .arg(dir.join("components").join(PY_NAME))
        .arg("-p")
        .arg(repo.join("crates/adapter-kit/python"))
        .arg("app")
        .arg("-o")
        .arg(&wasm)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "the scaffolded Python adapter does not build:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    wasm
}

#[service_test]
async fn a_scaffolded_python_adapter_builds_passes_the_kit_and_collects_from_its_fake() {
    let base = target_dir().join("scaffold").join("python");
    let dir = base.join("checkout");
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&dir).unwrap();
    let data = base.join("data");
    let root = dir.to_str().unwrap();

    let (ok, text, errors) = mmc(
        &data,
        &[
            "adapters", "new", PY_NAME, "--lang", "python", "--root", root,
        ],
    );
    assert!(ok, "{errors}");
    let answer: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    let created: Vec<&str> = answer["created"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap())
        .collect();
    assert_eq!(created.len(), 4, "{answer}");
    for file in ["app.py", "transformers.py"] {
        let path = dir.join("components").join(PY_NAME).join(file);
        assert!(created.contains(&path.to_str().unwrap()), "{answer}");
    }
    // No Makefile here: listing it among the Python adapters is a next step.
    assert!(text.contains("PY_ADAPTERS"), "{answer}");
    writes_the_template_fake(&dir, PY_NAME, "Zedpy");

    let wasm = tokio::task::block_in_place(|| build_python(&dir, &base));
    tokio::task::block_in_place(|| passes_the_conformance_kit(&data, &wasm));
    collects_from_its_fake(PY_NAME, &wasm).await;
}

/// The conformance kit, as an engineer runs it: every check passes and
/// none is left unexercised.
fn passes_the_conformance_kit(data: &Path, wasm: &Path) {
    let (ok, text, errors) = mmc(
        data,
        &["adapters", "test", wasm.to_str().unwrap(), "--json"],
    );
    assert!(ok, "{text}{errors}");
    let report: serde_json::Value = serde_json::from_str(text.trim()).unwrap();
    let unexercised: Vec<_> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["passed"] != true || c["detail"].as_str().unwrap().starts_with("not exercised")
        })
        .collect();
    assert!(unexercised.is_empty(), "{unexercised:#?}");
}

/// Against its fake (the template's, Acme's wire format): pushed, approved,
/// completed; its callback believed only when signed.
async fn collects_from_its_fake(name: &str, wasm: &Path) {
    let fake = FakeAcme::start().await;
    fake.set_outcome("+2290195000001", Outcome::Stay);
    let direct = Direct::load_file(name, wasm, fake.component_config());
    let req = initiate_request("moov-bj", "BJ", "+2290195000001");
    let id = req.payment_id.clone();
    let initiated = direct.initiate(req).await.unwrap();
    assert!(
        matches!(initiated, Initiated::AwaitingCustomer(_)),
        "{initiated:?}"
    );
    assert_eq!(fake.collections_for(&id).len(), 1);
    let payment = operation(&id, "moov-bj", None, "+2290195000001", 1500);
    assert_eq!(
        direct.status(payment.clone()).await.unwrap(),
        PspStatus::Pending
    );
    fake.customer_acts(&id, Outcome::Succeed).await;
    let settled = direct
        .settled(Duration::from_secs(5), || direct.status(payment.clone()))
        .await;
    assert_eq!(completed(&settled), Some(1500), "{settled:?}");

    let callback = |(headers, body): (Vec<(String, String)>, Vec<u8>)| Inbound {
        operator: "moov-bj".into(),
        environment: "live".into(),
        method: "POST".into(),
        headers,
        body,
    };
    let signed = callback(fake.signed_callback(&id, acme::WEBHOOK_SECRET));
    let updates = direct.parse_callback(signed).await.unwrap();
    assert_eq!(updates.len(), 1);
    assert_eq!(updates[0].id.as_deref(), Some(id.as_str()));
    assert!(matches!(updates[0].status, PspStatus::Completed(_)));
    let forged = callback(fake.signed_callback(&id, "not-the-secret"));
    assert!(matches!(
        direct.parse_callback(forged).await,
        Err(AdapterError::Unauthenticated(_))
    ));
}

fn root_path(relative: &str) -> PathBuf {
    root().join(relative)
}
