//! Checks shared by the request parsers: strings, integers, callback URLs
//! and metadata, each error naming the offending `param`.

use serde_json::{Map, Value};

use crate::ApiError;

pub(super) fn opt_string(
    m: &Map<String, Value>,
    field: &str,
    param: &str,
    max: usize,
) -> Result<Option<String>, ApiError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.chars().count() > max => Err(ApiError::invalid(
            "parameter_too_long",
            param,
            format!("{param} must be at most {max} characters."),
        )),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid_string",
            param,
            format!("{param} must be a string."),
        )),
    }
}

pub(super) fn required_string(
    m: &Map<String, Value>,
    field: &str,
    max: usize,
) -> Result<String, ApiError> {
    match opt_string(m, field, field, max)? {
        Some(s) if !s.trim().is_empty() => Ok(s),
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid_empty",
            field,
            format!("{field} must not be empty."),
        )),
        None => Err(ApiError::invalid(
            "parameter_missing",
            field,
            format!("{field} is required."),
        )),
    }
}

pub(super) fn opt_integer(m: &Map<String, Value>, field: &str) -> Result<Option<i64>, ApiError> {
    match m.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match mmc_domain::json::integer(n) {
            Some(i) => Ok(Some(i)),
            None => Err(ApiError::invalid(
                "parameter_invalid_integer",
                field,
                format!("{field} must be an integer."),
            )),
        },
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid_integer",
            field,
            format!("{field} must be an integer."),
        )),
    }
}

/// http(s)://host[...]: https always; plain http only in the test environment.
/// The documented shape: `https://host[:port][/path][?query]` (plain http
/// only in the test environment); the path and query take what RFC 3986
/// allows there. No user info (credentials in a URL we store and log), no
/// fragment (never sent), no IP-literal host.
pub(super) fn check_url(url: &str, environment: &str) -> Result<(), &'static str> {
    // RFC 3986 `pchar` less the letters and digits: unreserved, `%` of an
    // escape, sub-delims, `:` and `@`.
    const PCHAR: &[u8] = b"-._~%!$&'()*+,;=:@";
    const BAD: &str =
        "callback_url must be an absolute https URL (host, optional port, path and query).";
    let rest = if let Some(r) = url.strip_prefix("https://") {
        r
    } else if let Some(r) = url.strip_prefix("http://") {
        if environment != "test" {
            return Err("callback_url must use https.");
        }
        r
    } else {
        return Err(BAD);
    };
    let (before_query, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = match before_query.find('/') {
        Some(i) => before_query.split_at(i),
        None => (before_query, ""),
    };
    let (host, port) = authority.split_once(':').unwrap_or((authority, ""));
    let ok_host = !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-');
    let ok_port = !authority.contains(':')
        || ((1..=5).contains(&port.len()) && port.bytes().all(|b| b.is_ascii_digit()));
    let ok_path = path
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || PCHAR.contains(&b) || b == b'/');
    let ok_query = query
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || PCHAR.contains(&b) || b"/?".contains(&b));
    if ok_host && ok_port && ok_path && ok_query && url.len() <= 2048 {
        Ok(())
    } else {
        Err(BAD)
    }
}

/// `metadata` of a payment or a refund: an object of at most 50 keys of up
/// to 40 characters, each value flat (a string of at most 500 characters,
/// an integer or a boolean); `None` when absent or null.
pub fn metadata(value: Option<&Value>) -> Result<Option<Value>, ApiError> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(o)) => {
            if o.len() > 50 || o.keys().any(|k| k.chars().count() > 40) {
                return Err(ApiError::invalid(
                    "metadata_too_large",
                    "metadata",
                    "metadata allows at most 50 keys of up to 40 characters.",
                ));
            }
            // Flat values only: strings (up to 500 characters), integers, booleans.
            let flat = |v: &Value| match v {
                Value::String(s) => s.chars().count() <= 500,
                Value::Number(n) => mmc_domain::json::integer(n).is_some(),
                Value::Bool(_) => true,
                _ => false,
            };
            if let Some(k) = o.iter().find(|(_, v)| !flat(v)).map(|(k, _)| k) {
                return Err(ApiError::invalid(
                    "metadata_invalid",
                    "metadata",
                    format!(
                        "metadata.{k} must be a string of at most 500 characters, an integer or a boolean."
                    ),
                ));
            }
            Ok(Some(Value::Object(o.clone())))
        }
        Some(_) => Err(ApiError::invalid(
            "parameter_invalid_object",
            "metadata",
            "metadata must be an object.",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::check_url;

    #[test]
    fn a_callback_url_takes_what_rfc_3986_allows_in_its_path_and_query() {
        for ok in [
            "https://shop.example/hooks",
            "https://shop.example:8443/a/b;v=1/c@d/(x)!*,$'?next=https://x/y?z&a=1+2",
            "https://shop.example?t=a:b@c",
        ] {
            assert_eq!(check_url(ok, "live"), Ok(()), "{ok}");
        }
        for bad in [
            "https://user:pw@shop.example/hooks",
            "https://shop.example/hooks#frag",
            "https://[::1]/hooks",
            "https://shop.example/a b",
            "https://shop.example/\"x\"",
            "https://shop.example/<x>",
            "http://shop.example/hooks",
        ] {
            assert!(check_url(bad, "live").is_err(), "{bad}");
        }
        assert_eq!(check_url("http://localhost:9/h", "test"), Ok(()));
    }
}
