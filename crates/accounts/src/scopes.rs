//! What an API key may do. A key carries scopes; each request needs one of
//! the scopes its route names. Written once here and checked by the host
//! before any component or native handler runs, so no area can forget it.
//! Keys made before scopes existed (no scopes stored) keep every scope.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    PaymentsWrite,
    PaymentsRead,
    BulkCreate,
    BulkApprove,
    WebhooksManage,
    /// Only sending an event's webhooks again: what a support desk needs when
    /// a merchant's system missed a notification, without the endpoints and
    /// their secrets that `webhooks:manage` holds.
    WebhooksResend,
}

impl Scope {
    pub const ALL: [Scope; 6] = [
        Scope::PaymentsWrite,
        Scope::PaymentsRead,
        Scope::BulkCreate,
        Scope::BulkApprove,
        Scope::WebhooksManage,
        Scope::WebhooksResend,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::PaymentsWrite => "payments:write",
            Scope::PaymentsRead => "payments:read",
            Scope::BulkCreate => "bulk:create",
            Scope::BulkApprove => "bulk:approve",
            Scope::WebhooksManage => "webhooks:manage",
            Scope::WebhooksResend => "webhooks:resend",
        }
    }

    pub fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|x| x.as_str() == s)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// A set of scopes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scopes(u8);

impl Scopes {
    pub fn all() -> Scopes {
        Scopes(Scope::ALL.iter().fold(0, |acc, s| acc | s.bit()))
    }

    /// `payments:write,bulk:create` → the set; an unknown name is an error
    /// naming it, an empty list is refused (a key that can do nothing).
    pub fn parse(list: &str) -> Result<Scopes, String> {
        let mut bits = 0;
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let scope = Scope::parse(name).ok_or_else(|| {
                format!(
                    "unknown scope '{name}'; the scopes are {}",
                    Scopes::all().to_string().replace(',', ", ")
                )
            })?;
            bits |= scope.bit();
        }
        if bits == 0 {
            return Err("a key needs at least one scope".into());
        }
        Ok(Scopes(bits))
    }

    /// The stored form: `None` (a key from before scopes) is every scope.
    pub fn from_stored(stored: Option<&str>) -> Scopes {
        match stored {
            None => Scopes::all(),
            // A stored list we cannot read grants nothing rather than everything.
            Some(s) => Scopes::parse(s).unwrap_or(Scopes(0)),
        }
    }

    pub fn contains(self, scope: Scope) -> bool {
        self.0 & scope.bit() != 0
    }

    pub fn iter(self) -> impl Iterator<Item = Scope> {
        Scope::ALL.into_iter().filter(move |s| self.contains(*s))
    }

    /// Ok, or the scopes that would have allowed the request.
    pub fn allow(self, method: &str, path: &str) -> Result<(), &'static [Scope]> {
        let needed = required(method, path);
        if needed.iter().any(|s| self.contains(*s)) {
            Ok(())
        } else {
            Err(needed)
        }
    }
}

impl fmt::Display for Scopes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.iter().map(Scope::as_str).collect();
        f.write_str(&names.join(","))
    }
}

/// The scopes any one of which lets a key make this request.
pub fn required(method: &str, path: &str) -> &'static [Scope] {
    let under = |prefix| mmc_common::paths::under(path, prefix);
    let reads = matches!(method, "GET" | "HEAD");
    if method == "POST" && is_resend(path) {
        &[Scope::WebhooksManage, Scope::WebhooksResend]
    } else if under("/api/v1/webhook-endpoints") || under("/api/v1/events") {
        &[Scope::WebhooksManage]
    } else if under("/api/v1/bulk-payments") {
        let validate = path.trim_end_matches('/').ends_with("/validate");
        if reads {
            // Whoever creates or approves batches reads them.
            &[Scope::BulkCreate, Scope::BulkApprove]
        } else if validate {
            &[Scope::BulkApprove]
        } else {
            &[Scope::BulkCreate]
        }
    } else if reads {
        &[Scope::PaymentsRead]
    } else {
        &[Scope::PaymentsWrite]
    }
}

/// `/api/v1/events/{id}/resend`, with or without a trailing slash. Read
/// without allocating: every POST, creates included, passes here.
fn is_resend(path: &str) -> bool {
    path.trim_end_matches('/')
        .strip_prefix("/api/v1/events/")
        .and_then(|rest| rest.strip_suffix("/resend"))
        .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_need_their_scope() {
        let s = |l: &str| Scopes::parse(l).unwrap();
        let pay = s("payments:write");
        assert!(pay.allow("POST", "/api/v1/collect/payments").is_ok());
        assert!(pay.allow("GET", "/api/v1/collect/payments/x").is_err());
        assert!(
            pay.allow("POST", "/api/v1/collect/mobile-money/").is_ok(),
            "legacy generation"
        );
        let maker = s("bulk:create");
        assert!(maker.allow("POST", "/api/v1/bulk-payments/").is_ok());
        assert!(maker.allow("GET", "/api/v1/bulk-payments/b1/").is_ok());
        assert_eq!(
            maker.allow("POST", "/api/v1/bulk-payments/b1/validate/"),
            Err(&[Scope::BulkApprove][..])
        );
        let checker = s("bulk:approve");
        assert!(
            checker
                .allow("POST", "/api/v1/bulk-payments/b1/validate")
                .is_ok()
        );
        assert!(checker.allow("POST", "/api/v1/bulk-payments/").is_err());
        assert!(
            s("payments:read")
                .allow("GET", "/api/v1/events/ev_1")
                .is_err()
        );
        assert!(
            s("webhooks:manage")
                .allow("DELETE", "/api/v1/webhook-endpoints/we_1")
                .is_ok()
        );
        assert!(
            Scopes::all()
                .allow("POST", "/api/v1/bulk-payments/b/validate/")
                .is_ok()
        );
        let resend = s("webhooks:resend");
        assert!(resend.allow("POST", "/api/v1/events/ev_1/resend").is_ok());
        assert!(resend.allow("POST", "/api/v1/events/ev_1/resend/").is_ok());
        assert!(resend.allow("GET", "/api/v1/events/ev_1").is_err());
        assert!(resend.allow("GET", "/api/v1/events/ev_1/resend").is_err());
        assert!(resend.allow("POST", "/api/v1/events//resend").is_err());
        assert!(
            resend
                .allow("POST", "/api/v1/webhook-endpoints/we_1/rotate-secret")
                .is_err()
        );
        assert!(resend.allow("GET", "/api/v1/collect/payments/p").is_err());
        assert!(
            s("webhooks:manage")
                .allow("POST", "/api/v1/events/ev_1/resend")
                .is_ok()
        );
    }

    #[test]
    fn parsing_and_storage() {
        assert_eq!(
            Scopes::parse(" payments:read , bulk:approve ")
                .unwrap()
                .to_string(),
            "payments:read,bulk:approve"
        );
        assert!(
            Scopes::parse("payments:admin")
                .unwrap_err()
                .contains("payments:admin")
        );
        assert!(Scopes::parse(" , ").is_err());
        assert_eq!(Scopes::from_stored(None), Scopes::all());
        assert!(!Scopes::from_stored(Some("garbage")).contains(Scope::PaymentsRead));
    }
}
