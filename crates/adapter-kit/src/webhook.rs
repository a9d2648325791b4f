//! HMAC-SHA256 signed notifications: `<header>: t=<unix seconds>,<key>=<hex>`
//! (several signatures while a secret is rotated), the signature over the
//! timestamp, a separator and the raw body, and the timestamp within a
//! window of our clock (a replayed notification is refused). Nothing is read
//! from a notification before it passes.

use mmc_domain::http;

use crate::settings::{self, parsed};
use crate::types::{AdapterError, CallbackUpdate, Inbound, PspStatus, SubjectKind};
use crate::{clock, log, signing};

/// Without the `webhook_tolerance_seconds` setting.
pub const DEFAULT_TOLERANCE_S: u64 = 300;

/// A notification by a method the provider does not use is refused unread.
pub fn method(req: &Inbound, allowed: &[&str], what: &str) -> Result<(), AdapterError> {
    if allowed.contains(&req.method.as_str()) {
        return Ok(());
    }
    Err(AdapterError::Rejected(format!(
        "{what} are {}, not {}",
        allowed.join(" or "),
        req.method
    )))
}

/// A notification that cannot be authenticated (unsigned, or signed in a way
/// we cannot check) is only a hint naming its subject: pending, so that the
/// service answers at once and then asks the provider by its own
/// authenticated status query, never believing what the body claims.
pub fn hint(kind: SubjectKind, id: String, psp_reference: String) -> Vec<CallbackUpdate> {
    report(kind, Some(id), psp_reference, PspStatus::Pending)
}

/// An authenticated notification's subject (our id, when the provider echoes
/// it, and the provider's reference) and where it says the subject stands:
/// a claim the service reads back by the status query, never records.
pub fn report(
    kind: SubjectKind,
    id: Option<String>,
    psp_reference: String,
    status: PspStatus,
) -> Vec<CallbackUpdate> {
    vec![CallbackUpdate {
        kind,
        id,
        psp_reference: Some(psp_reference),
        status,
    }]
}

/// A notification about nothing the adapter follows (`what`, e.g. the
/// provider's event and its type): logged and acknowledged, so that the
/// provider stops resending it, with nothing to report.
pub fn ignored(what: &str) -> Vec<CallbackUpdate> {
    log::log(log::Level::Info, &format!("{what} ignored"));
    Vec::new()
}

/// A notification authenticated by the `webhook_secret` itself, sent as
/// `Authorization: Bearer <secret>` (a provider's alternative to signing),
/// compared in constant time.
pub fn bearer_secret(req: &Inbound) -> Result<(), AdapterError> {
    bearer_check(&req.headers, settings::secret("webhook_secret").as_deref())
}

/// The check itself, over its inputs.
pub fn bearer_check(
    headers: &[(String, String)],
    secret: Option<&str>,
) -> Result<(), AdapterError> {
    let refuse = |m: &str| Err(AdapterError::Unauthenticated(m.into()));
    let Some(secret) = secret else {
        // Never accept what we cannot check.
        return refuse("webhook_secret not configured");
    };
    match http::header(headers, "authorization").and_then(|v| v.strip_prefix("Bearer ")) {
        Some(b) if http::constant_time_eq(b.as_bytes(), secret.as_bytes()) => Ok(()),
        Some(_) => refuse("the webhook's shared secret does not match"),
        None => refuse("no Authorization: Bearer header"),
    }
}

/// How one provider signs its notifications.
pub struct Hmac {
    /// The header carrying the signature (`Wave-Signature`).
    pub header: &'static str,
    /// The name of a signature in it (`v1`, `s`).
    pub signature_key: &'static str,
    /// Between the timestamp and the body in the signed message (`""`, `"."`).
    pub separator: &'static str,
}

