//! Service configuration: defaults, then an optional TOML file, then `MMC_*`
//! environment variables. `MMC_A__B=v` sets key `a.b` (double underscore
//! nests; the value is read as TOML when it parses, else as a string, and a
//! key that takes a string takes it as written), so every setting can be
//! overridden without a file.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

mod books;
mod http;
mod layers;
mod monitoring;
mod routing;
mod smtp;
mod storage;
mod webhooks;

use layers::{merge, parse_value, set_path};

pub use books::{BooksConfig, RateCard};
pub use http::{ConnectionConfig, RateLimitConfig};
pub use monitoring::{
    MonitoringConfig, OPERATOR_BUCKETS, Objective, ObjectivesConfig, OperatorObjective,
    TracesConfig,
};
pub use routing::{Candidate, OPERATIONS, RouteHealthConfig, RouteSpec, Rule, RuleSet};
pub use smtp::{SmtpConfig, SmtpSecurity};
pub use storage::{StorageConfig, StorageUrl};
pub use webhooks::WebhookConfig;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub listen: SocketAddr,
    pub data_dir: PathBuf,
    /// Where everything is stored (see [`StorageConfig`]).
    pub storage: StorageConfig,
    /// Where the `.wasm` components are loaded from at start; unset: those
    /// the binary carries (`mmc bundle`), else `target/components`.
    pub components_dir: Option<PathBuf>,
    /// The components the running binary carries (never from the file).
    #[serde(skip)]
    pub builtin: Option<std::sync::Arc<mmc_bundle::Bundle>>,
    /// Compiled-code cache; defaults to `<data_dir>/cache`.
    pub cache_dir: Option<PathBuf>,
    /// Base URL customers and merchants see (checkout links, callbacks).
    pub public_base_url: Option<String>,
    pub limits: Limits,
    /// Path prefix → API component. Longest prefix wins.
    pub routes: Vec<Route>,
    /// environment → (operator slug or `*`) → the adapters serving it (see [`RouteSpec`]).
    pub routing: BTreeMap<String, BTreeMap<String, RouteSpec>>,
    /// When a route counts as failing, and how it comes back.
    pub route_health: RouteHealthConfig,
    /// Per-component settings, secrets and outbound allow-list.
    pub components: BTreeMap<String, ComponentConfig>,
    pub log: LogConfig,
    pub webhooks: WebhookConfig,
    pub rate_limit: RateLimitConfig,
    /// Connection caps and clocks (header read, body read, idle).
    pub connections: ConnectionConfig,
    /// The merchant console's rules: its bounds on sign-in, and which
    /// refunds ask for a fresh code.
    pub console: ConsoleConfig,
    /// The admin plane (`/admin/v1`): its own listener and token.
    pub admin: AdminConfig,
    /// The admin token, as `admin.token` (kept so `MMC_ADMIN_TOKEN` still works).
    pub admin_token: Option<String>,
    /// The mail relay the console sends sign-in links through; unset, an
    /// owner who resets a member's access is shown the new link instead.
    pub smtp: Option<SmtpConfig>,
    /// Reconciliation against the providers' books, and their rate cards.
    pub books: BooksConfig,
    /// Backlog sampling, service-level objectives and traces.
    pub monitoring: MonitoringConfig,
}

/// The admin API never shares the public listener: it deploys the code that
/// decides payments, so it is reachable only where the operator binds it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdminConfig {
    /// Address of the admin listener (loopback by default).
    pub listen: SocketAddr,
    /// At least [`MIN_ADMIN_TOKEN_LEN`] characters; when unset, one is
    /// generated and written to `<data_dir>/admin_token` (mode 0600).
    pub token: Option<String>,
}

