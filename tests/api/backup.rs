//! `mmc backup` and `mmc restore` against the real binary: a backup taken
//! while creates run against a live server holds every payment acknowledged
//! before it began, and a server started on the restored store serves them.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::process::{ServerProcess, cli_merchant, get_json, post_json};
use crate::support::*;
use mmc_test_kit::service_test;

/// `mmc ARGS --data-dir DIR` on DIR's storage, as an operator runs it.
fn mmc(data_dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mmc"))
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .envs(storage_env(data_dir))
        .env_remove("MMC_CONFIG")
        .output()
        .unwrap()
}

fn succeeds(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "mmc failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The error a failed command printed.
fn fails(out: &Output) -> String {
    assert!(!out.status.success(), "mmc succeeded: {out:?}");
    let err: Value = serde_json::from_slice(&out.stderr).unwrap();
    err["error"].as_str().unwrap().to_string()
}

fn create_url(base: &str) -> String {
    format!("{base}/api/v1/collect/payments")
}

/// Creates from `workers` concurrent clients until `stop`: the ids of the
/// acknowledged ones (201), in the order their answers arrived.
fn load(
    base: String,
    key: String,
    workers: usize,
    stop: Arc<AtomicBool>,
) -> (Arc<Mutex<Vec<String>>>, Vec<tokio::task::JoinHandle<()>>) {
    let acked = Arc::new(Mutex::new(Vec::new()));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let tasks = (0..workers)
        .map(|_| {
            let (client, base, key) = (client.clone(), base.clone(), key.clone());
            let (acked, stop) = (acked.clone(), stop.clone());
            tokio::spawn(async move {
                let deadline = Instant::now() + Duration::from_secs(60);
                while !stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                    let body = direct_payment("+2290166000001");
                    let (status, p) =
                        post_json(&client, &create_url(&base), &key, Some(&new_key()), &body).await;
                    assert_eq!(status, 201, "{p}");
                    acked.lock().unwrap().push(id_of(&p));
                }
            })
        })
        .collect();
    (acked, tasks)
}

