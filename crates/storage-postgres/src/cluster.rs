//! A private PostgreSQL cluster (feature `test-util`), for tests that stop
//! and start the server or configure it (TLS): never the shared test server,
//! which other tests use at the same time.
//!
//! `initdb` and `pg_ctl` come from the newest `/usr/lib/postgresql/*/bin`
//! (`scripts/test-postgres.sh` installs Debian's postgresql when missing);
//! run as root, the cluster belongs to and runs as `postgres`, as initdb
//! and the server refuse root. Trust authentication, 127.0.0.1 only, a free
//! port, everything in a temporary directory removed on drop. No binaries
//! is a failure with the reason, never a skip.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    /// `-c name=value` settings the server starts with (beyond the address).
    settings: Vec<(String, String)>,
}

impl Cluster {
    /// A new cluster, initialised and started.
    pub fn start() -> Cluster {
        Self::start_with(&[])
    }

    /// As [`start`](Self::start), with server settings (`("ssl", "on")`).
    /// Files they name can be written first with [`Cluster::init`] and
    /// [`write_file`](Self::write_file), then [`resume`](Self::resume).
    pub fn start_with(settings: &[(&str, &str)]) -> Cluster {
        let mut c = Self::init();
        c.settings = settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        c.resume();
        c
    }

    /// A new cluster, initialised, not started.
    pub fn init() -> Cluster {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let bin = pg_bin();
        let dir = std::env::temp_dir().join(format!(
            "mmc-pg-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("cluster directory");
        if is_root() {
            run(Command::new("chown").arg("postgres:").arg(&dir));
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let c = Cluster {
            dir,
            bin,
            port,
            settings: Vec::new(),
        };
        run(c
            .as_owner(&c.bin.join("initdb"))
            .arg("-D")
            .arg(c.data())
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "-N",
            ]));
        c
    }

    /// Adds server settings for the next start.
    pub fn set(&mut self, name: &str, value: &str) {
        self.settings.push((name.to_string(), value.to_string()));
    }

    /// Writes `contents` to `name` in the cluster's directory, mode 0600,
    /// owned by the server's user (a key file must be): its path.
    pub fn write_file(&self, name: &str, contents: &[u8]) -> PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let path = self.dir.join(name);
        std::fs::write(&path, contents).expect("write cluster file");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        if is_root() {
            run(Command::new("chown").arg("postgres:").arg(&path));
        }
        path
    }

    /// Starts the server (again), on the same port; returns once it accepts connections.
    pub fn resume(&self) {
        // fsync off: a test stops the server, never the machine, and the
        // kernel keeps what was written either way.
        let mut opts = format!(
            "-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories={} -c fsync=off",
            self.port,
            self.dir.display()
        );
        for (k, v) in &self.settings {
            opts.push_str(&format!(" -c {k}={v}"));
        }
        let ok = self
            .as_owner(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.join("log"))
            .args(["-w", "-t", "60", "-o", &opts, "start"])
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
            panic!("the private PostgreSQL cluster did not start; its log:\n{log}");
        }
    }

    /// Stops the server (fast: sessions are ended, nothing waits for them).
    pub fn stop(&self) {
        self.pg_ctl_stop("fast");
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn pg_ctl_stop(&self, mode: &str) {
        let _ = self
            .as_owner(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.data())
            .args(["-m", mode, "-w", "stop"])
            .status();
    }

    fn as_owner(&self, program: &Path) -> Command {
        let mut cmd = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        };
        cmd.stdout(std::process::Stdio::null());
        cmd
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.data().join("postmaster.pid").exists() {
            self.pg_ctl_stop("immediate");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The newest installed server's binaries; panics with what to do if none.
fn pg_bin() -> PathBuf {
    let mut bins: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, bin)| bin.join("initdb").is_file())
        .collect();
    bins.sort();
    match bins.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "tests that stop and start PostgreSQL need its server binaries and there is no \
             initdb under /usr/lib/postgresql/*/bin: run scripts/test-postgres.sh (it installs \
             Debian's postgresql) or apt-get install postgresql. These tests never skip."
        ),
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

fn run(cmd: &mut Command) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
