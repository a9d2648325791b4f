//! Email addresses as console users are known by: one form per address.

use super::UserError;

/// The one form an email address is stored, looked up and counted in:
/// trimmed and lower-cased, its domain in IDNA's ASCII form (`shöp.bj` and
/// `xn--shp-tna.bj` are one address). The part before `@` must be printable
/// ASCII, so that no two spellings of it can look alike (an accent written
/// two ways, a zero-width space). None: not an address we take.
pub fn canonical_email(email: &str) -> Option<String> {
    let (local, domain) = email.trim().rsplit_once('@')?;
    if local.is_empty() || !local.chars().all(|c| c.is_ascii_graphic() && c != '@') {
        return None;
    }
    let url::Host::Domain(domain) = url::Host::parse(domain).ok()? else {
        return None; // an IP address
    };
    if !domain.contains('.') || domain.starts_with('.') {
        return None;
    }
    let email = format!("{}@{domain}", local.to_ascii_lowercase());
    (email.len() <= 254).then_some(email)
}

/// [`canonical_email`] for a lookup: what is not an address is looked up
/// as typed (trimmed, lower-cased), and finds no one.
pub fn lookup_email(email: &str) -> String {
    canonical_email(email).unwrap_or_else(|| email.trim().to_lowercase())
}

pub(super) fn normalize_email(email: &str) -> Result<String, UserError> {
    canonical_email(email).ok_or(UserError::InvalidEmail)
}
