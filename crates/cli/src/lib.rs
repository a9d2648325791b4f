//! The `mmc` command line: the commands and their flags, and which part runs
//! each. `mmc serve` runs the service ([`serve`]); the others act on the data
//! directory (merchants, their keys and console people in [`accounts`], webhook
//! endpoints in [`webhooks`], the payments' index, the console overview's
//! figures and backups in [`store`])
//! or on a running server's admin listener ([`adapters`]). Most print one
//! JSON object; an error is one on stderr, with exit status 2. The binary
//! (`host/`) hands [`main`] the console's pages: the server serves them
//! without this crate or the server depending on them.

mod accounts;
mod adapters;
mod serve;
mod store;
mod webhooks;

use std::path::PathBuf;
use std::sync::Arc;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use mmc_accounts::{Accounts, Environment};
use mmc_config::Config;
use mmc_console_kit::Pages;
use serde_json::json;

use self::accounts::{KeysCommand, MerchantsCommand, UsersCommand};
use self::adapters::AdaptersCommand;
use self::webhooks::WebhooksCommand;

#[derive(Parser)]
#[command(name = "mmc", about = "Mobile Money Collection Service")]
pub struct Cli {
    /// TOML configuration file (also MMC_CONFIG). Every key can be overridden by MMC_* variables.
    #[arg(long, global = true, env = "MMC_CONFIG")]
    pub config: Option<PathBuf>,
    /// Data directory (SQLite file, generated keys, compiled-component cache).
    #[arg(long, global = true)]
    pub data_dir: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Serve the HTTP API.
    Serve {
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
        #[arg(long)]
        components_dir: Option<PathBuf>,
        /// On an empty data directory, create a demo merchant and a test key and print them.
        #[arg(long)]
        demo: bool,
    },
    /// Manage merchants.
    Merchants {
        #[command(subcommand)]
        command: MerchantsCommand,
    },
    /// Manage API keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Deploy, roll back, list and test operator adapters.
    Adapters {
        #[command(subcommand)]
        command: AdaptersCommand,
    },
    /// Manage the people who use the merchant console.
    Users {
        #[command(subcommand)]
        command: UsersCommand,
    },
    /// Reconcile a day of the providers' books against ours on a running
    /// server, and print the day's report as JSON (a count per category).
    Reconcile {
        /// The day, YYYY-MM-DD (UTC).
        #[arg(long)]
        date: String,
        /// One provider account (an adapter's name); all when omitted.
        #[arg(long)]
        account: Option<String>,
        #[command(flatten)]
        server: self::adapters::AdminServer,
    },
    /// Manage webhook endpoints.
    Webhooks {
        #[command(subcommand)]
        command: WebhooksCommand,
    },
    /// Index every stored payment again for the list's filters (after a
    /// rolling upgrade from a version without the index: nodes of the older
    /// version wrote payments it does not hold). The running nodes' `index`
    /// job does it; filtered lists check the records until it is done.
    Reindex,
    /// The merchant console's data.
    Console {
        #[command(subcommand)]
        command: ConsoleCommand,
    },
    /// Render the book (docs/*.md) as static HTML into a directory.
    Docs {
        /// Where the pages go (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// The book's Markdown sources.
        #[arg(long, default_value = "docs")]
        src: PathBuf,
    },
    /// Write a copy of this binary that carries the components of a folder
    /// (one file to deploy; `mmc --version` lists them with their hashes).
    Bundle {
        /// The components to carry (every `*.wasm`).
        #[arg(long, default_value = mmc_config::DEFAULT_COMPONENTS_DIR)]
        components: PathBuf,
        /// The file to write.
        #[arg(long)]
        out: PathBuf,
        /// The source's commit, recorded in the binary (default: `git rev-parse HEAD` here).
        #[arg(long)]
        commit: Option<String>,
    },
    /// Service-level objectives (`[monitoring.objectives]`).
    Slo {
        #[command(subcommand)]
        command: SloCommand,
    },
    /// Copy the SQLite store and the data directory's keys into the new
    /// directory TO, consistently, while a server runs (docs/backups.md).
    Backup {
        #[arg(long)]
        to: PathBuf,
    },
    /// Put the backup FROM in place of the store; refuses a data directory
    /// that is not empty unless --force, and a store a server has open.
    Restore {
        #[arg(long)]
        from: PathBuf,
        /// Replace the store (and keys) of a data directory that is not empty.
        #[arg(long)]
        force: bool,
    },
}

#[derive(Subcommand)]
pub enum SloCommand {
    /// Print the Prometheus rule file of the configured objectives: their
    /// error ratios and multi-window burn-rate alerts (docs/monitoring.md).
    Rules,
}

#[derive(Subcommand)]
pub enum ConsoleCommand {
    /// Count the overview's figures again from the stored payments (after
    /// payments were written without their events: a seeded or restored
    /// store; or a rolling upgrade whose older nodes dispatched events past
    /// their retention without counting them). Now, holding the outbox
    /// dispatcher's lock (and SQLite's writer: about 2 s per million
    /// payments); on a SQLite store a server has open, by that server at its
    /// next dispatch round.
    RebuildOverview,
}

