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
        give_back_freed_memory(config.limits.memory_trim_ms);
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

/// glibc's malloc keeps what threads free in their arenas (up to eight per
/// core) rather than give it back. Requests move between tokio's workers
/// and its blocking threads (dozens under load), so a burst (a flood of
/// sign-ins, say) left its garbage spread over every arena: 100 MiB more
/// resident memory for good after `bench/console_abuse.py`'s 14 s. Every
/// `limits.memory_trim_ms`, if the process grew by more than
/// [`TRIM_AFTER_GROWTH`] since it last gave memory back, the free pages are
/// handed back. A steady load does not grow, so it pays nothing: trimming
/// every second regardless cost creates ~7%, and fewer arenas 7–13%.
fn give_back_freed_memory(period_ms: u64) {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if period_ms == 0 {
            return;
        }
        let period = std::time::Duration::from_millis(period_ms);
        let spawned = std::thread::Builder::new()
            .name("malloc-trim".into())
            .spawn(move || {
                let mut settled = resident_bytes();
                loop {
                    std::thread::sleep(period);
                    let now = resident_bytes();
                    if now > settled + TRIM_AFTER_GROWTH {
                        // SAFETY: malloc_trim only returns free pages to the system.
                        unsafe {
                            libc::malloc_trim(0);
                        }
                        settled = resident_bytes();
                    } else {
                        settled = settled.min(now);
                    }
                }
            });
        if let Err(e) = spawned {
            eprintln!("malloc-trim thread not started: {e}");
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let _ = period_ms;
}

/// Growth of resident memory that makes the allocator give back what it holds free.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const TRIM_AFTER_GROWTH: u64 = 16 << 20;

/// This process's resident memory (`/proc/self/statm`), 0 if unreadable.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn resident_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(0) as u64;
    pages * page
}
