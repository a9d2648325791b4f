//! `mmc adapters new`: a scaffolded Rust adapter builds for wasm32-wasip2,
//! passes the conformance kit (`mmc adapters test`) and takes a payment
//! from its fake to completion.
//!
//! The adapter is scaffolded into a workspace of its own under
//! `target/scaffold/` (the repository is not touched), built into
//! `target/scaffold/target` (kept between runs, so only the first run
//! builds the dependencies). Its fake is the template's, compiled with the
//! other fakes as `fakes::acme`: the scaffold renames it, and the wire
//! format stays the same.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mmc_host::runtime::bindings::adapter_types::*;

use crate::support::fakes::Outcome;
use crate::support::fakes::acme::{self, FakeAcme};
use crate::support::*;
use crate::{Direct, initiate_request, operation};

const NAME: &str = "zedpay";

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

/// Runs the `mmc` binary with its data (the compiled-component cache) in
/// `data`: whether it succeeded, its output and its errors.
fn mmc(data: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mmc"))
        .arg("--data-dir")
        .arg(data)
        .args(args)
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
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

    // The fake written is the template compiled here as `fakes::acme`, renamed.
    let template = std::fs::read_to_string(root_path("host/src/scaffold/rust/fake.rs")).unwrap();
    let written = std::fs::read_to_string(dir.join(format!("tests/support/fakes/{NAME}.rs")));
    assert_eq!(
        written.unwrap(),
        template
            .replace("acme", NAME)
            .replace("Acme", "Zedpay")
            .replace("ACME", "ZEDPAY")
    );

    let wasm = tokio::task::block_in_place(|| build(&dir, &base.join("target")));

    // The conformance kit, as an engineer runs it.
    let (ok, text, errors) = mmc(&["adapters", "test", wasm.to_str().unwrap(), "--json"]);
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

    // Against its fake: pushed, approved, completed; its callback believed
    // only when signed.
    let fake = FakeAcme::start().await;
    fake.set_outcome("+2290195000001", Outcome::Stay);
    let direct = Direct::load_file(NAME, &wasm, fake.component_config());
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
