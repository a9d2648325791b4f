//! `mmc`: the service binary and its operator CLI. The configuration is
//! loaded and the log set up here; each command is run by [`cli`].

mod cli;

use clap::Parser;
use mmc_host::config::Config;

use crate::cli::{Cli, Command, fail};

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
    cli::run(config, cli.command);
}