impl Hmac {
    /// The timestamp text and the (lowercase) signatures of a header value.
    pub fn parse_header(&self, value: &str) -> Option<(String, Vec<String>)> {
        let mut timestamp = None;
        let mut signatures = Vec::new();
        for part in value.split(',') {
            match part.trim().split_once('=') {
                Some(("t", t)) => timestamp = Some(t.trim().to_string()),
                Some((k, s)) if k == self.signature_key => {
                    signatures.push(s.trim().to_ascii_lowercase())
                }
                _ => {}
            }
        }
        timestamp
            .filter(|t| !t.is_empty() && t.len() <= 12 && t.bytes().all(|b| b.is_ascii_digit()))
            .filter(|_| !signatures.is_empty())
            .map(|t| (t, signatures))
    }

    /// Checks `req` with the `webhook_secret` secret, the host's clock and
    /// the `webhook_tolerance_seconds` setting.
    pub fn verify(&self, req: &Inbound) -> Result<(), AdapterError> {
        let tolerance_s =
            parsed(settings::setting("webhook_tolerance_seconds")).unwrap_or(DEFAULT_TOLERANCE_S);
        self.check(
            &req.headers,
            &req.body,
            settings::secret("webhook_secret").as_deref(),
            tolerance_s,
            clock::now_ms() / 1000,
            signing::hmac_sha256,
        )
    }

