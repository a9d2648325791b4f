//! The real `mmc` binary as a child process, for tests that kill it.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::support::*;

pub struct ServerProcess {
    pub child: Child,
    pub base: String,
    /// The admin listener's base URL.
    pub admin: String,
}

impl ServerProcess {
    /// Starts `mmc serve` on port 0 with `env` (MMC_* settings) and waits until it listens.
    pub fn start(data_dir: &Path, env: &[(&str, &str)]) -> ServerProcess {
        // CRASH_TEST_BIN points at another build (the release one, for `make crash`).
        let bin = std::env::var_os("CRASH_TEST_BIN")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| env!("CARGO_BIN_EXE_mmc").into());
        let mut cmd = Command::new(bin);
        cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(data_dir)
            .arg("--components-dir")
            .arg(components_dir())
            .env("MMC_CACHE_DIR", cache_dir())
            .env("MMC_LOG", "warn")
            .env("MMC_ADMIN__LISTEN", "127.0.0.1:0")
            .envs(storage_env(data_dir))
            // The tests' webhook receivers listen on loopback.
            .env("MMC_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true")
            .env_remove("MMC_CONFIG")
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("mmc starts");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let (mut base, mut admin) = (None, None);
        while base.is_none() || admin.is_none() {
            let line = lines.next().expect("mmc prints its addresses").unwrap();
            if let Some(addr) = line.strip_prefix("mmc listening on ") {
                base = Some(addr.trim().to_string());
            } else if let Some(addr) = line.strip_prefix("mmc admin on ") {
                admin = Some(addr.trim().to_string());
            }
        }
        let (base, admin) = (base.unwrap(), admin.unwrap());
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in lines {});
        ServerProcess { child, base, admin }
    }

    /// SIGTERM, then waits for the graceful shutdown to end.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.child.wait().unwrap()
    }

    /// SIGKILL: no shutdown code runs.
    pub fn kill(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `mmc <args> --data-dir DIR`, parsed as its one JSON object.
pub fn cli(data_dir: &Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new(env!("CARGO_BIN_EXE_mmc"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .envs(storage_env(data_dir))
        .env_remove("MMC_CONFIG")
        .env("MMC_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mmc {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A merchant and an API key for `env` (`test` or `live`) made through the
/// CLI on `data_dir`'s storage: (merchant id, key).
pub fn cli_merchant(data_dir: &Path, name: &str, env: &str) -> (String, String) {
    let m = cli(data_dir, &["merchants", "create", "--name", name]);
    let merchant = id_of(&m);
    let k = cli(
        data_dir,
        &["keys", "create", "--merchant", &merchant, "--env", env],
    );
    (merchant, k["key"].as_str().unwrap().to_string())
}

/// GET `url` with `key`, its body as JSON.
pub async fn get_json(client: &reqwest::Client, url: &str, key: &str) -> serde_json::Value {
    let resp = client.get(url).bearer_auth(key).send().await.unwrap();
    resp.json().await.unwrap()
}

/// POST `body` to `url` with `key` (and an `Idempotency-Key` if given): status and JSON body.
pub async fn post_json(
    client: &reqwest::Client,
    url: &str,
    key: &str,
    idempotency_key: Option<&str>,
    body: &serde_json::Value,
) -> (u16, serde_json::Value) {
    let mut req = client.post(url).bearer_auth(key).json(body);
    if let Some(k) = idempotency_key {
        req = req.header("Idempotency-Key", k);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(serde_json::Value::Null))
}
