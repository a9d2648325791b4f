//! Test support in the style of Zero To Production's `spawn_app()`: a real
//! server on port 0 with a fresh data directory, real components, real HTTP.
#![allow(dead_code)]

pub mod fakes;
pub mod fixtures;
pub mod smtp;

use std::path::PathBuf;

use mmc_accounts::{Accounts, Environment};
use mmc_config::Config;
use serde_json::{Value, json};

pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The cargo target directory (`CARGO_TARGET_DIR` when set, as the Makefile does).
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join("target"))
}

/// Built by `make components`.
pub fn components_dir() -> PathBuf {
    target_dir().join("components")
}

/// Built by `make python-adapters` (adapters written in Python; not in
/// [`components_dir`], which every test server loads).
pub fn python_components_dir() -> PathBuf {
    target_dir().join("python-components")
}

/// The component file `name`: built by `make components`, else by `make python-adapters`.
pub fn component_file(name: &str) -> PathBuf {
    let rust = components_dir().join(format!("{name}.wasm"));
    if rust.exists() {
        return rust;
    }
    python_components_dir().join(format!("{name}.wasm"))
}

/// A components directory for a server: every component of
/// [`components_dir`] plus `extra` (by [`component_file`]), linked, not copied.
pub fn components_dir_with(extra: &[&str]) -> PathBuf {
    let dir = tempfile::tempdir().unwrap().keep();
    let mut files: Vec<PathBuf> = std::fs::read_dir(components_dir())
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "wasm"))
        .collect();
    files.extend(extra.iter().map(|name| component_file(name)));
    for file in files {
        std::os::unix::fs::symlink(&file, dir.join(file.file_name().unwrap())).unwrap();
    }
    dir
}

/// Built by `make test-components`.
pub fn test_component(name: &str) -> PathBuf {
    target_dir()
        .join("test-components")
        .join(format!("{name}.wasm"))
}

/// Shared across tests so components are compiled once, not per test.
pub fn cache_dir() -> PathBuf {
    target_dir().join("mmc-cache")
}

/// `MMC_TEST_STORAGE=postgres` runs the suite on PostgreSQL (`make test`
/// runs the API suite both ways): each data directory gets a database of
/// its own, the same one every time it is asked for, so a restart on the
/// same directory finds its data, as with SQLite.
pub fn on_postgres() -> bool {
    match std::env::var("MMC_TEST_STORAGE").as_deref() {
        Ok("postgres") => true,
        Ok("sqlite") | Err(_) => false,
        Ok(other) => panic!("MMC_TEST_STORAGE must be sqlite or postgres, not {other}"),
    }
}

/// The `storage.url` of a data directory's storage when the suite runs on
/// PostgreSQL (`None`: SQLite, the default file in the directory).
pub fn storage_url(data_dir: &std::path::Path) -> Option<String> {
    use std::collections::HashMap;
    use std::sync::{Mutex, OnceLock};
    if !on_postgres() {
        return None;
    }
    static URLS: OnceLock<Mutex<HashMap<PathBuf, String>>> = OnceLock::new();
    let prefix = format!("mmc_t_{}_", test_binary());
    let urls = URLS.get_or_init(|| {
        // What an earlier run of this binary left behind.
        mmc_storage_postgres::test_util::drop_databases_like(&prefix);
        Mutex::default()
    });
    let mut urls = urls.lock().unwrap();
    let url = urls.entry(data_dir.to_path_buf()).or_insert_with(|| {
        let n = urls_seq();
        mmc_storage_postgres::test_util::named_database(&format!("{prefix}{n}"))
    });
    Some(url.clone())
}

fn urls_seq() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEQ: AtomicU64 = AtomicU64::new(0);
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// This test binary's name (`api`, `bulk`…), lowercase letters only.
fn test_binary() -> String {
    let exe = std::env::current_exe().unwrap_or_default();
    let stem = exe.file_stem().and_then(|s| s.to_str()).unwrap_or("t");
    stem.split('-')
        .next()
        .unwrap_or("t")
        .chars()
        .filter(|c| c.is_ascii_lowercase())
        .collect()
}

/// Points `config` at its data directory's test storage.
pub fn with_test_storage(config: &mut Config) {
    if config.storage.url.is_none() {
        config.storage.url = storage_url(&config.data_dir);
        if config.storage.url.is_some() {
            // Tests run two at a time, and some start three nodes.
            config.storage.pool_size.get_or_insert(6);
            // A fleet's nodes share one sealing key (required on PostgreSQL).
            config
                .webhooks
                .secrets_key
                .get_or_insert_with(|| TEST_SECRETS_KEY.to_string());
        }
    }
}

/// The storage a server on `config` uses, opened by the test itself.
pub fn test_storage(config: &Config) -> mmc_db::Storage {
    let mut config = config.clone();
    with_test_storage(&mut config);
    mmc_server::open_db(&config).expect("test storage opens")
}

/// The webhook sealing key of test nodes on PostgreSQL.
pub const TEST_SECRETS_KEY: &str =
    "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Environment for an `mmc` process on `data_dir`: its test storage.
