//! How a JSON value is read where the contract says "integer".

/// An integer as JSON Schema sees it: `1500` and `1500.0` both are; huge values saturate.
pub fn integer(n: &serde_json::Number) -> Option<i64> {
    if let Some(i) = n.as_i64() {
        return Some(i);
    }
    if n.as_u64().is_some() {
        return Some(i64::MAX);
    }
    n.as_f64()
        .filter(|f| f.fract() == 0.0 && f.is_finite())
        .map(|f| f.clamp(i64::MIN as f64, i64::MAX as f64) as i64)
}

#[cfg(test)]
mod tests {
    use super::integer;
    use serde_json::Number;

    fn n(text: &str) -> Number {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn an_integral_number_is_an_integer_whatever_its_spelling() {
        assert_eq!(integer(&n("1500")), Some(1500));
        assert_eq!(integer(&n("1500.0")), Some(1500));
        assert_eq!(integer(&n("-3.0")), Some(-3));
        assert_eq!(integer(&n("1.5")), None);
        assert_eq!(integer(&n("18446744073709551615")), Some(i64::MAX));
        assert_eq!(integer(&n("1e300")), Some(i64::MAX));
    }
}
