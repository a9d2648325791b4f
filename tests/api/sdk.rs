//! The SDKs a merchant generates from the live OpenAPI document work: the
//! Python package of openapi-python-client (generated without a single
//! warning) and the TypeScript types of openapi-typescript used through
//! openapi-fetch (type-checked by `tsc --noEmit`, then run under Node) each
//! create, list, read, cancel and refund payments, register a webhook endpoint
//! and create bulk payments from JSON and CSV against the running server.
//! Generated code goes under target/sdk, never into the repository. The
//! tools are pinned: openapi-python-client in the venv of `make tools`,
//! openapi-typescript, openapi-fetch and typescript in tests/sdk (`make sdk`);
//! both are dependencies of `make test`. A missing tool fails the test.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::*;
use mmc_test_kit::service_test;

fn tool(path: PathBuf, installer: &str) -> PathBuf {
    assert!(
        path.exists(),
        "{} is missing: run `{installer}` (make test does)",
        path.display()
    );
    path
}

fn venv_bin() -> PathBuf {
    target_dir().join("venv/bin")
}

fn sdk_dir() -> PathBuf {
    root().join("tests/sdk")
}

fn npm_bin(name: &str) -> PathBuf {
    tool(sdk_dir().join("node_modules/.bin").join(name), "make sdk")
}

/// Runs `cmd` to success and returns its stdout and stderr, together.
fn run(cmd: &mut Command) -> String {
    let out: Output = cmd
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?} does not start: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// A fresh directory under target/sdk.
fn fresh(name: &str) -> PathBuf {
    let dir = target_dir().join("sdk").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The document as the server serves it, saved for the generators.
async fn document(app: &TestApp, dir: &Path) -> PathBuf {
    let resp = app
        .client
        .get(app.url("/api/v1/collect/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let path = dir.join("openapi.json");
    std::fs::write(&path, resp.bytes().await.unwrap()).unwrap();
    path
}

#[service_test]
async fn the_generated_python_sdk_works_against_the_live_server() {
    let app = spawn_app_completing_after(0).await;
    let key = app.test_key("Python shop");
    let dir = fresh("python");
    let doc = document(&app, &dir).await;
    let generator = tool(venv_bin().join("openapi-python-client"), "make tools");
    let python = tool(venv_bin().join("python"), "make tools");
    let (base, webhook) = (app.base.clone(), app.url("/sdk-webhook-sink"));
    tokio::task::spawn_blocking(move || {
        // ruff (a dependency in the venv) formats the package: on PATH.
        let path = format!(
            "{}:{}",
            venv_bin().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        let out = run(Command::new(generator)
            .env("PATH", path)
            .arg("generate")
            .arg("--path")
            .arg(&doc)
            .arg("--config")
            .arg(sdk_dir().join("openapi-python-client.yml"))
            .arg("--output-path")
            .arg(dir.join("client"))
            .arg("--overwrite"));
        assert!(
            !out.to_lowercase().contains("warning") && !out.contains("Unable to"),
            "openapi-python-client warned:\n{out}"
        );
        let out = run(Command::new(python)
            .arg(sdk_dir().join("python_sdk.py"))
            .arg(dir.join("client"))
            .args([&base, &key, &webhook]));
        assert!(out.contains("python sdk: ok"), "{out}");
    })
    .await
    .unwrap();
}

#[service_test]
async fn the_generated_typescript_types_type_check_and_work_against_the_live_server() {
    let app = spawn_app_completing_after(0).await;
    let key = app.test_key("TypeScript shop");
    let dir = fresh("typescript");
    let doc = document(&app, &dir).await;
    let generator = npm_bin("openapi-typescript");
    let tsc = npm_bin("tsc");
    tool(sdk_dir().join("node_modules/openapi-fetch"), "make sdk");
    let (base, webhook) = (app.base.clone(), app.url("/sdk-webhook-sink"));
    tokio::task::spawn_blocking(move || {
        let out = run(Command::new(generator)
            .arg(&doc)
            .arg("-o")
            .arg(dir.join("schema.d.ts")));
        assert!(
            !out.to_lowercase().contains("warn") && !out.to_lowercase().contains("error"),
            "openapi-typescript warned:\n{out}"
        );
        // The program beside its types, resolving openapi-fetch from tests/sdk.
        std::fs::copy(sdk_dir().join("ts_sdk.ts"), dir.join("main.ts")).unwrap();
        std::fs::copy(sdk_dir().join("tsconfig.json"), dir.join("tsconfig.json")).unwrap();
        std::fs::write(dir.join("package.json"), r#"{"type": "module"}"#).unwrap();
        std::os::unix::fs::symlink(sdk_dir().join("node_modules"), dir.join("node_modules"))
            .unwrap();
        run(Command::new(&tsc)
            .current_dir(&dir)
            .args(["--noEmit", "-p", "."]));
        run(Command::new(&tsc).current_dir(&dir).args(["-p", "."]));
        let out = run(Command::new("node")
            .current_dir(&dir)
            .arg("out/main.js")
            .args([&base, &key, &webhook]));
        assert!(out.contains("typescript sdk: ok"), "{out}");
    })
    .await
    .unwrap();
}
