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
        Self::spawn(serve_command(data_dir, env, None))
    }

    /// The same, its virtual address space capped at `bytes` (`prlimit --as`).
    pub fn start_capped(data_dir: &Path, env: &[(&str, &str)], bytes: u64) -> ServerProcess {
        Self::spawn(serve_command(data_dir, env, Some(bytes)))
    }

    /// A server capped at `bytes` that must fail to start: what it wrote to stderr.
    pub fn refused_capped(data_dir: &Path, env: &[(&str, &str)], bytes: u64) -> String {
        let mut cmd = serve_command(data_dir, env, Some(bytes));
        let mut child = cmd.stderr(Stdio::piped()).spawn().expect("mmc starts");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(!status.success(), "mmc exited 0 under the cap");
                break;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("mmc kept running under a {bytes}-byte address space");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        err
    }

    fn spawn(mut cmd: Command) -> ServerProcess {
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

/// `serve` on port 0 for `data_dir` as every test of the binary starts it:
/// the suite's components, compiled-code cache and storage, the admin API on
/// a port of its own, no configuration file.
pub fn serve_args<'c>(cmd: &'c mut Command, data_dir: &Path) -> &'c mut Command {
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data_dir)
        .arg("--components-dir")
        .arg(components_dir())
        .env("MMC_CACHE_DIR", cache_dir())
        .env("MMC_LOG", "warn")
        .env("MMC_ADMIN__LISTEN", "127.0.0.1:0")
        .envs(storage_env(data_dir))
        .env_remove("MMC_CONFIG")
}

/// `mmc serve` on port 0 for `data_dir`, with `env`, and under an address
/// space cap if one is given.
fn serve_command(data_dir: &Path, env: &[(&str, &str)], cap: Option<u64>) -> Command {
    // CRASH_TEST_BIN points at another build (the release one, for `make crash`).
    let bin = std::env::var_os("CRASH_TEST_BIN")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_mmc").into());
    let mut cmd = match cap {
        Some(bytes) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--as={bytes}")).arg(bin);
            c
        }
        None => Command::new(bin),
    };
    serve_args(&mut cmd, data_dir)
        // The tests' webhook receivers listen on loopback.
        .env("MMC_WEBHOOKS__ALLOW_PRIVATE_DESTINATIONS", "true")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
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
