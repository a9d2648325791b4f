//! The mail relay (`[smtp]`): how the console mails a member the new
//! sign-in link after an owner resets their access. Unset, the link is
//! shown to the owner who asked, to hand over themselves.

use serde::{Deserialize, Serialize};

#[derive(Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SmtpConfig {
    /// The relay's host name (checked against its certificate under TLS).
    pub host: String,
    /// Default: 465 for `tls`, 587 for `starttls`, 25 for `none`.
    #[serde(default)]
    pub port: Option<u16>,
    #[serde(default)]
    pub security: SmtpSecurity,
    /// The sender, `Name <address>` or a bare address.
    pub from: String,
    /// Both or neither: the relay's account.
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    /// How long one message may take to hand over.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_timeout_ms() -> u64 {
    10_000
}

/// How the connection to the relay is protected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SmtpSecurity {
    /// TLS from the first byte (port 465).
    Tls,
    /// Plain, then upgraded to TLS before anything is sent; refused if the
    /// relay does not offer it (port 587).
    #[default]
    Starttls,
    /// No TLS: a relay on the same host or a private network only.
    None,
}

// By hand: the relay's password must never reach a log line.
impl std::fmt::Debug for SmtpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SmtpConfig")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("security", &self.security)
            .field("from", &self.from)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("timeout_ms", &self.timeout_ms)
            .finish()
    }
}
