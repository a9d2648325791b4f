//! Logs as a deployment reads them: no colour codes when written to a file,
//! and one JSON object a line with `log.format = "json"` for a log pipeline.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use crate::support::*;

/// Starts `mmc serve` with stderr to a file, makes one request, stops it;
/// returns what it logged.
fn logs_of_a_run(env: &[(&str, &str)]) -> String {
    let dir = tempfile::tempdir().unwrap();
    let log_path = dir.path().join("mmc.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mmc"));
    cmd.args(["serve", "--demo", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(dir.path().join("data"))
        .arg("--components-dir")
        .arg(components_dir())
        .env("MMC_CACHE_DIR", cache_dir())
        .env("MMC_LOG", "info")
        .env("MMC_ADMIN__LISTEN", "127.0.0.1:0")
        .env_remove("MMC_CONFIG")
        .stdout(Stdio::piped())
        .stderr(log);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let base = loop {
        let line = lines.next().expect("mmc prints its address").unwrap();
        if let Some(addr) = line.strip_prefix("mmc listening on ") {
            break addr.trim().to_string();
        }
    };
    let addr = base.trim_start_matches("http://");
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    conn.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::read_to_string(&log_path).unwrap()
}

#[test]
fn logs_to_a_file_carry_no_colour_codes_and_json_is_one_object_a_line() {
    let text = logs_of_a_run(&[]);
    assert!(text.contains("INFO"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "no ANSI escape in a file:\n{text}"
    );

    let json = logs_of_a_run(&[("MMC_LOG__FORMAT", "json")]);
    let lines: Vec<&str> = json.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty());
    for line in lines {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert!(v["level"].is_string() && v["timestamp"].is_string(), "{v}");
        assert!(v["message"].is_string(), "{v}");
    }
}
