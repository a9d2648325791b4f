//! Request paths matched against prefixes on segment boundaries, written once
//! for routing, the host's own areas and the scopes a request needs.

/// `path` is `prefix` or lies below it: `/a/b` is under `/a` (and `/a/`),
/// `/ab` is not. Allocates nothing: it runs for every request.
pub fn under(path: &str, prefix: &str) -> bool {
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || prefix.ends_with('/') || rest.starts_with('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::under;

    #[test]
    fn a_prefix_matches_whole_segments_only() {
        assert!(under("/api/v1/events", "/api/v1/events"));
        assert!(under("/api/v1/events/evt_1", "/api/v1/events"));
        assert!(under("/api/v1/events/", "/api/v1/events"));
        assert!(!under("/api/v1/eventsx", "/api/v1/events"));
        assert!(!under("/api/v1", "/api/v1/events"));
        assert!(under("/checkout/abc", "/checkout/"));
        assert!(!under("/checkout", "/checkout/"));
    }
}