    /// The check itself, over its inputs.
    pub fn check(
        &self,
        headers: &[(String, String)],
        body: &[u8],
        secret: Option<&str>,
        tolerance_s: u64,
        now_s: u64,
        hmac_sha256: impl Fn(&[u8], &[u8]) -> Vec<u8>,
    ) -> Result<(), AdapterError> {
        let refuse = |m: String| Err(AdapterError::Unauthenticated(m));
        let header = self.header;
        let Some(secret) = secret else {
            // Never accept what we cannot check.
            return refuse("webhook_secret not configured".into());
        };
        let Some(value) = http::header(headers, header) else {
            return refuse(format!("no {header} header"));
        };
        let Some((timestamp, signatures)) = self.parse_header(value) else {
            return refuse(format!("malformed {header} header"));
        };
        let sent_s: u64 = timestamp.parse().unwrap_or(0);
        if now_s.abs_diff(sent_s) > tolerance_s {
            return refuse(format!(
                "{header} timestamp outside the tolerance (replayed or clock skew)"
            ));
        }
        let mut message = timestamp.into_bytes();
        message.extend_from_slice(self.separator.as_bytes());
        message.extend_from_slice(body);
        let expected = hex::encode(hmac_sha256(secret.as_bytes(), &message));
        if signatures
            .iter()
            .any(|s| http::constant_time_eq(s.as_bytes(), expected.as_bytes()))
        {
            Ok(())
        } else {
            refuse(format!("{header} does not match"))
        }
    }
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac as HmacImpl, Mac};
    use sha2::Sha256;

    use super::*;

    const WAVE: Hmac = Hmac {
        header: "Wave-Signature",
        signature_key: "v1",
        separator: "",
    };
    const DOTTED: Hmac = Hmac {
        header: "X-Signature",
        signature_key: "s",
        separator: ".",
    };
    const NOW: u64 = 1_700_000_000;

    fn hmac(key: &[u8], message: &[u8]) -> Vec<u8> {
        let mut mac = HmacImpl::<Sha256>::new_from_slice(key).unwrap();
        mac.update(message);
        mac.finalize().into_bytes().to_vec()
    }

    fn signed(scheme: &Hmac, secret: &str, t: u64, body: &str) -> Vec<(String, String)> {
        let sig = hex::encode(hmac(
            secret.as_bytes(),
            format!("{t}{}{body}", scheme.separator).as_bytes(),
        ));
        let value = format!(
            "t={t},{}=deadbeef,{}={sig}",
            scheme.signature_key, scheme.signature_key
        );
        vec![(scheme.header.to_ascii_lowercase(), value)]
    }

    fn check(scheme: &Hmac, headers: &[(String, String)], body: &str) -> Result<(), AdapterError> {
        scheme.check(headers, body.as_bytes(), Some("whsec"), 300, NOW, hmac)
    }

    fn refused(r: Result<(), AdapterError>) -> String {
        match r {
            Err(AdapterError::Unauthenticated(m)) => m,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_signature_made_with_the_secret_passes_with_either_separator() {
        for scheme in [&WAVE, &DOTTED] {
            let headers = signed(scheme, "whsec", NOW - 10, r#"{"a":1}"#);
            assert_eq!(check(scheme, &headers, r#"{"a":1}"#), Ok(()));
        }
        // The same body signed with the other scheme's message does not.
        let headers = signed(&DOTTED, "whsec", NOW, "{}");
        let moved = vec![(WAVE.header.into(), headers[0].1.replace("s=", "v1="))];
        assert!(refused(check(&WAVE, &moved, "{}")).contains("does not match"));
    }

    #[test]
    fn anything_else_is_refused_before_reading() {
        let body = r#"{"a":1}"#;
        let headers = signed(&WAVE, "whsec", NOW, body);
        assert!(refused(check(&WAVE, &headers, r#"{"a":2}"#)).contains("does not match"));
        let other_secret = signed(&WAVE, "other", NOW, body);
        assert!(refused(check(&WAVE, &other_secret, body)).contains("does not match"));
        let old = signed(&WAVE, "whsec", NOW - 301, body);
        assert!(refused(check(&WAVE, &old, body)).contains("outside the tolerance"));
        let future = signed(&WAVE, "whsec", NOW + 301, body);
        assert!(refused(check(&WAVE, &future, body)).contains("outside the tolerance"));
        assert_eq!(refused(check(&WAVE, &[], body)), "no Wave-Signature header");
        let garbled = vec![("Wave-Signature".into(), "t=abc,v1=00".into())];
        assert_eq!(
            refused(check(&WAVE, &garbled, body)),
            "malformed Wave-Signature header"
        );
        let unsecured = WAVE.check(&headers, body.as_bytes(), None, 300, NOW, hmac);
        assert_eq!(refused(unsecured), "webhook_secret not configured");
    }

    #[test]
    fn a_bearer_secret_passes_only_when_it_is_the_secret() {
        let bearer = |v: &str| vec![("Authorization".to_string(), v.to_string())];
        assert_eq!(bearer_check(&bearer("Bearer whsec"), Some("whsec")), Ok(()));
        for (headers, secret, said) in [
            (bearer("Bearer whsec2"), Some("whsec"), "does not match"),
            (bearer("Bearer "), Some("whsec"), "does not match"),
            (bearer("Basic whsec"), Some("whsec"), "no Authorization"),
            (Vec::new(), Some("whsec"), "no Authorization"),
            (bearer("Bearer whsec"), None, "not configured"),
        ] {
            let m = refused(bearer_check(&headers, secret));
            assert!(m.contains(said), "{m}");
        }
    }

    #[test]
    fn the_header_gives_every_signature_of_its_key() {
        let (t, sigs) = WAVE
            .parse_header("t=1639081943, v1=AB12,v1=cd34,s=ef")
            .unwrap();
        assert_eq!(t, "1639081943");
        assert_eq!(sigs, vec!["ab12", "cd34"]);
        assert!(WAVE.parse_header("v1=ab12").is_none());
        assert!(WAVE.parse_header("t=12").is_none());
        assert!(WAVE.parse_header("t=x1,v1=ab").is_none());
        assert!(WAVE.parse_header("t=1234567890123,v1=ab").is_none());
        assert_eq!(DOTTED.parse_header("t=1,s=AB").unwrap().1, vec!["ab"]);
    }

    #[test]
    fn a_method_the_provider_does_not_use_is_refused() {
        let req = |method: &str| Inbound {
            operator: "op".into(),
            environment: "live".into(),
            method: method.into(),
            headers: Vec::new(),
            body: Vec::new(),
        };
        assert_eq!(method(&req("PUT"), &["PUT", "POST"], "Callbacks"), Ok(()));
        assert_eq!(
            method(&req("GET"), &["PUT", "POST"], "Callbacks"),
            Err(AdapterError::Rejected(
                "Callbacks are PUT or POST, not GET".into()
            ))
        );
    }

    proptest::proptest! {
        /// Hostile headers never panic the parser.
        #[test]
        fn headers_never_panic(header in ".{0,80}") {
            let _ = WAVE.parse_header(&header);
        }
    }
}
