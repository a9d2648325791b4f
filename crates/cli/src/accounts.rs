//! `mmc merchants`, `mmc keys`, `mmc users`: merchants, their API keys and
//! the people of their console, written to the data directory's store (a
//! running server sees them at once).

use mmc_console_kit::users::{Role, Users};

use super::*;

#[derive(Subcommand)]
pub enum MerchantsCommand {
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
pub enum KeysCommand {
    /// Create a service API key (it stands for a system, not a person: maker-checker tells it
    /// apart from other keys only); prints {"id","key","environment","merchant_id"}. The key is
    /// shown only once.
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

#[derive(Subcommand)]
pub enum UsersCommand {
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
    /// new one-time sign-in link, as create does; the user approves no payout for 24 hours
    /// (`approvals_held_until_ms`).
    Reset {
        #[arg(long)]
        email: String,
        #[arg(long)]
        json: bool,
    },
}

pub fn merchants(config: &Config, command: MerchantsCommand) {
    match command {
        MerchantsCommand::Create { name, .. } => {
            let m = open_accounts(config)
                .create_merchant(&name)
                .unwrap_or_else(|e| fail(&e.to_string()));
            println!("{}", json!(m));
        }
        MerchantsCommand::Update {
            merchant_id,
            env,
            require_second_approver,
            ..
        } => {
            let env = environment(&env);
            open_accounts(config)
                .set_require_second_approver(&merchant_id, env, require_second_approver)
                .unwrap_or_else(|e| fail(&e.to_string()));
            println!(
                "{}",
                json!({"id": merchant_id, "environment": env, "require_second_approver": require_second_approver})
            );
        }
    }
}

pub fn keys(config: &Config, command: KeysCommand) {
    match command {
        KeysCommand::Create {
            merchant,
            env,
            scopes,
            ..
        } => {
            let env = environment(&env);
            let scopes = scopes.map(|s| {
                mmc_accounts::scopes::Scopes::parse(&s)
                    .unwrap_or_else(|e| fail(&format!("--scopes: {e}")))
            });
            let k = open_accounts(config)
                .create_key_with(&merchant, env, scopes)
                .unwrap_or_else(|e| fail(&e.to_string()));
            println!("{}", json!(k));
        }
        KeysCommand::Revoke { key_id, .. } => {
            open_accounts(config)
                .revoke_key(&key_id)
                .unwrap_or_else(|e| fail(&e.to_string()));
            println!("{}", json!({"id": key_id, "revoked": true}));
        }
    }
}

/// An invitation, or a reset: either way a one-time sign-in link.
pub fn users(config: &Config, command: UsersCommand) {
    let users = Users::new(open_db(config).sql);
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
               "sign_in_link": format!("{base}{}", invitation.path), "expires_ms": invitation.expires_ms,
               "approvals_held_until_ms": invitation.approvals_held_until_ms})
    );
}
