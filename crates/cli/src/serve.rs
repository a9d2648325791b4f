//! `mmc serve`: the service on a multi-threaded runtime until SIGTERM or
//! Ctrl-C, then a graceful shutdown: what is in flight finishes and this
//! node's jobs are handed over to the others.

use super::*;

/// How long a shutdown waits for in-flight requests and jobs.
const SHUTDOWN_GRACE: std::time::Duration = std::time::Duration::from_secs(30);

pub fn serve(config: Config, demo: bool, pages: Arc<dyn Pages>) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    serve_on(&rt, config, demo, pages);
    // A component call still running past the grace period is not waited for.
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
}

fn serve_on(rt: &tokio::runtime::Runtime, config: Config, demo: bool, pages: Arc<dyn Pages>) {
    rt.block_on(async move {
        if demo {
            demo_account(&config);
        }
        let mut service = match mmc_server::start(config, pages).await {
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
    let accounts = open_accounts(config);
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