/// The merchant console's rules.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleConfig {
    /// Password checks (Argon2id: 7 MiB and tens of milliseconds of a core
    /// each) run at most this many at a time.
    pub password_checks_at_once: usize,
    /// A sign-in that finds no place this long is answered 429 unhashed.
    pub password_check_wait_ms: u64,
    /// A live refund of more than this (major units of the payment's
    /// currency; a whole refund counts the payment's amount) asks the person
    /// for a fresh code from their authenticator; 0: every live refund.
    pub refund_code_above: u64,
}

impl Default for ConsoleConfig {
    fn default() -> Self {
        ConsoleConfig {
            password_checks_at_once: 2,
            password_check_wait_ms: 200,
            refund_code_above: 100_000,
        }
    }
}

/// Shorter admin tokens are refused at start (an empty one used to mean no
/// authentication at all).
pub const MIN_ADMIN_TOKEN_LEN: usize = 32;

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            listen: "127.0.0.1:9090".parse().expect("valid address"),
            token: None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Deadline of one call into an API component.
    pub api_deadline_ms: u64,
    /// Deadline of one call into an operator adapter.
    pub adapter_deadline_ms: u64,
    /// Linear memory cap of one component instance.
    pub memory_mib: u64,
    /// Largest request body accepted (413 beyond).
    pub max_body_bytes: usize,
    /// Default timeout of an outbound HTTP request from a component.
    pub outbound_timeout_ms: u64,
    /// Calls running at once into API components, and separately into adapters
    /// (instance slots of the pool); more wait for a free slot.
    pub concurrent_calls: u32,
    /// Adapter slots when they should differ from `concurrent_calls`
    /// (adapters mostly wait on operators; API calls use the CPU).
    pub adapter_concurrent_calls: Option<u32>,
    /// How long a call waits for a free slot before it is refused as busy
    /// (never longer than its deadline, the default). A busy payment
    /// initiation sends nothing and answers `503 operator_busy`.
    pub slot_wait_ms: Option<u64>,
    /// Every this long, memory the allocator holds free is handed back to
    /// the system (glibc); 0: never.
    pub memory_trim_ms: u64,
    /// Idle adapter instances kept for their next call, all threads together
    /// (only adapters with `calls_per_instance` above 1 keep any).
    pub warm_instances: u32,
    /// Every instance slot reserves 4 GiB of address space and a guard
    /// region, so Wasm code needs no bounds checks; false: a slot reserves
    /// `memory_mib` and the code checks each access (a little slower), for
    /// hosts that cap virtual memory (`ulimit -v`, valgrind).
    pub reserve_address_space: bool,
}

