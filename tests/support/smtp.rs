//! A mail relay for tests: a TCP server on loopback speaking enough SMTP
//! (RFC 5321: greeting, EHLO/HELO, MAIL, RCPT, DATA, RSET, NOOP, QUIT) to
//! take the messages a server sends and keep them for the test to read.
//! No TLS and no authentication: a server points at it with
//! `smtp.security = none`.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// One message as the relay took it.
#[derive(Debug, Clone)]
pub struct Mail {
    pub from: String,
    pub to: Vec<String>,
    /// The message as sent after DATA (headers, blank line, body),
    /// dot-stuffing undone.
    pub data: String,
}

impl Mail {
    /// A header's value (the first of that name).
    pub fn header(&self, name: &str) -> Option<String> {
        let (head, _) = self.data.split_once("\r\n\r\n")?;
        let prefix = format!("{}:", name.to_ascii_lowercase());
        head.split("\r\n")
            .find(|l| l.to_ascii_lowercase().starts_with(&prefix))
            .map(|l| l[prefix.len()..].trim().to_string())
    }

    /// The first link in the body's text whose address contains `path`.
    pub fn link(&self, path: &str) -> String {
        let text = self.text();
        text.split_whitespace()
            .find(|w| w.contains(path))
            .unwrap_or_else(|| panic!("no link to {path} in {text}"))
            .to_string()
    }

    /// The body as text, its transfer encoding undone (7bit, 8bit or
    /// quoted-printable, RFC 2045 §6.7).
    pub fn text(&self) -> String {
        let body = self.data.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        let qp = self
            .header("content-transfer-encoding")
            .is_some_and(|e| e.eq_ignore_ascii_case("quoted-printable"));
        if !qp {
            return body.to_string();
        }
        let joined = body.replace("=\r\n", "");
        let bytes = joined.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'='
                && i + 2 < bytes.len()
                && let Ok(v) = u8::from_str_radix(&joined[i + 1..i + 3], 16)
            {
                out.push(v);
                i += 3;
            } else {
                out.push(bytes[i]);
                i += 1;
            }
        }
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// The relay: its port, and what it took.
pub struct SmtpSink {
    pub port: u16,
    pub mails: Arc<Mutex<Vec<Mail>>>,
}

impl SmtpSink {
    pub async fn start() -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mails = Arc::new(Mutex::new(Vec::new()));
        let kept = mails.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(session(stream, kept.clone()));
            }
        });
        SmtpSink { port, mails }
    }

    /// The messages taken so far, oldest first.
    pub fn mails(&self) -> Vec<Mail> {
        self.mails.lock().unwrap().clone()
    }

    /// An `[smtp]` section that sends here.
    pub fn config(&self) -> mmc_config::SmtpConfig {
        mmc_config::SmtpConfig {
            host: "127.0.0.1".into(),
            port: Some(self.port),
            security: mmc_config::SmtpSecurity::None,
            from: "Payments <no-reply@pay.example.bj>".into(),
            username: None,
            password: None,
            timeout_ms: 10_000,
        }
    }
}

async fn session(stream: tokio::net::TcpStream, mails: Arc<Mutex<Vec<Mail>>>) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    let reply = |text: &str| format!("{text}\r\n");
    if write
        .write_all(reply("220 sink.test ESMTP").as_bytes())
        .await
        .is_err()
    {
        return;
    }
    let (mut from, mut to) = (String::new(), Vec::new());
    loop {
        let mut line = String::new();
        match lines.read_line(&mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let command = line.trim_end();
        let verb = command
            .split([' ', ':'])
            .next()
            .unwrap_or_default()
            .to_ascii_uppercase();
        let answer = match verb.as_str() {
            "EHLO" => "250-sink.test\r\n250 8BITMIME".to_string(),
            "HELO" | "RSET" | "NOOP" => "250 OK".to_string(),
            "MAIL" => {
                from = address(command);
                to.clear();
                "250 OK".to_string()
            }
            "RCPT" => {
                to.push(address(command));
                "250 OK".to_string()
            }
            "DATA" => {
                if write
                    .write_all(reply("354 end with <CRLF>.<CRLF>").as_bytes())
                    .await
                    .is_err()
                {
                    return;
                }
                let mut data = String::new();
                loop {
                    let mut l = String::new();
                    match lines.read_line(&mut l).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    if l == ".\r\n" {
                        break;
                    }
                    // Dot-stuffing (RFC 5321 §4.5.2).
                    data.push_str(l.strip_prefix('.').unwrap_or(&l));
                }
                mails.lock().unwrap().push(Mail {
                    from: from.clone(),
                    to: std::mem::take(&mut to),
                    data,
                });
                "250 OK queued".to_string()
            }
            "QUIT" => {
                let _ = write.write_all(reply("221 bye").as_bytes()).await;
                return;
            }
            _ => "502 command not implemented".to_string(),
        };
        if write.write_all(reply(&answer).as_bytes()).await.is_err() {
            return;
        }
    }
}

/// The address of `MAIL FROM:<a>` or `RCPT TO:<a>`.
fn address(command: &str) -> String {
    command
        .split_once('<')
        .and_then(|(_, rest)| rest.split_once('>'))
        .map(|(a, _)| a.to_string())
        .unwrap_or_default()
}
