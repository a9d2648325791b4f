//! One file to deploy: `mmc bundle` writes a binary that carries the
//! components, `mmc --version` lists them with their hashes, and the bundled
//! binary serves payments with no components folder.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use sha2::{Digest, Sha256};

use crate::process::{cli_merchant, post_json};
use crate::support::*;

#[tokio::test(flavor = "multi_thread")]
async fn a_bundled_binary_names_its_components_and_serves_with_no_components_folder() {
    let dir = tempfile::tempdir().unwrap();
    let bundled = dir.path().join("mmc");
    let out = Command::new(env!("CARGO_BIN_EXE_mmc"))
        .args(["bundle", "--commit", "0123abcd", "--out"])
        .arg(&bundled)
        .arg("--components")
        .arg(components_dir())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // --version: the version, the commit, each component's SHA-256.
    let version = Command::new(&bundled).arg("--version").output().unwrap();
    let version = String::from_utf8(version.stdout).unwrap();
    assert!(
        version.starts_with(&format!(
            "mmc {}\ncommit 0123abcd\n",
            env!("CARGO_PKG_VERSION")
        )),
        "{version}"
    );
    for name in ["collect", "simulator", "bulk", "legacy"] {
        let bytes = std::fs::read(components_dir().join(format!("{name}.wasm"))).unwrap();
        let line = format!("{name:<12} sha256:{}", hex::encode(Sha256::digest(&bytes)));
        assert!(version.contains(&line), "{line} missing from:\n{version}");
    }
    // The plain binary carries none and says so.
    let plain = Command::new(env!("CARGO_BIN_EXE_mmc"))
        .arg("--version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&plain.stdout).contains("components built in: none"));

    // Served from the bundle alone: no --components-dir, none in the config.
    let data = dir.path().join("data");
    let (_, key) = cli_merchant(&data, "Bundled", "test");
    let mut child = Command::new(&bundled)
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(&data)
        .env("MMC_CACHE_DIR", cache_dir())
        .env("MMC_LOG", "warn")
        .env("MMC_ADMIN__LISTEN", "127.0.0.1:0")
        .envs(storage_env(&data))
        .env_remove("MMC_CONFIG")
        .env_remove("MMC_COMPONENTS_DIR")
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let base = loop {
        let line = lines.next().expect("the bundle serves").unwrap();
        if let Some(addr) = line.strip_prefix("mmc listening on ") {
            break addr.trim().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    let client = reqwest::Client::new();
    let (status, p) = post_json(
        &client,
        &format!("{base}/api/v1/collect/payments"),
        &key,
        Some(&uuid::Uuid::new_v4().to_string()),
        &direct_payment("0197000001"),
    )
    .await;
    assert_eq!(status, 201, "{p}");
    let _ = child.kill();
    let _ = child.wait();
}
