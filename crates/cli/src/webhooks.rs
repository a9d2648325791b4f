//! `mmc webhooks add`: a merchant's webhook endpoint, registered in the
//! data directory's store, its secret sealed as the server seals it.

use super::*;

#[derive(Subcommand)]
pub enum WebhooksCommand {
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

pub fn run(config: &Config, command: WebhooksCommand) {
    let WebhooksCommand::Add {
        merchant,
        env,
        url,
        events,
        ..
    } = command;
    let env = environment(&env);
    let db = open_db(config);
    if Accounts::new(db.sql.clone())
        .merchant(&merchant)
        .unwrap_or_else(|e| fail(&e.to_string()))
        .is_none()
    {
        fail(&format!("no merchant with id {merchant}"));
    }
    let sealer =
        mmc_webhooks::sealing::Sealer::resolve(config).unwrap_or_else(|e| fail(&e.to_string()));
    let webhooks = mmc_webhooks::Webhooks::new(db.sql, config.webhooks.clone(), sealer)
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
