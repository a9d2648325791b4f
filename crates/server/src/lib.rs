//! Assembles the service from a [`Config`]: storage, capabilities, runtime,
//! components, workers, the site its listeners serve. Used by `mmc serve`
//! and by the tests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

pub mod backlog;
pub mod site;
pub mod workers;

use crate::site::Site;
use mmc_accounts::Accounts;
use mmc_capabilities::outbound_http::ReqwestClient;
use mmc_common::clock::SystemClock;
use mmc_common::rate_limit::RateLimiter;
use mmc_config::Config;
use mmc_console_kit::Pages;
use mmc_db::Storage;
use mmc_http::App;
use mmc_metrics::Metrics;
use mmc_runtime::{Runtime, Services};

/// Everything a running service holds.
pub struct Service {
    pub site: Arc<Site>,
    pub running: Running,
    /// Released at a graceful shutdown, so other nodes take the jobs over at once.
    pub leases: Arc<mmc_leases::Leases>,
}

/// The storage `storage.url` names (SQLite in the data directory by default).
pub fn open_db(config: &Config) -> anyhow::Result<Storage> {
    Storage::open(config)
}

/// Binds, loads the components and starts serving and the workers, with
/// `pages` under `/console` (`mmc_console::Pages`). Must run inside a tokio
/// runtime.
pub async fn start(config: Config, pages: Arc<dyn Pages>) -> anyhow::Result<Service> {
    // Refused before anything is bound: a short admin token is no protection.
    let (admin_token, token_file) = mmc_admin::token::resolve(&config)?;
    let db = open_db(&config)?;
    let listener = TcpListener::bind(config.listen).await?;
    let addr = listener.local_addr()?;
    let admin_listener = TcpListener::bind(config.admin.listen).await?;
    let admin_addr = admin_listener.local_addr()?;
    let base_url = config
        .public_base_url
        .clone()
        .unwrap_or_else(|| format!("http://{addr}"));
    let leases = mmc_leases::Leases::new(db.sql.clone());
    let services = Services {
        audit: mmc_audit::Audit::start(db.sql.clone())?,
        storage: db.backend.clone(),
        http: Arc::new(ReqwestClient::new(tokio::runtime::Handle::current())),
        clock: Arc::new(SystemClock),
        metrics: Arc::new(Metrics::default()),
        cache: Arc::default(),
        journal: mmc_capabilities::journal::Journal::start(db.backend.clone()),
        nodes: leases.clone(),
    };
    let runtime = Runtime::new(&config, services)?;
    runtime.set_service_base_url(&base_url);
    let components = config.components();
    let rt = runtime.clone();
    let source = components.clone();
    let names = tokio::task::spawn_blocking(move || rt.load_from(&source)).await??;
    if !names.iter().any(|n| n == "collect") {
        tracing::warn!(components = %components.describe(), "the collect component is not among the components loaded; run `make components`");
    }
    if let Some(path) = token_file {
        tracing::info!(file = %path.display(), "admin token (generated) is in this file");
    }
    let admin = Arc::new(mmc_admin::Admin::new(
        runtime.clone(),
        db.sql.clone(),
        components,
        admin_token,
    )?);
    let restored = tokio::task::block_in_place(|| admin.restore())?;
    if !restored.is_empty() {
        tracing::info!(?restored, "deployed adapter versions restored");
    }
    let mailer = config
        .smtp
        .as_ref()
        .map(mmc_mail::Mailer::new)
        .transpose()?;
    let sealer = mmc_webhooks::sealing::Sealer::resolve(&config)?;
    let webhooks = mmc_webhooks::Webhooks::new(db.sql.clone(), config.webhooks.clone(), sealer)?;
    webhooks.set_event_bodies(Arc::new(CollectEventBodies(runtime.clone())));
    let drain = mmc_common::shutdown::Drain::new();
    let books =
        mmc_reconciliation::Books::new(runtime.clone(), db.sql.clone(), config.books.clone());
    webhooks.set_metrics(runtime.services.metrics.clone());
    mmc_webhooks::spawn(webhooks.clone(), drain.clone());
    crate::backlog::spawn(
        db.sql.clone(),
        runtime.services.metrics.clone(),
        Duration::from_millis(config.monitoring.backlog_sample_ms.max(100)),
        drain.clone(),
    );
    let limits = &config.rate_limit;
    let app = Arc::new(App {
        rate_limiter: RateLimiter::with_rate(limits.per_second, limits.burst),
        client_limiter: RateLimiter::with_rate(
            limits.per_client_per_second,
            limits.per_client_burst,
        ),
        runtime: runtime.clone(),
        webhooks,
        accounts: Accounts::new(db.sql.clone()),
        books: books.clone(),
        routes: config.routes.clone(),
        max_body_bytes: config.limits.max_body_bytes,
        base_url: base_url.clone(),
        connections: mmc_http::connections::Connections::new(
            config.connections.clone(),
            runtime.services.metrics.clone(),
        ),
        // On PostgreSQL a read is a network round trip: it stays off the workers.
        inline_reads: matches!(config.storage_url()?, mmc_config::StorageUrl::Sqlite(_))
            && tokio::runtime::Handle::current().runtime_flavor()
                == tokio::runtime::RuntimeFlavor::MultiThread,
        drain,
    });
    crate::workers::spawn(runtime.clone(), leases.clone(), app.drain.clone());
    crate::workers::spawn_fleet(admin.clone(), app.clone(), leases.clone());
    mmc_reconciliation::schedule::spawn(books, leases.clone(), app.drain.clone());
    // The console pages' words, known to its frame before any page is served.
    mmc_console_kit::add_words(pages.words());
    let site = Arc::new(Site {
        app,
        console: mmc_console_kit::Console::new(
            db.sql.clone(),
            &base_url,
            &config.console,
            runtime.services.metrics.clone(),
        )
        .with_mailer(mailer)
        .with_refund_code_above(config.console.refund_code_above),
        pages,
        admin,
    });
    let task = tokio::spawn(site::serve(site.clone(), listener));
    let admin_task = tokio::spawn(site::serve_admin(site.clone(), admin_listener));
    Ok(Service {
        site,
        running: Running {
            addr,
            task,
            admin_addr,
            admin_task,
        },
        leases,
    })
}

