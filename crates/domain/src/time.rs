//! RFC 3339 formatting of Unix milliseconds, without a date library in the guest.

/// `2026-06-01T12:00:00.123Z`.
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let millis = (ms % 1000) as u32;
    let days = (secs / 86_400) as i64;
    let rem = (secs % 86_400) as u32;
    let (y, m, d) = civil_from_days(days);
    let (hh, mm, ss) = (rem / 3600, rem % 3600 / 60, rem % 60);
    if !(0..=9999).contains(&y) {
        return format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{millis:03}Z");
    }
    // Every record, event and response carries several of these: written
    // digit by digit rather than through the formatting machinery.
    let mut out = *b"0000-00-00T00:00:00.000Z";
    let mut put = |at: usize, width: usize, mut n: u32| {
        for i in (at..at + width).rev() {
            out[i] = b'0' + (n % 10) as u8;
            n /= 10;
        }
    };
    put(0, 4, y as u32);
    put(5, 2, m);
    put(8, 2, d);
    put(11, 2, hh);
    put(14, 2, mm);
    put(17, 2, ss);
    put(20, 3, millis);
    String::from_utf8(out.to_vec()).expect("ASCII digits")
}

/// The day (days since 1970-01-01) of an instant written as [`rfc3339`]
/// writes it (its date is read, the rest ignored).
pub fn day_of(rfc3339: &str) -> Option<i64> {
    let num = |r: std::ops::Range<usize>| rfc3339.get(r)?.parse::<i64>().ok();
    if rfc3339.as_bytes().get(4) != Some(&b'-') || rfc3339.as_bytes().get(7) != Some(&b'-') {
        return None;
    }
    let (y, m, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Howard Hinnant's (year, month, day) → days, the inverse of `civil_from_days`.
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

/// The instant an RFC 3339 timestamp names, in ms since the Unix epoch
/// (`2026-06-01T12:00:00Z`, `…:00.123456Z`, `…:00+01:00`); none when it is
/// not one or is before 1970.
pub fn ms_of(rfc3339: &str) -> Option<u64> {
    let b = rfc3339.as_bytes();
    let days = day_of(rfc3339)?;
    if !matches!(b.get(10), Some(b'T' | b't' | b' ')) || b.get(13) != Some(&b':') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = rfc3339.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (hh, mm, ss) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if b.get(16) != Some(&b':') || hh > 23 || mm > 59 || ss > 60 {
        return None;
    }
    let mut at = 19;
    let mut millis = 0i64;
    if b.get(at) == Some(&b'.') {
        let digits = b[at + 1..]
            .iter()
            .take_while(|c| c.is_ascii_digit())
            .count();
        if digits == 0 {
            return None;
        }
        let first3 = &rfc3339[at + 1..at + 1 + digits.min(3)];
        millis = first3.parse::<i64>().ok()? * 10i64.pow(3 - digits.min(3) as u32);
        at += 1 + digits;
    }
    let offset_s = match &rfc3339[at..] {
        "Z" | "z" => 0,
        o if o.len() == 6 && (o.starts_with('+') || o.starts_with('-')) && &o[3..4] == ":" => {
            let (h, m) = (o[1..3].parse::<i64>().ok()?, o[4..6].parse::<i64>().ok()?);
            let s = h * 3600 + m * 60;
            if o.starts_with('-') { -s } else { s }
        }
        _ => return None,
    };
    let secs = days * 86_400 + hh * 3600 + mm * 60 + ss - offset_s;
    u64::try_from(secs * 1000 + millis).ok()
}

/// The date of a day (days since the Unix epoch, before it negative): `YYYY-MM-DD`.
pub fn date_of_day(day: i64) -> String {
    let (y, m, d) = civil_from_days(day);
    format!("{y:04}-{m:02}-{d:02}")
}

/// The UTC date of an instant: `YYYY-MM-DD`.
pub fn date(ms: u64) -> String {
    rfc3339(ms)[..10].to_string()
}

/// Howard Hinnant's days → (year, month, day) for the proleptic Gregorian calendar.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    #[test]
    fn formats_known_instants() {
        assert_eq!(super::rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(super::date(1_780_315_200_123), "2026-06-01");
        assert_eq!(super::date_of_day(20_605), "2026-06-01");
        assert_eq!(super::date_of_day(-1), "1969-12-31");
        assert_eq!(
            super::rfc3339(1_780_315_200_123),
            "2026-06-01T12:00:00.123Z"
        );
        assert_eq!(super::rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(
            super::rfc3339(253_402_300_799_999),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            super::rfc3339(253_402_300_800_000),
            "10000-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn a_written_instant_gives_back_its_day() {
        assert_eq!(super::day_of("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(super::day_of("2026-06-01T23:59:59.999Z"), Some(20_605));
        assert_eq!(super::day_of("2000-02-29"), Some(11_016));
        assert_eq!(super::day_of("2026-13-01T00:00:00Z"), None);
        assert_eq!(super::day_of("20260601"), None);
        assert_eq!(super::day_of(""), None);
    }

    #[test]
    fn a_timestamp_is_read_with_its_fraction_and_offset() {
        assert_eq!(
            super::ms_of("2026-06-01T12:00:00Z"),
            Some(1_780_315_200_000)
        );
        assert_eq!(
            super::ms_of("2026-06-01T12:00:00.123456Z"),
            Some(1_780_315_200_123)
        );
        assert_eq!(
            super::ms_of("2026-06-01T13:00:00.1+01:00"),
            Some(1_780_315_200_100)
        );
        assert_eq!(super::ms_of("2026-06-01T12:00:00"), None);
        assert_eq!(super::ms_of("2026-06-01"), None);
        assert_eq!(super::ms_of("2026-06-01T1x:00:00Z"), None);
    }

    proptest::proptest! {
        /// An instant written is read back exactly.
        #[test]
        fn reads_back_the_instant_it_wrote(ms in 0u64..253_402_300_799_999) {
            proptest::prop_assert_eq!(super::ms_of(&super::rfc3339(ms)), Some(ms));
        }

        /// The digit-by-digit writer says what `format!` says, at every instant.
        #[test]
        fn writes_what_format_writes(ms in 0u64..400_000_000_000_000) {
            let secs = ms / 1000;
            let rem = secs % 86_400;
            let (y, m, d) = super::civil_from_days((secs / 86_400) as i64);
            let expected = format!(
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
                rem / 3600,
                rem % 3600 / 60,
                rem % 60,
                ms % 1000
            );
            proptest::prop_assert_eq!(super::rfc3339(ms), expected);
        }

        /// A day read back from what was written is the instant's day.
        #[test]
        fn reads_back_the_day_it_wrote(ms in 0u64..253_402_300_799_999) {
            proptest::prop_assert_eq!(super::day_of(&super::rfc3339(ms)), Some((ms / 86_400_000) as i64));
        }
    }
}
