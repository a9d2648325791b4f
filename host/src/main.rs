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
    /// Data directory (SQLite file, compiled-component cache).
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
    /// Manage webhook endpoints.
    Webhooks {
        #[command(subcommand)]
        command: WebhooksCommand,
    },
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
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Create an API key; prints {"id","key","environment","merchant_id"}. The key is shown only once.
    Create {
        #[arg(long)]
        merchant: String,
        #[arg(long, value_parser = ["test", "live"])]
        env: String,
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
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("MMC_LOG")
                .unwrap_or_else(|_| config.log.filter.as_str().into()),
        )
        .with_writer(std::io::stderr)
        .init();
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
        Command::Keys {
            command: KeysCommand::Create { merchant, env, .. },
        } => {
            let env =
                Environment::parse(&env).unwrap_or_else(|| fail("--env must be test or live"));
            let k = accounts(&config)
                .create_key(&merchant, env)
                .unwrap_or_else(|e| fail(&e.to_string()));
            println!("{}", json!(k));
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
            if Accounts::new(db.clone())
                .merchant(&merchant)
                .unwrap_or_else(|e| fail(&e.to_string()))
                .is_none()
            {
                fail(&format!("no merchant with id {merchant}"));
            }
            let webhooks = mmc_host::webhooks::Webhooks::new(db, config.webhooks.clone())
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

fn fail(message: &str) -> ! {
    eprintln!("{}", json!({"error": message}));
    std::process::exit(2);
}

fn accounts(config: &Config) -> Accounts {
    Accounts::new(mmc_host::server::open_db(config).unwrap_or_else(|e| fail(&e.to_string())))
}

fn serve(config: Config, demo: bool) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async move {
        if demo {
            demo_account(&config);
        }
        let service = match mmc_host::server::start(config).await {
            Ok(s) => s,
            Err(e) => fail(&format!("cannot start: {e:#}")),
        };
        println!("mmc listening on http://{}", service.running.addr);
        tokio::select! {
            _ = service.running.task => {}
            _ = tokio::signal::ctrl_c() => eprintln!("shutting down"),
        }
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
