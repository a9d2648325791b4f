//! `mmc`: the service binary and its operator CLI.

use std::path::PathBuf;

use clap::{Parser, Subcommand};
use mmc_host::accounts::{Accounts, Environment};
use mmc_host::config::Config;
use serde_json::json;

#[derive(Parser)]
#[command(name = "mmc", version, about = "Mobile Money Collection Service")]
struct Cli {
    /// TOML configuration file (also MMC_CONFIG). Every key can be overridden by MMC_* variables.
    #[arg(long, global = true, env = "MMC_CONFIG")]
    config: Option<PathBuf>,
    /// Data directory (SQLite file, generated keys, compiled-component cache).
    #[arg(long, global = true)]
    data_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
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
    /// Render the book (docs/*.md) as static HTML into a directory.
    Docs {
        /// Where the pages go (created if missing).
        #[arg(long)]
        out: PathBuf,
        /// The book's Markdown sources.
        #[arg(long, default_value = "docs")]
        src: PathBuf,
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
enum AdaptersCommand {
    /// Upload a new version of adapter NAME to a running server (hot swap).
    Deploy {
        name: String,
        file: PathBuf,
        #[command(flatten)]
        server: AdminServer,
    },
    /// Go back to the previous version of adapter NAME.
    Rollback {
        name: String,
        #[command(flatten)]
        server: AdminServer,
    },
    /// List the adapters a running server serves, with their versions.
    List {
        #[command(flatten)]
        server: AdminServer,
    },
    /// Scaffold adapter NAME in a checkout of this repository: the adapter,
    /// its fake operator and its tests (docs/adapters.md).
    New {
        name: String,
        /// The adapter's language: rust or python.
        #[arg(long)]
        lang: String,
        /// The repository's root.
        #[arg(long, default_value = ".")]
        root: PathBuf,
    },
    /// Run the adapter contract suite on FILE in a sandbox; prints a pass/fail table.
    Test {
        file: PathBuf,
        /// A setting given to the adapter, KEY=VALUE (repeatable), e.g. --setting operators=mtn-bj
        #[arg(long = "setting", value_parser = key_value)]
        settings: Vec<(String, String)>,
        /// A secret given to the adapter, KEY=VALUE (repeatable).
        #[arg(long = "secret", value_parser = key_value)]
        secrets: Vec<(String, String)>,
        #[arg(long)]
        json: bool,
    },
}

#[derive(clap::Args)]
struct AdminServer {
    /// Base URL of the running server's admin listener (`admin.listen`).
    #[arg(long, env = "MMC_ADMIN_URL", default_value = "http://127.0.0.1:9090")]
    server: String,
    /// The admin token: `admin.token` in the configuration, or the one
    /// generated into `<data_dir>/admin_token` (read from there when omitted).
    #[arg(long, env = "MMC_ADMIN_TOKEN")]
    token: Option<String>,
    /// Output is always one JSON object; accepted for scripts that pass it.
    #[arg(long)]
    json: bool,
}

#[derive(Subcommand)]
enum WebhooksCommand {
    /// Register an endpoint; prints {"id","secret",...}. The secret is shown only once.
    Add {
        #[arg(long)]
        merchant: String,
        #[arg(long, value_parser = ["test", "live"])]
        env: String,
        #[arg(long)]
        url: String,
        /// Comma-separated event types, or * (default).
        #[arg(long, default_value = "*")]
        events: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum MerchantsCommand {
    /// Create a merchant; prints {"id","name"}.
    Create {
        #[arg(long)]
        name: String,
        /// Output is always one JSON object; the flag is accepted for scripts that pass it.
        #[arg(long)]
        json: bool,
    },
    /// Change a merchant's rules in one environment; prints what was set.
    Update {
        merchant_id: String,
        #[arg(long, value_parser = ["test", "live"])]
        env: String,
        /// Maker-checker on bulk payouts: a batch is approved by another key than its creator's
        /// (default: on in live, off in test).
        #[arg(long, action = clap::ArgAction::Set)]
        require_second_approver: bool,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum UsersCommand {
    /// Invite a console user; prints {"id","email","role","merchant_id","sign_in_link","expires_ms"}.
    /// The link works once, for 72 hours: the user chooses a password there.
    Create {
        #[arg(long)]
        merchant: String,
        #[arg(long)]
        email: String,
        #[arg(long, value_parser = ["owner", "developer", "finance", "support"])]
        role: String,
        #[arg(long)]
        json: bool,
    },
    /// A lost password or second factor: clears both, ends the user's sessions and prints a
    /// new one-time sign-in link, as create does.
    Reset {
        #[arg(long)]
        email: String,
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create an API key; prints {"id","key","environment","merchant_id"}. The key is shown only once.
    Create {
        #[arg(long)]
        merchant: String,
        #[arg(long, value_parser = ["test", "live"])]
        env: String,
        /// Comma-separated: payments:write, payments:read, bulk:create, bulk:approve,
        /// webhooks:manage, webhooks:resend (default: all of them).
        #[arg(long)]
        scopes: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Revoke an API key by its id; a running server refuses it from the next request.
    Revoke {
        key_id: String,
        #[arg(long)]
        json: bool,
    },
}

fn main() {
    let cli = Cli::parse();
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
    // Colour codes only for a terminal: a file or a pipe gets plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::util::SubscriberInitExt::init(mmc_host::logging::subscriber(
        config.log.format,
        filter,
        std::io::stderr,
        ansi,
    ));
    match cli.command {
        Command::Serve {
            listen,
            components_dir,
            demo,
        } => {
            if let Some(l) = listen {
                config.listen = l;
            }
            if let Some(d) = components_dir {
                config.components_dir = d;
            }
            serve(config, demo);
        }
        Command::Merchants {
            command: MerchantsCommand::Create { name, .. },
        } => {
            let m = accounts(&config)
                .create_merchant(&name)
                .unwrap_or_else(|e| fail(&e.to_string()));
            println!("{}", json!(m));
        }
        Command::Merchants {
            command:
                MerchantsCommand::Update {
                    merchant_id,
                    env,
                    require_second_approver,
                    ..
                },
        } => {
            let env =
                Environment::parse(&env).unwrap_or_else(|| fail("--env must be test or live"));
            accounts(&config)
                .set_require_second_approver(&merchant_id, env, require_second_approver)
                .unwrap_or_else(|e| fail(&e.to_string()));
            println!(
                "{}",
                json!({"id": merchant_id, "environment": env, "require_second_approver": require_second_approver})
            );
        }
        Command::Keys {
            command:
                KeysCommand::Create {
                    merchant,
                    env,
                    scopes,
                    ..
                },
        } => {
            let env =
                Environment::parse(&env).unwrap_or_else(|| fail("--env must be test or live"));
            let scopes = scopes.map(|s| {
                mmc_host::scopes::Scopes::parse(&s)
                    .unwrap_or_else(|e| fail(&format!("--scopes: {e}")))
            });
            let k = accounts(&config)
                .create_key_with(&merchant, env, scopes)
                .unwrap_or_else(|e| fail(&e.to_string()));
            println!("{}", json!(k));
        }
        Command::Adapters { command } => adapters(&config, command),
        Command::Users { command } => {
            use mmc_host::console::users::{Role, Users};
            let db = mmc_host::server::open_db(&config).unwrap_or_else(|e| fail(&e.to_string()));
            let users = Users::new(db.sql);
            let invitation = match command {
                UsersCommand::Create {
                    merchant,
                    email,
                    role,
                    ..
                } => {
                    let role = Role::parse(&role)
                        .unwrap_or_else(|| fail("--role: owner, developer, finance or support"));
                    users.invite(&merchant, &email, role)
                }
                UsersCommand::Reset { email, .. } => users.reset(&email),
            }
            .unwrap_or_else(|e| fail(&e.to_string()));
            let base = config
                .public_base_url
                .clone()
                .unwrap_or_else(|| format!("http://{}", config.listen));
            let u = &invitation.user;
            println!(
                "{}",
                json!({"id": u.id, "email": u.email, "role": u.role, "merchant_id": u.merchant_id,
                       "sign_in_link": format!("{base}{}", invitation.path), "expires_ms": invitation.expires_ms})
            );
        }
        Command::Webhooks {
            command:
                WebhooksCommand::Add {
                    merchant,
                    env,
                    url,
                    events,
                    ..
                },
        } => {
            let env =
                Environment::parse(&env).unwrap_or_else(|| fail("--env must be test or live"));
            let db = mmc_host::server::open_db(&config).unwrap_or_else(|e| fail(&e.to_string()));
            if Accounts::new(db.sql.clone())
                .merchant(&merchant)
                .unwrap_or_else(|e| fail(&e.to_string()))
                .is_none()
            {
                fail(&format!("no merchant with id {merchant}"));
            }
            let sealer = mmc_host::webhooks::sealing::Sealer::resolve(&config)
                .unwrap_or_else(|e| fail(&e.to_string()));
            let webhooks =
                mmc_host::webhooks::Webhooks::new(db.sql, config.webhooks.clone(), sealer)
                    .unwrap_or_else(|e| fail(&e.to_string()));
            let events: Vec<String> = events
                .split(',')
                .map(|e| e.trim().to_string())
                .filter(|e| !e.is_empty())
                .collect();
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            let endpoint = rt
                .block_on(webhooks.create_endpoint(&merchant, env, &url, events, None))
                .unwrap_or_else(|e| fail(&e.to_string()));
            println!("{}", json!(endpoint));
        }
        Command::Reindex => {
            let db = mmc_host::server::open_db(&config).unwrap_or_else(|e| fail(&e.to_string()));
            // collect's `meta` keys: with neither, its job starts the
            // backfill from the first payment.
            let mut tx = db
                .backend
                .begin("collect")
                .unwrap_or_else(|e| fail(&e.to_string()));
            for key in [
                mmc_domain::payment::listing_meta::READY,
                mmc_domain::payment::listing_meta::BACKFILL,
            ] {
                tx.delete("meta", key)
                    .unwrap_or_else(|e| fail(&e.to_string()));
            }
            tx.commit().unwrap_or_else(|e| fail(&e.to_string()));
            println!("{}", json!({"reindex": "started"}));
        }
        Command::Docs { out, src } => {
            let pages = mmc_host::http::docs::book::write(&src, &out)
                .unwrap_or_else(|e| fail(&format!("{}: {e}", src.display())));
            println!("{}", json!({"out": out, "pages": pages.len()}));
        }
        Command::Backup { to } => {
            let m = mmc_host::backup::backup(&config, &to).unwrap_or_else(|e| fail(&e.to_string()));
            println!("{}", json!({"backup": to, "manifest": m}));
        }
        Command::Restore { from, force } => {
            let m = mmc_host::backup::restore(&config, &from, force)
                .unwrap_or_else(|e| fail(&e.to_string()));
            println!(
                "{}",
                json!({"restored": from, "data_dir": config.data_dir, "manifest": m})
            );
        }
        Command::Keys {
            command: KeysCommand::Revoke { key_id, .. },
        } => {
            accounts(&config)
                .revoke_key(&key_id)
                .unwrap_or_else(|e| fail(&e.to_string()));
            println!("{}", json!({"id": key_id, "revoked": true}));
        }
    }
}

fn adapters(config: &Config, command: AdaptersCommand) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let call =
        |server: &AdminServer, method: reqwest::Method, path: String, body: Option<Vec<u8>>| {
            let token = server.token.clone().unwrap_or_else(|| {
                let path = config.admin_token_path();
                std::fs::read_to_string(&path)
                    .map(|t| t.trim().to_string())
                    .unwrap_or_else(|e| {
                        fail(&format!(
                            "no --token given and {} cannot be read: {e}",
                            path.display()
                        ))
                    })
            });
            rt.block_on(async {
                let client = reqwest::Client::new();
                let mut req = client
                    .request(
                        method,
                        format!("{}{path}", server.server.trim_end_matches('/')),
                    )
                    .bearer_auth(&token);
                if let Some(b) = body {
                    req = req.header("content-type", "application/wasm").body(b);
                }
                let resp = req
                    .send()
                    .await
                    .unwrap_or_else(|e| fail(&format!("cannot reach {}: {e}", server.server)));
                let ok = resp.status().is_success();
                let body: serde_json::Value =
                    resp.json().await.unwrap_or_else(|e| fail(&e.to_string()));
                if !ok {
                    eprintln!("{body}");
                    std::process::exit(2);
                }
                println!("{body}");
            })
        };
    match command {
        AdaptersCommand::Deploy { name, file, server } => {
            let bytes = std::fs::read(&file)
                .unwrap_or_else(|e| fail(&format!("cannot read {}: {e}", file.display())));
            call(
                &server,
                reqwest::Method::PUT,
                format!("/admin/v1/adapters/{name}"),
                Some(bytes),
            );
        }
        AdaptersCommand::Rollback { name, server } => call(
            &server,
            reqwest::Method::POST,
            format!("/admin/v1/adapters/{name}/rollback"),
            None,
        ),
        AdaptersCommand::List { server } => call(
            &server,
            reqwest::Method::GET,
            "/admin/v1/adapters".into(),
            None,
        ),
        AdaptersCommand::New { name, lang, root } => {
            let lang: mmc_host::scaffold::Lang =
                lang.parse().unwrap_or_else(|e| fail(&format!("{e}")));
            let done = mmc_host::scaffold::new_adapter(&root, &name, lang)
                .unwrap_or_else(|e| fail(&format!("{e}")));
            println!(
                "{}",
                json!({"adapter": name, "created": done.created, "edited": done.edited,
                       "next_steps": done.next_steps})
            );
        }
        AdaptersCommand::Test {
            file,
            settings,
            secrets,
            json,
        } => {
            let inputs = mmc_host::conformance::Inputs { settings, secrets };
            let checks = mmc_host::conformance::run(&file, &config.cache_dir(), &inputs)
                .unwrap_or_else(|e| fail(&format!("{e:#}")));
            let passed = checks.iter().all(|c| c.passed);
            if json {
                println!(
                    "{}",
                    json!({"file": file, "passed": passed, "checks": checks})
                );
            } else {
                print!("{}", mmc_host::conformance::table(&checks));
            }
            if !passed {
                std::process::exit(1);
            }
        }
    }
}

fn key_value(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("expected KEY=VALUE, got {s}"))
}

fn fail(message: &str) -> ! {
    eprintln!("{}", json!({"error": message}));
    std::process::exit(2);
}

fn accounts(config: &Config) -> Accounts {
    Accounts::new(
        mmc_host::server::open_db(config)
            .unwrap_or_else(|e| fail(&e.to_string()))
            .sql,
    )
}

/// How long a shutdown waits for in-flight requests and jobs.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

fn serve(config: Config, demo: bool) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    serve_on(&rt, config, demo);
    // A component call still running past the grace period is not waited for.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
}

fn serve_on(rt: &tokio::runtime::Runtime, config: Config, demo: bool) {
    rt.block_on(async move {
        if demo {
            demo_account(&config);
        }
        let mut service = match mmc_host::server::start(config).await {
            Ok(s) => s,
            Err(e) => fail(&format!("cannot start: {e:#}")),
        };
        // One write, and never fatal: a supervisor that stops reading stdout
        // (a closed pipe) must not bring the service down with a panic.
        {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = write!(
                out,
                "mmc listening on http://{}\nmmc admin on http://{}\n",
                service.running.addr, service.running.admin_addr
            );
            let _ = out.flush();
        }
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .unwrap_or_else(|e| fail(&format!("cannot watch SIGTERM: {e}")));
        tokio::select! {
            _ = &mut service.running.task => return,
            _ = tokio::signal::ctrl_c() => {}
            _ = term.recv() => {}
        }
        // Rolled out of a fleet: finish what is in flight, hand the jobs over.
        eprintln!(
            "shutting down: draining (up to {} s)",
            SHUTDOWN_GRACE.as_secs()
        );
        let drained = service.shutdown(SHUTDOWN_GRACE).await;
        eprintln!(
            "shut down{}",
            if drained { "" } else { " (grace period over)" }
        );
    });
}

/// `make run`: a merchant and a test key to try the API with at once.
fn demo_account(config: &Config) {
    let accounts = accounts(config);
    match accounts.first_merchant() {
        Ok(Some(m)) => println!(
            "Demo merchant {} ({}) exists. Keys are stored hashed; create another with:\n  mmc keys create --merchant {} --env test --data-dir {}",
            m.name,
            m.id,
            m.id,
            config.data_dir.display()
        ),
        Ok(None) => {
            let m = accounts
                .create_merchant("Demo Merchant")
                .unwrap_or_else(|e| fail(&e.to_string()));
            let k = accounts
                .create_key(&m.id, Environment::Test)
                .unwrap_or_else(|e| fail(&e.to_string()));
            println!("Demo merchant: {} ({})", m.name, m.id);
            println!(
                "Test API key:  {}   (shown once; stored only as a hash)",
                k.key
            );
            println!(
                "Try: curl -H 'Authorization: Bearer {}' http://{}/api/v1/collect/payments/operators/",
                k.key, config.listen
            );
        }
        Err(e) => fail(&e.to_string()),
    }
}