pub fn storage_env(data_dir: &std::path::Path) -> Vec<(&'static str, String)> {
    storage_url(data_dir)
        .map(|u| {
            vec![
                ("MMC_STORAGE__URL", u),
                ("MMC_WEBHOOKS__SECRETS_KEY", TEST_SECRETS_KEY.to_string()),
            ]
        })
        .unwrap_or_default()
}

pub fn base_config(data_dir: &std::path::Path) -> Config {
    let mut config = Config::load(None, Vec::new()).expect("default config");
    config.listen = "127.0.0.1:0".parse().unwrap();
    config.admin.listen = "127.0.0.1:0".parse().unwrap();
    // The receivers of the tests listen on loopback.
    config.webhooks.allow_private_destinations = true;
    config.data_dir = data_dir.to_path_buf();
    config.components_dir = Some(components_dir());
    config.cache_dir = Some(cache_dir());
    // Days are reconciled on demand in tests: a test that counts a fake's
    // requests sees only its own.
    config.books.daily = false;
    config
}

pub struct TestApp {
    pub base: String,
    /// The admin listener's base URL (`admin.listen`).
    pub admin_base: String,
    pub client: reqwest::Client,
    pub accounts: Accounts,
    pub data_dir: tempfile::TempDir,
    pub service: mmc_server::Service,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// Starts a server with a config adjusted by `adjust` (components dir, routes, limits...).
/// The app with the simulator completing payments `ms` after initiation
/// (phones not ending in a test number).
pub async fn spawn_app_completing_after(ms: u64) -> TestApp {
    spawn_app_with(|c| {
        c.components
            .entry("simulator".into())
            .or_default()
            .settings
            .insert("completion_delay_ms".into(), ms.to_string());
    })
    .await
}

/// The console's pages, as the `mmc` binary hands them to the server.
pub fn console_pages() -> std::sync::Arc<dyn mmc_console_kit::Pages> {
    std::sync::Arc::new(mmc_console::Pages)
}

pub async fn spawn_app_with(adjust: impl FnOnce(&mut Config)) -> TestApp {
    let data_dir = tempfile::tempdir().expect("temp dir");
    let mut config = base_config(data_dir.path());
    adjust(&mut config);
    with_test_storage(&mut config);
    let service = mmc_server::start(config.clone(), console_pages())
        .await
        .expect("service starts");
    let accounts = Accounts::new(test_storage(&config).sql);
    TestApp {
        base: format!("http://{}", service.running.addr),
        admin_base: format!("http://{}", service.running.admin_addr),
        // A request the service never answers fails its test instead of
        // holding the whole suite until CI gives up.
        client: reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(60))
            .build()
            .unwrap(),
        accounts,
        data_dir,
        service,
    }
}

