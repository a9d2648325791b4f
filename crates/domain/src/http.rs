//! HTTP helpers the components need, over plain data so they are written
//! once (each component has its own generated `Request` type): reading
//! requests in the API components, and in the operator adapters escaping a
//! query value, comparing a signature and quoting an answer in an error.

use std::borrow::Cow;

use serde_json::{Map, Value};

/// A header by case-insensitive name.
pub fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// A raw (undecoded) query parameter; `?flag` gives `Some("")`.
pub fn query_param<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query
        .split('&')
        .map(|kv| kv.split_once('=').unwrap_or((kv, "")))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
}

/// A query value percent-encoded (RFC 3986 unreserved characters kept). Our
/// ids are UUIDs, but a value put in a URL is never trusted to be.
pub fn encode_component(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// The start of a body (200 characters), for an error that quotes what an
/// operator answered.
pub fn excerpt(body: &[u8]) -> String {
    String::from_utf8_lossy(body).chars().take(200).collect()
}

/// Equal bytes, compared in time that depends only on the lengths (a
/// signature check must not tell how many leading bytes were right).
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A query or form value as it was meant: `+` is a space and `%XX` (two hex
/// digits) the byte it names; anything else is kept as it is.
pub fn decode_component(s: &str) -> String {
    decode_path_segment(&s.replace('+', " "))
}

/// The non-empty segments of a URL path, decoded: a merchant's reference
/// may hold what a URL escapes (`order 1` arrives as `order%201`).
pub fn path_segments(path: &str) -> Vec<Cow<'_, str>> {
    path.split('/')
        .filter(|s| !s.is_empty())
        .map(|s| match s.contains('%') {
            true => Cow::Owned(decode_path_segment(s)),
            false => Cow::Borrowed(s),
        })
        .collect()
}

/// A path segment as it was meant (a merchant's reference in a URL): `%XX`
/// (two hex digits) is the byte it names; `+` is itself, unlike in a query.
pub fn decode_path_segment(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            // from_str_radix would take a sign ("%+1").
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        if let (b'%', Some(b)) = (bytes[i], hex) {
            out.push(b);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Why a body is not a JSON object.
#[derive(Debug, Clone, PartialEq)]
pub enum BodyError {
    /// Empty or whitespace only.
    Missing,
    /// Valid JSON, but not an object.
    NotObject,
    /// Not JSON; the parser's reason.
    Invalid(String),
}

/// The body as a JSON object.
pub fn json_object(body: &[u8]) -> Result<Map<String, Value>, BodyError> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(BodyError::Missing);
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(BodyError::NotObject),
        Err(e) => Err(BodyError::Invalid(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adapter_helpers() {
        assert_eq!(encode_component("a b/é~-_.Z9"), "a%20b%2F%C3%A9~-_.Z9");
        assert_eq!(decode_component(&encode_component("x&y=z é")), "x&y=z é");
        assert_eq!(decode_path_segment("order%201+%C3%A9%23%3F"), "order 1+é#?");
        assert_eq!(
            decode_path_segment("%+1%zz%4"),
            "%+1%zz%4",
            "not escapes: kept"
        );
        assert_eq!(excerpt("é".repeat(300).as_bytes()).chars().count(), 200);
        assert_eq!(excerpt(b"\xffok"), "\u{fffd}ok");
        assert!(constant_time_eq(b"sig", b"sig"));
        assert!(!constant_time_eq(b"sig", b"sih"));
        assert!(!constant_time_eq(b"sig", b"sig2"));
    }

    #[test]
    fn lookups_and_bodies() {
        let h = vec![("Content-Type".to_string(), "text/csv".to_string())];
        assert_eq!(header(&h, "content-type"), Some("text/csv"));
        assert_eq!(query_param("a=1&flag&b=", "flag"), Some(""));
        assert_eq!(query_param("a=1&b=2", "b"), Some("2"));
        assert_eq!(query_param("a=1", "c"), None);
        assert_eq!(json_object(b"  "), Err(BodyError::Missing));
        assert_eq!(json_object(b"[1]"), Err(BodyError::NotObject));
        assert!(matches!(json_object(b"{"), Err(BodyError::Invalid(_))));
        assert!(json_object(b"{\"a\":1}").is_ok());
    }
}