/// `mmc`: loads the configuration and sets up the log, then runs the command.
pub fn main(pages: Arc<dyn Pages>) {
    let exe = std::env::current_exe().ok();
    let manifest = exe
        .as_deref()
        .and_then(|e| mmc_bundle::manifest_of(e).ok().flatten())
        .map(|c| c.manifest);
    let version: &'static str = Box::leak(version_text(manifest.as_ref()).into_boxed_str());
    let matches = Cli::command()
        .version(version)
        .long_version(version)
        .get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let mut config = match Config::load(cli.config.as_deref(), std::env::vars()) {
        Ok(c) => c,
        Err(e) => fail(&e.to_string()),
    };
    if let Some(dir) = cli.data_dir {
        config.data_dir = dir;
    }
    let filter = tracing_subscriber::EnvFilter::try_from_env("MMC_LOG").unwrap_or_else(|_| {
        // Commands other than serve print JSON or tables: keep stderr quiet.
        if matches!(cli.command, Command::Serve { .. }) {
            config.log.filter.as_str().into()
        } else {
            "warn".into()
        }
    });
    if matches!(cli.command, Command::Serve { .. }) {
        mmc_common::memory::give_back_freed_memory(config.limits.memory_trim_ms);
        if manifest.is_some()
            && let Some(exe) = &exe
        {
            match mmc_bundle::read(exe) {
                Ok(bundle) => config.builtin = bundle.map(Arc::new),
                Err(e) => fail(&format!("the components built into this binary: {e}")),
            }
        }
    }
    // Colour codes only for a terminal: a file or a pipe gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    // Traces only for the service; the other commands make no spans.
    let traces = match &cli.command {
        Command::Serve { .. } => config.monitoring.traces.clone(),
        _ => Default::default(),
    };
    let (subscriber, provider) = mmc_telemetry::logging::subscriber_with_traces(
        config.log.format,
        filter,
        std::io::stderr,
        ansi,
        &traces,
    )
    .unwrap_or_else(|e| fail(&e));
    tracing_subscriber::util::SubscriberInitExt::init(subscriber);
    run(config, cli.command, pages);
    // What the batch processor still holds goes out before the process ends.
    if let Some(p) = provider {
        let _ = p.force_flush();
        let _ = p.shutdown();
    }
}

/// Runs one command with the loaded configuration.
pub fn run(mut config: Config, command: Command, pages: Arc<dyn Pages>) {
    match command {
        Command::Serve {
            listen,
            components_dir,
            demo,
        } => {
            if let Some(l) = listen {
                config.listen = l;
            }
            if let Some(d) = components_dir {
                config.components_dir = Some(d);
            }
            serve::serve(config, demo, pages);
        }
        Command::Merchants { command } => accounts::merchants(&config, command),
        Command::Keys { command } => accounts::keys(&config, command),
        Command::Users { command } => accounts::users(&config, command),
        Command::Adapters { command } => adapters::run(&config, command),
        Command::Webhooks { command } => webhooks::run(&config, command),
        Command::Reconcile {
            date,
            account,
            server,
        } => adapters::reconcile(&config, &server, &date, account.as_deref()),
        Command::Reindex => store::reindex(&config),
        Command::Console {
            command: ConsoleCommand::RebuildOverview,
        } => store::rebuild_overview(&config),
        Command::Docs { out, src } => {
            let pages = mmc_http::docs::book::write(&src, &out)
                .unwrap_or_else(|e| fail(&format!("{}: {e}", src.display())));
            println!("{}", json!({"out": out, "pages": pages.len()}));
        }
        Command::Bundle {
            components,
            out,
            commit,
        } => {
            let exe = std::env::current_exe().unwrap_or_else(|e| fail(&e.to_string()));
            let commit = commit.unwrap_or_else(git_commit);
            let manifest = mmc_bundle::write(&exe, &components, &commit, &out)
                .unwrap_or_else(|e| fail(&e.to_string()));
            println!("{}", json!({"out": out, "manifest": manifest}));
        }
        Command::Slo {
            command: SloCommand::Rules,
        } => print!("{}", mmc_metrics::slo::rules(&config.monitoring.objectives)),
        Command::Backup { to } => store::backup(&config, &to),
        Command::Restore { from, force } => store::restore(&config, &from, force),
    }
}

/// `mmc --version`: the version, the commit, and the components the binary
/// carries with their SHA-256 (what `GET /admin/components` shows loaded).
pub fn version_text(manifest: Option<&mmc_bundle::Manifest>) -> String {
    let commit = manifest
        .map(|m| m.commit.as_str())
        .or(option_env!("MMC_COMMIT"))
        .unwrap_or("unknown");
    let mut out = format!("{}\ncommit {commit}\n", env!("CARGO_PKG_VERSION"));
    match manifest {
        Some(m) => {
            out.push_str("components built in:\n");
            for c in &m.components {
                out.push_str(&format!("  {:<12} sha256:{}\n", c.name, c.sha256));
            }
        }
        None => out.push_str(&format!(
            "components built in: none (loaded from components_dir, default {})\n",
            mmc_config::DEFAULT_COMPONENTS_DIR
        )),
    }
    out.trim_end().to_string()
}

/// The commit checked out here, `-dirty` when tracked files changed.
fn git_commit() -> String {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(head) => match git(&["status", "--porcelain", "--untracked-files=no"]) {
            Some(changes) if !changes.is_empty() => format!("{head}-dirty"),
            _ => head,
        },
        None => "unknown".into(),
    }
}

/// The error, as one JSON object on stderr; exit status 2.
pub fn fail(message: &str) -> ! {
    eprintln!("{}", json!({"error": message}));
    std::process::exit(2);
}

/// `--env`: test or live.
fn environment(env: &str) -> Environment {
    Environment::parse(env).unwrap_or_else(|| fail("--env must be test or live"))
}

/// The storage of the configured data directory.
fn open_db(config: &Config) -> mmc_db::Storage {
    mmc_server::open_db(config).unwrap_or_else(|e| fail(&e.to_string()))
}

fn open_accounts(config: &Config) -> Accounts {
    Accounts::new(open_db(config).sql)
}