impl TestApp {
    /// A new merchant with one key per environment: (merchant id, test key, live key).
    pub fn merchant(&self, name: &str) -> (String, String, String) {
        let m = self.accounts.create_merchant(name).unwrap();
        let test = self.accounts.create_key(&m.id, Environment::Test).unwrap();
        let live = self.accounts.create_key(&m.id, Environment::Live).unwrap();
        (m.id, test.key, live.key)
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn admin_url(&self, path: &str) -> String {
        format!("{}{}", self.admin_base, path)
    }

    pub async fn create(&self, key: &str, idempotency_key: &str, body: &Value) -> (u16, Value) {
        let resp = self
            .client
            .post(self.url("/api/v1/collect/payments"))
            .bearer_auth(key)
            .header("Idempotency-Key", idempotency_key)
            .json(body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn post(&self, key: &str, path: &str, body: Value) -> (u16, Value) {
        let resp = self
            .client
            .post(self.url(path))
            .bearer_auth(key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// A POST with no body at all (not even `null`): status and JSON answer.
    pub async fn post_empty(&self, key: &str, path: &str) -> (u16, Value) {
        let resp = self
            .client
            .post(self.url(path))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn get(&self, key: &str, path: &str) -> (u16, Value) {
        self.get_with(&self.client, key, path).await
    }

    /// [`TestApp::get`] through `client` (one not pooling, say).
    pub async fn get_with(&self, client: &reqwest::Client, key: &str, path: &str) -> (u16, Value) {
        let resp = client
            .get(self.url(path))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    /// The payment's event types, oldest first (the API lists them newest first).
    pub async fn event_types(&self, key: &str, id: &str) -> Vec<String> {
        let (status, body) = self
            .get(key, &format!("/api/v1/events?payment={id}&limit=100"))
            .await;
        assert_eq!(status, 200, "{body}");
        let mut types: Vec<String> = body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_string())
            .collect();
        types.reverse();
        types
    }

    pub async fn metrics(&self) -> String {
        self.client
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }
}

/// Sum of a counter's samples in `/metrics` text whose labels start with
/// `labels` (none: `""`).
pub fn counter(text: &str, name: &str, labels: &str) -> f64 {
    let prefix = if labels.is_empty() {
        format!("{name} ")
    } else {
        format!("{name}{{{labels}")
    };
    text.lines()
        .filter(|l| l.starts_with(&prefix))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .sum()
}

pub fn new_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// The `id` of an object the API answered with (a payment, a refund, an
/// event, an endpoint).
pub fn id_of(object: &Value) -> String {
    object["id"]
        .as_str()
        .unwrap_or_else(|| panic!("no id: {object}"))
        .to_string()
}

/// A valid direct payment in Benin to a simulator test number.
pub fn direct_payment(phone: &str) -> Value {
    json!({
        "reference": format!("order-{}", uuid::Uuid::new_v4()),
        "amount": 1500,
        "currency": "XOF",
        "country": "BJ",
        "mode": "direct",
        "operator": "mtn-bj",
        "customer": {"phone": phone, "first_name": "Awa", "last_name": "Koné"},
        "description": "Order 42",
    })
}

/// Value of a Prometheus sample with exactly these labels, or 0.
pub fn metric(text: &str, name: &str, labels: &str) -> f64 {
    let prefix = format!("{name}{{{labels}}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The UUIDv4 an operator (MTN, pawaPay) knows our operation `id` by.
pub fn operator_id(id: &str) -> String {
    mmc_domain::operator_ids::to_operator(id, |_| unreachable!("our ids are UUIDs"))
}

/// The amount (major units) of an adapter's success in XOF, in whatever
/// decimal form its operator wrote it; `None` for anything else.
#[allow(dead_code)]
pub fn completed(status: &mmc_runtime::bindings::adapter_types::PspStatus) -> Option<u64> {
    use mmc_runtime::bindings::adapter_types::PspStatus;
    match status {
        PspStatus::Completed(s) if s.currency == "XOF" => {
            mmc_domain::settlement::major_units(&s.amount)
        }
        _ => None,
    }
}

/// The one payment that concurrent creates under one Idempotency-Key made:
/// exactly one got a 201, every other one replayed it (200) or was refused
/// while it ran (409 `idempotency_request_in_progress`).
pub fn the_one_created(results: &[(u16, Value)]) -> &Value {
    let created: Vec<&Value> = results
        .iter()
        .filter(|(s, _)| *s == 201)
        .map(|(_, p)| p)
        .collect();
    assert_eq!(
        created.len(),
        1,
        "exactly one 201: {:?}",
        results.iter().map(|r| r.0).collect::<Vec<_>>()
    );
    for (status, body) in results {
        match status {
            201 => {}
            200 => assert_eq!(body["id"], created[0]["id"]),
            409 => assert_eq!(body["error"]["code"], "idempotency_request_in_progress"),
            s => panic!("unexpected {s}: {body}"),
        }
    }
    created[0]
}

/// A seeded xorshift generator: tests that kill servers at random points
/// replay the same points on every run.
pub struct Xorshift(pub u64);

impl Xorshift {
    /// A number below `n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// The admin token of the test servers that take one (`admin_token`).
pub const ADMIN: &str = "adm_test_token_of_forty_characters_00000";

/// The operator calls the admin API lists for `subject` (a payment's id),
/// oldest first.
pub async fn calls_of(app: &TestApp, subject: &str) -> Vec<Value> {
    let path = format!("/admin/v1/payments/{subject}/calls");
    let (_, calls) = admin(app, reqwest::Method::GET, &path, None).await;
    calls["data"].as_array().cloned().unwrap_or_default()
}

/// The operator calls listed for `subject` once `n` of them are
/// `operation`, or as they stand after ten seconds: the audit writer
/// batches, so a call is listed a moment after it returned, later on a
/// loaded machine.
pub async fn calls_once_listed(
    app: &TestApp,
    subject: &str,
    operation: &str,
    n: usize,
) -> Vec<Value> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let calls = calls_of(app, subject).await;
        let listed = calls.iter().filter(|c| c["operation"] == operation).count();
        if listed >= n || std::time::Instant::now() > deadline {
            return calls;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// A request to `app`'s admin API with [`ADMIN`]: its status and JSON body.
pub async fn admin(
    app: &TestApp,
    method: reqwest::Method,
    path: &str,
    body: Option<Vec<u8>>,
) -> (u16, Value) {
    let mut req = app
        .client
        .request(method, app.admin_url(path))
        .bearer_auth(ADMIN);
    if let Some(b) = body {
        req = req.body(b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.json().await.unwrap_or(Value::Null))
}

/// The same component with a custom section appended: a new version (new
/// hash) with the same behaviour.
pub fn new_version(bytes: &[u8], tag: &str) -> Vec<u8> {
    let name = b"mmc-version";
    let mut contents = vec![name.len() as u8];
    contents.extend_from_slice(name);
    contents.extend_from_slice(tag.as_bytes());
    let mut out = bytes.to_vec();
    out.push(0); // custom section
    let mut size = contents.len();
    loop {
        let byte = (size & 0x7f) as u8;
        size >>= 7;
        if size == 0 {
            out.push(byte);
            break;
        }
        out.push(byte | 0x80);
    }
    out.extend_from_slice(&contents);
    out
}