impl Limits {
    pub fn adapter_slots(&self) -> u32 {
        self.adapter_concurrent_calls
            .unwrap_or(self.concurrent_calls)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Generation {
    /// `collect.payment`, error body `{error:{type,code,message,param,doc_url}}`.
    Current,
    /// `/collect/mobile-money/`, error body `{error, code}`.
    Legacy,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Route {
    pub prefix: String,
    pub component: String,
    #[serde(default = "current")]
    pub generation: Generation,
    /// Served without an API key (schema documents, the hosted checkout page).
    #[serde(default)]
    pub public: bool,
    /// Overrides `limits.max_body_bytes` for this route (CSV uploads).
    #[serde(default)]
    pub max_body_bytes: Option<usize>,
}

fn current() -> Generation {
    Generation::Current
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ComponentConfig {
    /// Hosts (`host` or `host:port`) this component may call. Empty: none.
    pub allowed_hosts: Vec<String>,
    pub settings: BTreeMap<String, String>,
    pub secrets: BTreeMap<String, String>,
    /// Overrides `limits.*_deadline_ms` for this component.
    pub deadline_ms: Option<u64>,
    /// Overrides `limits.memory_mib` for this component.
    pub memory_mib: Option<u64>,
    /// Adapters only: how many calls one instance serves before it is
    /// dropped. 1 (the default): a fresh instance for every call, so no call
    /// sees what another left in memory. More keeps an instance warm between
    /// calls of a thread, for adapters whose start costs more than their call
    /// (an interpreter's, as componentize-py's); their code must keep nothing
    /// of one payment for the next. A failed call always drops its instance.
    pub calls_per_instance: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// `tracing` filter, e.g. `info,mmc_runtime=debug`.
    pub filter: String,
    /// `text` (for people) or `json` (one object a line, for a log pipeline).
    pub format: LogFormat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            filter: "info".into(),
            format: LogFormat::Text,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            api_deadline_ms: 5_000,
            adapter_deadline_ms: 30_000,
            memory_mib: 64,
            max_body_bytes: 1024 * 1024,
            outbound_timeout_ms: 20_000,
            concurrent_calls: 256,
            adapter_concurrent_calls: None,
            slot_wait_ms: None,
            memory_trim_ms: 1_000,
            warm_instances: 8,
            reserve_address_space: true,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        let route = |prefix: &str, component: &str, generation: Generation, public: bool| Route {
            prefix: prefix.into(),
            component: component.into(),
            generation,
            public,
            max_body_bytes: None,
        };
        Config {
            listen: "127.0.0.1:8080".parse().expect("valid default address"),
            data_dir: PathBuf::from("./data"),
            storage: StorageConfig::default(),
            components_dir: None,
            builtin: None,
            cache_dir: None,
            public_base_url: None,
            limits: Limits::default(),
            routes: vec![
                route(
                    "/api/v1/collect/payments",
                    "collect",
                    Generation::Current,
                    false,
                ),
                route(
                    "/api/v1/collect/refunds",
                    "collect",
                    Generation::Current,
                    false,
                ),
                route(
                    "/api/v1/collect/openapi.json",
                    "collect",
                    Generation::Current,
                    true,
                ),
                route("/checkout", "collect", Generation::Current, true),
                // Operators' notifications: authenticated by the adapter, not by an API key.
                route("/api/v1/psp", "collect", Generation::Current, true),
                route(
                    "/api/v1/collect/mobile-money",
                    "legacy",
                    Generation::Legacy,
                    false,
                ),
                route(
                    "/api/v1/collect/mobile-money/openapi.json",
                    "legacy",
                    Generation::Legacy,
                    true,
                ),
                route(
                    "/api/v1/collect/operators",
                    "legacy",
                    Generation::Legacy,
                    false,
                ),
                // CSV imports: the bulk component enforces its own `max_csv_bytes` (1 MiB) with a
                // clear error; the route admits the file plus multipart overhead.
                Route {
                    max_body_bytes: Some(2 * 1024 * 1024),
                    ..route("/api/v1/bulk-payments", "bulk", Generation::Current, false)
                },
            ],
            routing: BTreeMap::from([(
                "test".to_string(),
                BTreeMap::from([("*".to_string(), RouteSpec::from("simulator"))]),
            )]),
            route_health: RouteHealthConfig::default(),
            components: BTreeMap::new(),
            log: LogConfig::default(),
            webhooks: Default::default(),
            rate_limit: Default::default(),
            connections: Default::default(),
            console: ConsoleConfig::default(),
            admin: AdminConfig::default(),
            admin_token: None,
            smtp: None,
            books: BooksConfig::default(),
            monitoring: MonitoringConfig::default(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("invalid configuration: {0}")]
    Invalid(String),
}

/// The components folder when none is configured and the binary carries none.
pub const DEFAULT_COMPONENTS_DIR: &str = "target/components";

impl Config {
    /// Where this node's components come from: the configured folder, else
    /// those the binary carries, else [`DEFAULT_COMPONENTS_DIR`].
    pub fn components(&self) -> mmc_bundle::ComponentsSource {
        use mmc_bundle::ComponentsSource;
        match (&self.components_dir, &self.builtin) {
            (Some(dir), _) => ComponentsSource::Dir(dir.clone()),
            (None, Some(b)) => ComponentsSource::Builtin(b.clone()),
            (None, None) => ComponentsSource::Dir(PathBuf::from(DEFAULT_COMPONENTS_DIR)),
        }
    }

    /// Defaults ← file (if any) ← `MMC_*` variables of `env`.
    pub fn load(
        file: Option<&Path>,
        env: impl IntoIterator<Item = (String, String)>,
    ) -> Result<Config, ConfigError> {
        let mut tree = toml::Table::try_from(Config::default())
            .map_err(|e| ConfigError::Invalid(e.to_string()))?;
        if let Some(path) = file {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.to_path_buf(),
                source,
            })?;
            let file_tree: toml::Table = text.parse().map_err(|e: toml::de::Error| {
                ConfigError::Invalid(format!("{}: {e}", path.display()))
            })?;
            merge(&mut tree, file_tree);
        }
        // Each value as TOML where it parses (numbers, booleans, arrays), else
        // as a string; but a key that takes a string takes it as written
        // (`MMC_ADMIN__TOKEN=123` is the token "123", a PIN `0042` keeps its
        // zeros). Which keys take strings, serde knows and the tree does not
        // (an unset `Option` is absent from it), so a value refused as the
        // wrong type at its own key is set again as the string it was.
        let mut typed: Vec<(Vec<String>, String)> = Vec::new();
        for (name, value) in env {
            let Some(key) = name.strip_prefix("MMC_") else {
                continue;
            };
            // Read by the CLI itself, not configuration keys; `MMC_TEST_*` are
            // the test suite's (`MMC_TEST_DATABASE_URL`), set around every process it starts.
            if matches!(key, "CONFIG" | "LOG" | "ADMIN_URL") || key.starts_with("TEST_") {
                continue;
            }
            let path: Vec<String> = key.split("__").map(|s| s.to_ascii_lowercase()).collect();
            let parsed = parse_value(&value);
            if !parsed.is_str() {
                typed.push((path.clone(), value));
            }
            set_path(&mut tree, &path, parsed);
        }
        let deserialize = |tree: &toml::Table| {
            toml::Value::Table(tree.clone())
                .try_into::<Config>()
                .map_err(|e| e.to_string())
        };
        // Whether deserialisation error `err` is about the key at `path`.
        let at = |err: &str, path: &[String]| err.contains(&format!("in `{}`", path.join(".")));
        let mut result = deserialize(&tree);
        while let Err(err) = &result {
            let Some(i) = typed.iter().position(|(path, _)| at(err, path)) else {
                break;
            };
            let (path, raw) = typed.swap_remove(i);
            let mut as_text = tree.clone();
            set_path(&mut as_text, &path, toml::Value::String(raw));
            match deserialize(&as_text) {
                // Not a string key either (`limits.memory_mib=-1`): the first error says why.
                Err(again) if at(&again, &path) => break,
                again => (tree, result) = (as_text, again),
            }
        }
        let config = result.map_err(ConfigError::Invalid)?;
        config.validate()?;
        Ok(config)
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.limits.memory_mib == 0
            || self.limits.concurrent_calls == 0
            || self.limits.adapter_slots() == 0
            || self.limits.api_deadline_ms == 0
            || self.limits.adapter_deadline_ms == 0
        {
            return Err(ConfigError::Invalid("limits must be positive".into()));
        }
        for (name, c) in &self.components {
            if c.calls_per_instance == Some(0) {
                return Err(ConfigError::Invalid(format!(
                    "components.{name}.calls_per_instance must be at least 1 (1: a fresh instance for every call)"
                )));
            }
        }
        self.books.check().map_err(ConfigError::Invalid)?;
        self.monitoring
            .objectives
            .check()
            .map_err(ConfigError::Invalid)?;
        self.monitoring
            .traces
            .check()
            .map_err(ConfigError::Invalid)?;
        let c = &self.connections;
        if c.header_read_timeout_ms == 0
            || c.body_read_timeout_ms == 0
            || c.idle_timeout_ms == 0
            || c.max_connections == 0
            || c.max_connections_per_client == 0
            || c.body_reads_per_key == 0
            || c.body_reads_per_client == 0
        {
            return Err(ConfigError::Invalid(
                "connections.* must be positive".into(),
            ));
        }
        let w = &self.webhooks;
        if w.event_retention_ms()
            .is_some_and(|kept| kept <= w.max_age_ms)
        {
            // An event must outlive its deliveries' retries, or a retry would find nothing to send.
            return Err(ConfigError::Invalid(format!(
                "webhooks.event_retention_days ({}) must be longer than webhooks.max_age_ms ({} ms, the delivery retries), or 0 to keep events forever",
                w.event_retention_days, w.max_age_ms
            )));
        }
        if let Some(mib) = self.storage.wal_restart_mib {
            if !matches!(self.storage_url()?, StorageUrl::Sqlite(_)) {
                return Err(ConfigError::Invalid(
                    "storage.wal_restart_mib applies to SQLite only; PostgreSQL manages its own WAL (max_wal_size)".into(),
                ));
            }
            let least = mmc_storage_sqlite::WAL_RESTART_MIB_MIN;
            if mib < least {
                return Err(ConfigError::Invalid(format!(
                    "storage.wal_restart_mib is {mib}; the least is {least} (below it the writer would stop for a restart several times a second)"
                )));
            }
        }
        if let Some(smtp) = &self.smtp {
            if smtp.username.is_some() != smtp.password.is_some() {
                return Err(ConfigError::Invalid(
                    "smtp.username and smtp.password go together".into(),
                ));
            }
            if smtp.password.is_some() && smtp.security == SmtpSecurity::None {
                return Err(ConfigError::Invalid(
                    "smtp.password is never sent without TLS: set smtp.security to tls or starttls"
                        .into(),
                ));
            }
        }
        for (env, routes) in &self.routing {
            if env != "test" && env != "live" {
                return Err(ConfigError::Invalid(format!(
                    "routing.{env}: environment must be test or live"
                )));
            }
            for (operator, spec) in routes {
                spec.check(&format!("routing.{env}.{operator}"))
                    .map_err(ConfigError::Invalid)?;
            }
        }
        Ok(())
    }

    /// The configured admin token (`admin.token`, else `admin_token`), if any.
    pub fn configured_admin_token(&self) -> Option<&str> {
        self.admin.token.as_deref().or(self.admin_token.as_deref())
    }

    /// Where a generated admin token is kept.
    pub fn admin_token_path(&self) -> PathBuf {
        self.data_dir.join("admin_token")
    }

    pub fn cache_dir(&self) -> PathBuf {
        self.cache_dir
            .clone()
            .unwrap_or_else(|| self.data_dir.join("cache"))
    }

    pub fn db_path(&self) -> PathBuf {
        self.data_dir.join("mmc.db")
    }

    /// `storage.url`, checked: SQLite in the data directory when unset.
    pub fn storage_url(&self) -> Result<StorageUrl, ConfigError> {
        let Some(url) = self.storage.url.as_deref().map(str::trim) else {
            return Ok(StorageUrl::Sqlite(self.db_path()));
        };
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(ConfigError::Invalid(
                    "storage.url: sqlite:// needs a file path (sqlite:///var/lib/mmc/mmc.db)"
                        .into(),
                ));
            }
            Ok(StorageUrl::Sqlite(PathBuf::from(path)))
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(StorageUrl::Postgres(url.to_string()))
        } else {
            Err(ConfigError::Invalid(format!(
                "storage.url must start with sqlite:// or postgres://, not {:?}",
                url.split("://").next().unwrap_or(url)
            )))
        }
    }

    pub fn component(&self, name: &str) -> ComponentConfig {
        self.components.get(name).cloned().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
