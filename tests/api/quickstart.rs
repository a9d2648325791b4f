//! The README's quick start works as written: its commands are taken from
//! README.md itself (so a wrong edit there breaks this test) and run with
//! bash and curl against `mmc serve --demo`, with the key it prints.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::process::serve_args;
use crate::support::*;
use mmc_test_kit::service_test;

/// Where the quick start says the server listens (`make run`).
const README_BASE: &str = "http://127.0.0.1:8080";

/// The `sh` code blocks of the README's "Quick start" section.
fn quick_start_blocks() -> Vec<String> {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = readme
        .split("\n## ")
        .find(|s| s.starts_with("Quick start"))
        .expect("the README has a Quick start section");
    section
        .split("```")
        .skip(1)
        .step_by(2)
        .filter_map(|b| b.strip_prefix("sh\n"))
        .map(str::to_string)
        .collect()
}

/// `mmc serve --demo` on a fresh data directory, as `make run` starts it:
/// (the server, its base URL, the test key it printed).
fn serve_demo(data_dir: &std::path::Path) -> (std::process::Child, String, String) {
    let mut child = serve_args(&mut Command::new(env!("CARGO_BIN_EXE_mmc")), data_dir)
        .arg("--demo")
        .env("MMC_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("mmc starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let (mut key, mut base) = (None, None);
    while key.is_none() || base.is_none() {
        let line = lines.next().expect("mmc prints the demo key").unwrap();
        if let Some(rest) = line.strip_prefix("Test API key:") {
            key = rest.split_whitespace().next().map(str::to_string);
        } else if let Some(addr) = line.strip_prefix("mmc listening on ") {
            base = Some(addr.trim().to_string());
        }
    }
    std::thread::spawn(move || for _ in lines {});
    (child, base.unwrap(), key.unwrap())
}

#[service_test]
async fn the_quick_start_commands_work_against_a_demo_server() {
    let blocks = quick_start_blocks();
    assert!(
        blocks[0].contains("make run"),
        "the first block starts the server: {blocks:?}"
    );
    let block = blocks
        .iter()
        .find(|b| b.contains("curl"))
        .expect("a block of curl commands");
    // Only what Debian ships (bash, curl, coreutils): every command line
    // starts with curl or sets KEY; continuation lines carry their arguments.
    let (mut continued, mut quoted) = (false, false);
    for line in block.lines() {
        let first = line.split_whitespace().next().unwrap_or_default();
        assert!(
            continued || first == "curl" || line.starts_with("KEY="),
            "a command the quick start should not need: {line}"
        );
        // A command goes on after a `\` or inside a quoted body.
        quoted ^= line.matches('\'').count() % 2 == 1;
        continued = quoted || line.ends_with('\\');
    }
    assert_eq!(block.matches("curl ").count(), 3, "{block}");
    assert!(block.contains(README_BASE), "{block}");

    let data = tempfile::tempdir().unwrap();
    let (mut server, base, key) = serve_demo(data.path());
    assert!(key.starts_with("mk_test_"), "{key}");
    // The block as written, with the key `make run` printed and this server's
    // address; curl reports each answer's status after its body.
    let script = block
        .replace("KEY=<the printed key>", &format!("KEY='{key}'"))
        .replace(README_BASE, &base);
    assert!(
        !script.contains('<'),
        "every placeholder replaced: {script}"
    );
    let out = tokio::task::spawn_blocking(move || {
        Command::new("bash")
            .arg("-c")
            .arg(format!(
                "set -euo pipefail\ncurl() {{ command curl -w '\\n@@status=%{{http_code}}@@\\n' \"$@\"; }}\n{script}"
            ))
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let _ = server.kill();
    let _ = server.wait();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answers: Vec<(u16, Value)> = stdout
        .split("@@\n")
        .filter(|s| !s.trim().is_empty())
        .map(|s| {
            let (body, status) = s.rsplit_once("\n@@status=").expect("a status");
            (
                status.parse().unwrap(),
                serde_json::from_str(body).unwrap_or(Value::Null),
            )
        })
        .collect();
    assert_eq!(answers.len(), 3, "{stdout}");
    let (status, catalogue) = &answers[0];
    assert_eq!(*status, 200, "operators: {catalogue}");
    assert_eq!(catalogue["object"], "list", "{catalogue}");
    let (status, created) = &answers[1];
    assert_eq!(*status, 201, "create: {created}");
    assert_eq!(
        (created["reference"].as_str(), created["amount"].as_u64()),
        (Some("order-1"), Some(1500)),
        "{created}"
    );
    let (status, read) = &answers[2];
    assert_eq!(*status, 200, "read: {read}");
    assert_eq!(read["id"], created["id"], "{read}");
    // `…0001` completes: the sync read asked the simulator and got the answer.
    assert_eq!(read["status"], "completed", "{read}");
}
