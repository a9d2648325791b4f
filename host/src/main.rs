//! `mmc`: the service binary and its operator CLI. The configuration is
//! loaded and the log set up here; each command is run by [`cli`].

mod cli;

use clap::Parser;
use mmc_host::config::Config;

use crate::cli::{Cli, Command, fail};

fn main() {
    fewer_malloc_arenas();
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

/// glibc's malloc gives up to eight arenas per core to the threads that
/// allocate, and keeps in each what was freed there. Requests move between
/// tokio's workers and its blocking threads (dozens under load), so a burst
/// (a flood of sign-ins, say) left its garbage spread over sixteen arenas on
/// two cores: 109 MiB more resident memory where one arena per core keeps 50
/// (bench/console_abuse.py). Small allocations still go through each
/// thread's cache without a lock. `MALLOC_ARENA_MAX` set in the environment
/// wins.
fn fewer_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        // SAFETY: mallopt only sets a malloc parameter; called before any
        // other thread exists.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, cores.clamp(2, 64) as libc::c_int);
        }
    }
}
