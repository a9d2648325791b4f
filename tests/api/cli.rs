//! The CLI contract, driven exactly as operators and scripts drive it.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::*;
use mmc_test_kit::service_test;

/// Runs `mmc ARGS` (on the suite's storage for the data directory named)
/// and returns the one JSON object it prints.
pub(crate) fn mmc(args: &[&str]) -> Value {
    // The storage of the data directory named, when the suite runs on PostgreSQL.
    let storage = args
        .iter()
        .position(|a| *a == "--data-dir")
        .map(|i| storage_env(std::path::Path::new(args[i + 1])))
        .unwrap_or_default();
    let out = Command::new(env!("CARGO_BIN_EXE_mmc"))
        .args(args)
        .envs(storage)
        .env_remove("MMC_CONFIG")
        .output()
        .expect("mmc runs");
    assert!(
        out.status.success(),
        "mmc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert_eq!(
        stdout.trim().lines().count(),
        1,
        "one JSON object on stdout: {stdout}"
    );
    serde_json::from_str(stdout.trim()).expect("JSON output")
}

#[service_test]
async fn merchants_and_keys_from_the_cli_work_on_a_running_server_and_revocation_is_prompt(
    app: TestApp,
) {
    let dir = app.data_dir.path().to_str().unwrap().to_string();
    let m = mmc(&[
        "merchants",
        "create",
        "--name",
        "Boutique Dakar",
        "--data-dir",
        &dir,
    ]);
    assert_eq!(m["name"], "Boutique Dakar");
    let merchant = id_of(&m);
    let k = mmc(&[
        "keys",
        "create",
        "--merchant",
        &merchant,
        "--env",
        "test",
        "--data-dir",
        &dir,
        "--json",
    ]);
    assert_eq!(k["environment"], "test");
    assert_eq!(k["merchant_id"], merchant);
    let key = k["key"].as_str().unwrap();
    assert!(key.starts_with("mk_test_"), "{key}");

    let (id, _) = app.create_ok(key, &direct_payment("+2290166000001")).await;

    mmc(&["keys", "revoke", &id_of(&k), "--data-dir", &dir]);
    let revoked_at = Instant::now();
    loop {
        let sent = revoked_at.elapsed();
        let (status, _) = app
            .get(key, &format!("/api/v1/collect/payments/{id}"))
            .await;
        if status == 401 {
            break;
        }
        assert!(
            sent < Duration::from_millis(500),
            "accepted when sent {sent:?} after revocation"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[test]
fn cli_errors_are_reported_with_a_nonzero_exit() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mmc"))
        .args([
            "keys",
            "create",
            "--merchant",
            "nobody",
            "--env",
            "test",
            "--data-dir",
            dir.path().to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no merchant"));
}

#[service_test]
async fn adapters_are_tested_deployed_and_listed_from_the_cli() {
    let cache = cache_dir();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_mmc"))
            .args(args)
            .env("MMC_CACHE_DIR", &cache)
            .env_remove("MMC_CONFIG")
            .output()
            .unwrap()
    };
    let sim = components_dir().join("simulator.wasm");
    let out = run(&["adapters", "test", sim.to_str().unwrap()]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{table}");
    assert!(
        table.contains("describe") && table.contains("0 failed"),
        "{table}"
    );
    let out = run(&[
        "adapters",
        "test",
        test_component("hostile").to_str().unwrap(),
        "--json",
    ]);
    assert!(
        !out.status.success(),
        "an API component fails the adapter contract"
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["passed"], false);
    assert_eq!(report["checks"][0]["name"], "loads");

    // No token configured: one is generated into the data dir (0600), never printed.
    let app = spawn_app().await;
    let token_file = app.data_dir.path().join("admin_token");
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_string();
    assert!(token.len() >= 32, "{token}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&token_file).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    let (base, cache2) = (app.admin_base.clone(), cache.clone());
    let sim2 = sim.clone();
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_mmc"))
            .args([
                "adapters",
                "deploy",
                "simulator",
                sim2.to_str().unwrap(),
                "--server",
                &base,
                "--token",
                &token,
            ])
            .env("MMC_CACHE_DIR", &cache2)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let deployed: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(deployed["name"], "simulator");
    // Without --token, the CLI reads the generated one from --data-dir.
    let (base, dir) = (app.admin_base.clone(), app.data_dir.path().to_path_buf());
    let out = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_mmc"))
            .args([
                "adapters",
                "list",
                "--json",
                "--server",
                &base,
                "--data-dir",
            ])
            .arg(&dir)
            .env_remove("MMC_ADMIN_TOKEN")
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        list["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["hash"] == deployed["hash"])
    );
}
