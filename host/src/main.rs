//! `mmc`: the service binary and its operator CLI. The configuration is
//! loaded and the log set up here; each command is run by [`cli`].

mod cli;

use clap::{CommandFactory, FromArgMatches};
use mmc_config::Config;

use crate::cli::{Cli, Command, fail};

fn main() {
    let exe = std::env::current_exe().ok();
    let manifest = exe
        .as_deref()
        .and_then(|e| mmc_bundle::manifest_of(e).ok().flatten())
        .map(|c| c.manifest);
    let version: &'static str = Box::leak(cli::version_text(manifest.as_ref()).into_boxed_str());
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
                Ok(bundle) => config.builtin = bundle.map(std::sync::Arc::new),
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
    cli::run(config, cli.command);
    // What the batch processor still holds goes out before the process ends.
    if let Some(p) = provider {
        let _ = p.force_flush();
        let _ = p.shutdown();
    }
}