/// A running server: its bound addresses and the tasks serving them.
pub struct Running {
    pub addr: SocketAddr,
    pub task: tokio::task::JoinHandle<()>,
    pub admin_addr: SocketAddr,
    pub admin_task: tokio::task::JoinHandle<()>,
}

impl Service {
    /// Graceful shutdown (SIGTERM): stops accepting, waits up to `grace`
    /// for in-flight requests and jobs, then releases this node's leases.
    /// True when everything finished within `grace`.
    pub async fn shutdown(&self, grace: std::time::Duration) -> bool {
        let app = &self.site.app;
        app.drain.start();
        let deadline = std::time::Instant::now() + grace;
        let connections = app.connections.clone();
        let idle = app
            .drain
            .wait_idle(deadline, || connections.open() > 0)
            .await;
        // The audit of the last adapter calls is written in batches 50 ms apart.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        if !idle {
            // A job still runs: its lease stays (renewed by the heartbeat
            // until the process ends, then expiring), so no other node
            // starts the same job alongside it.
            tracing::warn!("grace period over with work still running; leases left to expire");
            return false;
        }
        let leases = self.leases.clone();
        match tokio::task::spawn_blocking(move || leases.release_all()).await {
            Ok(Ok(n)) => tracing::info!(leases = n, idle, "drained; leases released"),
            Ok(Err(e)) => tracing::warn!(error = %e, "leases not released: they expire"),
            Err(e) => tracing::warn!(error = %e, "lease release panicked"),
        }
        idle
    }
}

/// Compact events' bodies, built by the `collect` component.
struct CollectEventBodies(Arc<Runtime>);

impl mmc_webhooks::EventBodies for CollectEventBodies {
    fn render(&self, payloads: Vec<Vec<u8>>) -> Result<Vec<Option<Vec<u8>>>, String> {
        self.0.render_events(payloads).map_err(|e| e.to_string())
    }
}