async fn wait_for(acked: &Mutex<Vec<String>>, at_least: usize) {
    let until = Instant::now() + Duration::from_secs(30);
    while acked.lock().unwrap().len() < at_least {
        assert!(Instant::now() < until, "the load made too few creates");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[service_test]
async fn a_backup_under_load_restores_every_payment_acknowledged_before_it() {
    let data = tempfile::tempdir().unwrap();
    let (_, key) = cli_merchant(data.path(), "Backup", "test");
    let backups = tempfile::tempdir().unwrap();
    let to = backups.path().join("b1");
    if on_postgres() {
        // Backups are SQLite's; PostgreSQL has its own tools.
        let err = fails(&mmc(data.path(), &["backup", "--to", to.to_str().unwrap()]));
        assert!(err.contains("pg_dump"), "{err}");
        return;
    }
    let env = [("MMC_RATE_LIMIT__PER_SECOND", "0")];
    let server = ServerProcess::start(data.path(), &env);
    let stop = Arc::new(AtomicBool::new(false));
    let (acked, tasks) = load(server.base.clone(), key.clone(), 4, stop.clone());
    wait_for(&acked, 60).await;

    // Every create answered 201 up to here is in the backup.
    let before: Vec<String> = acked.lock().unwrap().clone();
    let (dir, target) = (data.path().to_path_buf(), to.clone());
    let out = tokio::task::spawn_blocking(move || {
        mmc(&dir, &["backup", "--to", target.to_str().unwrap()])
    })
    .await
    .unwrap();
    let taken = succeeds(&out);
    let during = acked.lock().unwrap().len() - before.len();
    wait_for(&acked, before.len() + during + 20).await;
    stop.store(true, Ordering::SeqCst);
    for t in tasks {
        t.await.unwrap();
    }
    assert_eq!(taken["manifest"]["format"], 1);
    assert!(taken["manifest"]["database"]["pages"].as_u64().unwrap() > 0);
    assert!(!backups.path().join("b1.partial").exists());

    let client = reqwest::Client::new();
    // A payment made once the backup was done: not in it.
    let (status, later) = post_json(
        &client,
        &create_url(&server.base),
        &key,
        Some(&new_key()),
        &direct_payment("+2290166000001"),
    )
    .await;
    assert_eq!(status, 201);
    // Killed: its WAL, which holds that payment, stays beside the database.
    server.kill();
    assert!(data.path().join("mmc.db-wal").exists());

    let restored = tempfile::tempdir().unwrap();
    let into = restored.path().join("data");
    let out = succeeds(&mmc(&into, &["restore", "--from", to.to_str().unwrap()]));
    assert_eq!(
        out["manifest"]["database"]["sha256"],
        taken["manifest"]["database"]["sha256"]
    );
    let server = ServerProcess::start(&into, &env);
    for id in &before {
        let p = get_json(&client, &format!("{}/{id}", create_url(&server.base)), &key).await;
        assert_eq!(p["id"], json!(id), "{p}");
    }
    let missing = get_json(
        &client,
        &format!("{}/{}", create_url(&server.base), id_of(&later)),
        &key,
    )
    .await;
    assert_eq!(missing["error"]["code"], "payment_not_found", "{missing}");
    // The restored store takes new work.
    let (status, p) = post_json(
        &client,
        &create_url(&server.base),
        &key,
        Some(&new_key()),
        &direct_payment("+2290166000001"),
    )
    .await;
    assert_eq!(status, 201, "{p}");
    server.terminate();

    // Over the original store, with --force: the backup's state, not the
    // newer WAL the killed server left beside the old file.
    let out = mmc(
        data.path(),
        &["restore", "--from", to.to_str().unwrap(), "--force"],
    );
    succeeds(&out);
    let server = ServerProcess::start(data.path(), &env);
    let first = get_json(
        &client,
        &format!("{}/{}", create_url(&server.base), before[0]),
        &key,
    )
    .await;
    assert_eq!(first["id"], json!(before[0]));
    let gone = get_json(
        &client,
        &format!("{}/{}", create_url(&server.base), id_of(&later)),
        &key,
    )
    .await;
    assert_eq!(gone["error"]["code"], "payment_not_found", "{gone}");
}

#[service_test]
async fn backup_and_restore_refuse_what_they_cannot_do_safely() {
    let data = tempfile::tempdir().unwrap();
    let backups = tempfile::tempdir().unwrap();
    let arg = |p: &Path| p.to_str().unwrap().to_string();
    let missing = backups.path().join("nowhere");
    let to = backups.path().join("b");

    // On PostgreSQL: refused, pointing at PostgreSQL's tools.
    let err = fails(
        &Command::new(env!("CARGO_BIN_EXE_mmc"))
            .args(["backup", "--to", &arg(&to), "--data-dir", &arg(data.path())])
            .env("MMC_STORAGE__URL", "postgres://postgres@127.0.0.1:5432/mmc")
            .env_remove("MMC_CONFIG")
            .output()
            .unwrap(),
    );
    assert!(err.contains("pg_dump or pg_basebackup"), "{err}");
    if on_postgres() {
        return; // the rest is about SQLite files
    }

    let err = fails(&mmc(&missing, &["backup", "--to", &arg(&to)]));
    assert!(err.contains("does not exist"), "{err}");
    assert!(!missing.exists(), "a backup created the data directory");
    let err = fails(&mmc(data.path(), &["backup", "--to", &arg(&to)]));
    assert!(err.contains("no database at"), "{err}");

    let (_, key) = cli_merchant(data.path(), "Refusals", "test");
    // Backed up while it runs: the keys it generated come along.
    let server = ServerProcess::start(data.path(), &[]);
    let err = fails(&mmc(data.path(), &["backup", "--to", &arg(backups.path())]));
    assert!(err.contains("exists"), "{err}");
    let err = fails(&mmc(
        data.path(),
        &["backup", "--to", &arg(&missing.join("b"))],
    ));
    assert!(err.contains("cannot write"), "{err}");
    succeeds(&mmc(data.path(), &["backup", "--to", &arg(&to)]));
    let err = fails(&mmc(data.path(), &["backup", "--to", &arg(&to)]));
    assert!(err.contains("exists"), "{err}");

    // Restore: from something that is not a backup, into a data directory
    // that is not empty, over a store a server has open, from a damaged copy.
    let fresh = backups.path().join("fresh");
    let err = fails(&mmc(&fresh, &["restore", "--from", &arg(&missing)]));
    assert!(err.contains("is not a backup"), "{err}");
    let err = fails(&mmc(data.path(), &["restore", "--from", &arg(&to)]));
    assert!(
        err.contains("not empty") && err.contains("--force"),
        "{err}"
    );
    let err = fails(&mmc(
        data.path(),
        &["restore", "--from", &arg(&to), "--force"],
    ));
    assert!(err.contains("stop it before restoring"), "{err}");
    server.terminate();
    let damaged = backups.path().join("damaged");
    std::fs::create_dir(&damaged).unwrap();
    for f in std::fs::read_dir(&to).unwrap() {
        let f = f.unwrap().path();
        std::fs::copy(&f, damaged.join(f.file_name().unwrap())).unwrap();
    }
    let db = damaged.join("mmc.db");
    let mut bytes = std::fs::read(&db).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    std::fs::write(&db, bytes).unwrap();
    let err = fails(&mmc(&fresh, &["restore", "--from", &arg(&damaged)]));
    assert!(err.contains("damaged"), "{err}");
    assert!(
        !fresh.exists(),
        "a refused restore wrote the data directory"
    );

    // The one that is sound, into a new directory: the merchant's key works.
    succeeds(&mmc(&fresh, &["restore", "--from", &arg(&to)]));
    let mode = |p: &Path| {
        let m = std::fs::metadata(p).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::mode(&m) & 0o077
    };
    assert_eq!(mode(&to), 0, "the backup is open to others");
    for name in ["mmc.db", "webhook_secrets_key", "admin_token"] {
        assert_eq!(
            mode(&to.join(name)),
            0,
            "the backup's {name} is open to others"
        );
        assert_eq!(
            mode(&fresh.join(name)),
            0,
            "the restored {name} is open to others"
        );
    }
    let server = ServerProcess::start(&fresh, &[]);
    let m = get_json(
        &reqwest::Client::new(),
        &format!("{}/api/v1/collect/payments/operators/", server.base),
        &key,
    )
    .await;
    assert!(m.get("error").is_none(), "{m}");
}
