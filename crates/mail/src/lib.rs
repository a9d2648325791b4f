//! Mail the service sends: a console member's new one-time sign-in link,
//! after an owner reset their access, goes to the member's own address
//! rather than through the owner's hands. Sent through the relay of
//! `[smtp]` (see [`mmc_config::SmtpConfig`]).

use std::time::Duration;

use lettre::message::Mailbox;
use lettre::message::header::ContentType;
use lettre::transport::smtp::authentication::Credentials;
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use mmc_config::{SmtpConfig, SmtpSecurity};

#[derive(Debug, thiserror::Error)]
pub enum MailError {
    #[error("smtp.from is not a mail address: {0}")]
    BadSender(String),
    #[error("{0} is not a mail address")]
    BadRecipient(String),
    #[error("smtp.host: {0}")]
    Relay(String),
    #[error("the message could not be written: {0}")]
    Message(String),
    #[error("the mail relay did not take the message: {0}")]
    NotSent(String),
}

/// The relay, ready to send (connections are opened per message).
#[derive(Clone)]
pub struct Mailer {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    from: Mailbox,
}

impl Mailer {
    pub fn new(config: &SmtpConfig) -> Result<Mailer, MailError> {
        let from: Mailbox = config
            .from
            .parse()
            .map_err(|e| MailError::BadSender(format!("{}: {e}", config.from)))?;
        type Smtp = AsyncSmtpTransport<Tokio1Executor>;
        let mut builder = match config.security {
            SmtpSecurity::Tls => Smtp::relay(&config.host),
            SmtpSecurity::Starttls => Smtp::starttls_relay(&config.host),
            SmtpSecurity::None => Ok(Smtp::builder_dangerous(&config.host)),
        }
        .map_err(|e| MailError::Relay(e.to_string()))?;
        if let Some(port) = config.port {
            builder = builder.port(port);
        }
        if let (Some(user), Some(password)) = (&config.username, &config.password) {
            builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
        }
        let transport = builder
            .timeout(Some(Duration::from_millis(config.timeout_ms)))
            .build();
        Ok(Mailer { transport, from })
    }

    /// Hands a plain-text message to the relay; Ok once the relay took it.
    pub async fn send(&self, to: &str, subject: &str, body: String) -> Result<(), MailError> {
        let to: Mailbox = to
            .parse()
            .map_err(|_| MailError::BadRecipient(to.to_string()))?;
        let message = Message::builder()
            .from(self.from.clone())
            .to(to)
            .subject(subject)
            .header(ContentType::TEXT_PLAIN)
            .body(body)
            .map_err(|e| MailError::Message(e.to_string()))?;
        self.transport
            .send(message)
            .await
            .map_err(|e| MailError::NotSent(e.to_string()))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mmc_config::Config;

    fn relay(from: &str) -> SmtpConfig {
        let vars = vec![
            ("MMC_SMTP__HOST".to_string(), "mail.example.bj".to_string()),
            ("MMC_SMTP__FROM".to_string(), from.to_string()),
        ];
        Config::load(None, vars).unwrap().smtp.unwrap()
    }

    #[test]
    fn a_configured_relay_is_taken_and_a_sender_that_is_no_address_refused() {
        assert!(Mailer::new(&relay("Payments <no-reply@example.bj>")).is_ok());
        assert!(Mailer::new(&relay("not an address")).is_err());
    }
}
