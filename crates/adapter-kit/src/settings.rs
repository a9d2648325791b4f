//! An adapter's settings and secrets, from the host's `config` capability.
//! One component can serve several markets of a provider: `<key>.<slug>`
//! (that market) wins over `<key>` (every market). A blank setting or an
//! empty secret counts as absent.

use std::str::FromStr;

use crate::config;
use crate::types::AdapterError;

/// `<key>.<slug>` if `get` has it, else `<key>`; blank (by `blank`) is absent.
/// A blank per-market value is absent for that market, not a fall-back to
/// the shared one: setting it blank is how one market is left unconfigured.
pub fn lookup(
    get: impl Fn(&str) -> Option<String>,
    slug: Option<&str>,
    key: &str,
    blank: impl Fn(&str) -> bool,
) -> Option<String> {
    slug.and_then(|s| get(&format!("{key}.{s}")))
        .or_else(|| get(key))
        .filter(|v| !blank(v))
}

fn blank_setting(v: &str) -> bool {
    v.trim().is_empty()
}

fn blank_secret(v: &str) -> bool {
    v.is_empty()
}

/// A setting shared by every market.
pub fn setting(key: &str) -> Option<String> {
    lookup(config::get, None, key, blank_setting)
}

/// A setting for one market (`<key>.<slug>` over `<key>`).
pub fn market_setting(slug: &str, key: &str) -> Option<String> {
    lookup(config::get, Some(slug), key, blank_setting)
}

/// A secret shared by every market, `None` when absent.
pub fn secret(key: &str) -> Option<String> {
    lookup(config::secret, None, key, blank_secret)
}

/// A secret for one market (`<key>.<slug>` over `<key>`), `None` when absent.
pub fn market_secret(slug: &str, key: &str) -> Option<String> {
    lookup(config::secret, Some(slug), key, blank_secret)
}

/// A secret an operation cannot go without: absent, nothing is sent.
pub fn required(secret: Option<String>, key: &str) -> Result<String, AdapterError> {
    secret.ok_or_else(|| AdapterError::NotSent(format!("secret {key} not configured")))
}

/// A setting read as a number (or any `FromStr`); unreadable counts as absent.
pub fn parsed<T: FromStr>(value: Option<String>) -> Option<T> {
    value.and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn source(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn a_market_value_wins_over_the_shared_one() {
        let get = source(&[
            ("base_url", "https://all"),
            ("base_url.mtn-ci", "https://ci"),
        ]);
        let read = |slug| lookup(&get, slug, "base_url", blank_setting);
        assert_eq!(read(Some("mtn-ci")).as_deref(), Some("https://ci"));
        assert_eq!(read(Some("mtn-bj")).as_deref(), Some("https://all"));
        assert_eq!(read(None).as_deref(), Some("https://all"));
    }

    #[test]
    fn blank_counts_as_absent_and_is_not_a_fallback() {
        let get = source(&[("timeout_ms", "  "), ("key", "x"), ("key.mtn-bj", "")]);
        assert_eq!(lookup(&get, None, "timeout_ms", blank_setting), None);
        assert_eq!(lookup(&get, Some("mtn-bj"), "key", blank_secret), None);
        assert_eq!(
            lookup(&get, Some("mtn-ci"), "key", blank_secret).as_deref(),
            Some("x")
        );
        // A secret is taken as written: spaces are not blank for a secret.
        let get = source(&[("api_key", " ")]);
        assert_eq!(
            lookup(&get, None, "api_key", blank_secret).as_deref(),
            Some(" ")
        );
    }

    #[test]
    fn a_missing_secret_means_nothing_was_sent() {
        assert_eq!(
            required(None, "api_key"),
            Err(AdapterError::NotSent(
                "secret api_key not configured".into()
            ))
        );
        assert_eq!(required(Some("k".into()), "api_key").as_deref(), Ok("k"));
    }

    #[test]
    fn numbers_parse_or_count_as_absent() {
        assert_eq!(parsed::<u32>(Some("1500".into())), Some(1500));
        assert_eq!(parsed::<u32>(Some("soon".into())), None);
        assert_eq!(parsed::<u32>(None), None);
    }
}
