//! The keys of the tables: every one starts with environment and merchant,
//! and the time-ordered indexes start with a time.

pub fn scope(env: &str, merchant: &str, id: &str) -> String {
    [env, merchant, id].join("/")
}

/// The row that indexes a merchant's reference to its payment id.
pub fn reference_row(env: &str, merchant: &str, reference: &str) -> (&'static str, String) {
    ("refs", scope(env, merchant, reference))
}

/// The row that holds a create's Idempotency-Key record.
pub fn idem_row(env: &str, merchant: &str, key: &str) -> (&'static str, String) {
    ("idem", scope(env, merchant, key))
}

/// The row that names the merchant of payment or refund `id` (callbacks
/// and checkout links carry no merchant).
pub fn owner_row(env: &str, id: &str) -> (&'static str, String) {
    ("owners", [env, id].join("/"))
}

/// The row that finds a payment by the reference its operator gave it.
pub fn pspref_row(env: &str, operator: &str, reference: &str) -> (&'static str, String) {
    ("pspref", [env, operator, reference].join("/"))
}

pub fn time_key(ms: u64, env: &str, merchant: &str, id: &str) -> String {
    [padded_ms(ms).as_str(), env, merchant, id].join("/")
}

/// `ms` in 13 digits, zero-padded (as `{ms:013}`), so time keys sort by time.
/// Keys are built by joining their parts: a create builds a few dozen, and
/// `format!` (its formatter, and a string regrown part by part) was 7% of a
/// create's instructions (`bench/callgrind.sh`).
pub fn padded_ms(ms: u64) -> String {
    let mut digits = [b'0'; 20]; // u64::MAX has 20
    let (mut n, mut start) = (ms, digits.len());
    loop {
        start -= 1;
        digits[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let start = start.min(digits.len() - 13);
    digits[start..].iter().map(|&d| d as char).collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_ms_is_format_013() {
        for ms in [
            0,
            7,
            1_700_000_000_000,
            9_999_999_999_999,
            10_000_000_000_000,
            u64::MAX,
        ] {
            assert_eq!(padded_ms(ms), format!("{ms:013}"));
        }
    }

    #[test]
    fn keys_join_their_parts_with_slashes() {
        assert_eq!(scope("test", "m1", "p1"), "test/m1/p1");
        assert_eq!(time_key(42, "test", "m1", "p1"), "0000000000042/test/m1/p1");
    }
}
