//! The console's frame: what every page of the merchant console stands on.
//! The layout and its words in French and English, the request and its
//! errors, sessions and the people behind them (passwords, second factor,
//! throttling), one-time forms, the audit log, and acting as a key with the
//! person's role's scopes would ([`api`]): the same scope check, the same
//! component code, so idempotency, the money rules and the outbox hold as
//! for the API. The pages are in `mmc-console-account` (sign-in, team,
//! developers, audit) and `mmc-console` (payments, payouts, links, the
//! overview, finance, and the router).

pub mod api;
pub mod audit;
pub mod format;
pub mod html;
pub mod lang;
pub mod once;
pub mod outcomes;
pub mod password_checks;
pub mod qr;
pub mod refusals;
pub mod sessions;
pub mod step_up;
pub mod throttle;
pub mod totp;
pub mod users;
pub mod web;
pub mod words;

/// A store with one merchant, for the console's unit tests.
#[cfg(test)]
pub fn test_shop(dir: &tempfile::TempDir) -> (mmc_db::SqlDb, mmc_accounts::Merchant) {
    let db = mmc_db::SqlDb::new(std::sync::Arc::new(
        mmc_db::Sqlite::open(&dir.path().join("a.db")).unwrap(),
    ));
    let merchant = mmc_accounts::Accounts::new(db.clone())
        .create_merchant("Shop")
        .unwrap();
    (db, merchant)
}

use std::sync::Arc;

use mmc_db::SqlDb;

/// The words of the frame's own areas: second factor, audit log, outcomes.
const FRAME_WORDS: &[words::Table] = &[totp::WORDS, audit::WORDS, outcomes::WORDS];

/// Sets the words [`html::t`] finds after the layout's: the frame's, then
/// `pages` (the console's pages, added once when the service is assembled).
pub fn add_words(pages: &'static [words::Table]) {
    words::set(FRAME_WORDS, pages);
}

/// What a console request is answered with.
pub type Page = hyper::Response<http_body_util::Full<bytes::Bytes>>;

/// The console's pages (`mmc-console`), handed to the server by the binary
/// that assembles the service: the server serves them under `/console`
/// without depending on them, so an edit to a page rebuilds the pages and
/// the binary, not the server and the command line.
pub trait Pages: Send + Sync + 'static {
    /// The pages' words, looked up after the frame's ([`add_words`]).
    fn words(&self) -> &'static [words::Table];

    /// Serves one request under `/console`.
    fn handle<'a>(
        &'a self,
        app: &'a Arc<mmc_http::App>,
        console: &'a Console,
        req: hyper::Request<hyper::body::Incoming>,
        request_id: &'a str,
    ) -> std::pin::Pin<Box<dyn Future<Output = Page> + Send + 'a>>;
}

pub struct Console {
    pub users: users::Users,
    pub sessions: sessions::Sessions,
    pub audit: audit::AuditLog,
    pub throttle: throttle::Throttle,
    /// Password checks, a few at a time.
    pub password_checks: password_checks::PasswordChecks,
    pub metrics: Arc<mmc_metrics::Metrics>,
    /// The overview's tallies (kept by the outbox dispatcher).
    pub tallies: SqlDb,
    /// Cookies marked `Secure`: the service is reached over TLS.
    pub secure_cookies: bool,
    /// The relay a member's new sign-in link is mailed through; none: the
    /// owner who reset their access is shown it.
    pub mailer: Option<mmc_mail::Mailer>,
    /// A live refund of more than this asks for a fresh second-factor code.
    pub refund_code_above: u64,
    /// Destructive forms, each carried out once.
    pub forms: once::Forms,
}

impl Console {
    pub fn new(
        db: SqlDb,
        base_url: &str,
        config: &mmc_config::ConsoleConfig,
        metrics: Arc<mmc_metrics::Metrics>,
    ) -> Console {
        Console {
            password_checks: password_checks::PasswordChecks::new(config, metrics.clone()),
            metrics,
            users: users::Users::new(db.clone()),
            sessions: sessions::Sessions::new(db.clone()),
            forms: once::Forms::new(db.clone()),
            audit: audit::AuditLog::new(db.clone()),
            throttle: throttle::Throttle::new(db.clone()),
            tallies: db,
            secure_cookies: base_url.starts_with("https://"),
            mailer: None,
            refund_code_above: mmc_config::ConsoleConfig::default().refund_code_above,
        }
    }

    /// Asks a fresh code for live refunds of more than `amount`.
    pub fn with_refund_code_above(self, amount: u64) -> Console {
        Console {
            refund_code_above: amount,
            ..self
        }
    }

    /// Mails sign-in links through `mailer` rather than show them.
    pub fn with_mailer(self, mailer: Option<mmc_mail::Mailer>) -> Console {
        Console { mailer, ..self }
    }
}

/// Storage from an async handler: a short query, off the worker's core duty.
pub fn blocking<T>(f: impl FnOnce() -> T) -> T {
    tokio::task::block_in_place(f)
}
