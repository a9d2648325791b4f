//! The keys of the tables: every one starts with environment and merchant,
//! and the time-ordered indexes start with a time.

pub fn scope(env: &str, merchant: &str, id: &str) -> String {
    format!("{env}/{merchant}/{id}")
}

/// The row that indexes a merchant's reference to its payment id.
pub fn reference_row(env: &str, merchant: &str, reference: &str) -> (&'static str, String) {
    ("refs", scope(env, merchant, reference))
}

/// The row that holds a create's Idempotency-Key record.
pub fn idem_row(env: &str, merchant: &str, key: &str) -> (&'static str, String) {
    ("idem", scope(env, merchant, key))
}

pub fn time_key(ms: u64, env: &str, merchant: &str, id: &str) -> String {
    format!("{ms:013}/{env}/{merchant}/{id}")
}

/// (ms, env, merchant, id) of a time-ordered index key.
pub fn parse_time_key(key: &str) -> Option<(u64, String, String, String)> {
    let mut p = key.splitn(4, '/');
    Some((
        p.next()?.parse().ok()?,
        p.next()?.into(),
        p.next()?.into(),
        p.next()?.into(),
    ))
}
