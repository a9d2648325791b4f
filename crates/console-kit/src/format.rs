//! How the console writes amounts and times for its reader: the merchant's
//! currency with the language's grouping, the merchant's time zone shown.

use crate::lang::Lang;

/// French groups thousands with a narrow no-break space, English with a comma.
const FR_GROUP: char = '\u{202f}';

/// A whole number with the language's thousands grouping: `12,500` / `12 500`.
pub fn group(lang: Lang, n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let sep = if lang == Lang::Fr { FR_GROUP } else { ',' };
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if n < 0 {
        out.push('-');
    }
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(sep);
        }
        out.push(c);
    }
    out
}

/// A number as people read it: grouped, with at most `decimals` places,
/// the decimal comma in French.
pub fn number(lang: Lang, v: f64, decimals: usize) -> String {
    let text = format!("{:.*}", decimals, v.abs());
    let (whole, frac) = text.split_once('.').unwrap_or((&text, ""));
    let mut out = group(lang, whole.parse::<i64>().unwrap_or(0));
    if v < 0.0 && !out.starts_with('-') && v.abs() >= 0.5 * 10f64.powi(-(decimals as i32)) {
        out.insert(0, '-');
    }
    let frac = frac.trim_end_matches('0');
    if !frac.is_empty() {
        out.push(if lang == Lang::Fr { ',' } else { '.' });
        out.push_str(frac);
    }
    out
}

/// An amount in its currency as the reader's language writes it:
/// `12,500 XOF` in English, `12 500 FCFA` in French (the West and Central
/// African francs go by FCFA there).
pub fn money(lang: Lang, amount: i64, currency: &str) -> String {
    with_unit(lang, group(lang, amount), currency)
}

/// A written number followed by its currency as the language names it
/// (nothing when there is none).
fn with_unit(lang: Lang, number: String, currency: &str) -> String {
    let unit = match (lang, currency) {
        (Lang::Fr, "XOF" | "XAF") => "FCFA",
        (_, c) => c,
    };
    if unit.is_empty() {
        return number;
    }
    let space = if lang == Lang::Fr { '\u{a0}' } else { ' ' };
    format!("{number}{space}{unit}")
}

/// An amount written as decimal text (a provider's balance, `1234.50`) in
/// its currency, as [`money`] writes whole ones; the text as it came when
/// it is not a number.
pub fn money_text(lang: Lang, amount: &str, currency: &str) -> String {
    let Ok(v) = amount.trim().parse::<f64>() else {
        return format!("{amount} {currency}");
    };
    if v.fract() == 0.0 && v.abs() < 9e15 {
        return money(lang, v as i64, currency);
    }
    with_unit(lang, number(lang, v, 2), currency)
}

/// An amount of an API answer (`amount`, `currency` fields of `v`), or
/// nothing when it has none.
pub fn money_of(lang: Lang, v: &serde_json::Value) -> String {
    match v["amount"].as_i64() {
        Some(a) => money(lang, a, v["currency"].as_str().unwrap_or_default()),
        None => String::new(),
    }
}

/// The time zones a merchant of the service works in. None of them keeps
/// summer time, so each is a fixed offset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zone {
    /// Benin: West Africa Time, UTC+1.
    PortoNovo,
    /// Côte d'Ivoire: UTC+0.
    Abidjan,
    /// Togo: UTC+0.
    Lome,
    Utc,
}

impl Zone {
    pub const ALL: [Zone; 4] = [Zone::PortoNovo, Zone::Abidjan, Zone::Lome, Zone::Utc];

    /// The IANA name, as stored.
    pub fn name(self) -> &'static str {
        match self {
            Zone::PortoNovo => "Africa/Porto-Novo",
            Zone::Abidjan => "Africa/Abidjan",
            Zone::Lome => "Africa/Lome",
            Zone::Utc => "UTC",
        }
    }

    pub fn parse(s: &str) -> Option<Zone> {
        Zone::ALL.into_iter().find(|z| z.name() == s)
    }

    pub fn offset_minutes(self) -> i64 {
        match self {
            Zone::PortoNovo => 60,
            _ => 0,
        }
    }

    /// What a reader sees beside a time: `UTC+1`, `UTC`.
    pub fn label(self) -> &'static str {
        match self {
            Zone::PortoNovo => "UTC+1",
            _ => "UTC",
        }
    }

    /// A choice in the settings: the place and its offset.
    pub fn describe(self, lang: Lang) -> &'static str {
        match (self, lang) {
            (Zone::PortoNovo, Lang::En) => "Benin — Porto-Novo (UTC+1)",
            (Zone::PortoNovo, Lang::Fr) => "Bénin — Porto-Novo (UTC+1)",
            (Zone::Abidjan, Lang::En) => "Côte d'Ivoire — Abidjan (UTC+0)",
            (Zone::Abidjan, Lang::Fr) => "Côte d'Ivoire — Abidjan (UTC+0)",
            (Zone::Lome, Lang::En) => "Togo — Lomé (UTC+0)",
            (Zone::Lome, Lang::Fr) => "Togo — Lomé (UTC+0)",
            (Zone::Utc, _) => "UTC",
        }
    }

    /// Milliseconds since the epoch as this zone's civil date and time.
    fn civil(self, ms: u64) -> (i64, i64, i64, i64, i64) {
        let secs = (ms / 1000) as i64 + self.offset_minutes() * 60;
        let days = secs.div_euclid(86_400);
        let rem = secs.rem_euclid(86_400);
        let (y, m, d) = civil_from_days(days);
        (y, m, d, rem / 3600, (rem % 3600) / 60)
    }

    /// `YYYY-MM-DD 09:30 UTC+1`: a moment for a table or a page.
    pub fn when(self, ms: u64) -> String {
        let (y, m, d, h, min) = self.civil(ms);
        format!("{y:04}-{m:02}-{d:02} {h:02}:{min:02} {}", self.label())
    }

    /// The zone's calendar date of a moment, `YYYY-MM-DD`.
    pub fn date(self, ms: u64) -> String {
        let (y, m, d, _, _) = self.civil(ms);
        format!("{y:04}-{m:02}-{d:02}")
    }

    /// The moment a zone's `YYYY-MM-DD` begins, in seconds since the epoch.
    pub fn day_start_secs(self, date_utc_midnight_secs: u64) -> u64 {
        (date_utc_midnight_secs as i64 - self.offset_minutes() * 60).max(0) as u64
    }
}

/// An API answer's RFC 3339 time in the zone (as it came when unreadable).
pub fn when_text(zone: Zone, rfc3339: &str) -> String {
    match mmc_domain::time::ms_of(rfc3339) {
        Some(ms) => zone.when(ms),
        None => rfc3339.to_string(),
    }
}

/// Days since 1970-01-01 as a civil date (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `YYYY-MM-DD` as Unix seconds at 00:00 UTC.
pub fn date_secs(s: &str) -> Option<u64> {
    let mut it = s.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, d) = (it.next()??, it.next()??, it.next()??);
    if !(1970..=9999).contains(&y) || !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    // Days from civil (H. Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(((era * 146_097 + doe - 719_468) * 86_400) as u64)
}

/// When an event happened: its envelope's `created`, in Unix seconds.
pub fn event_ms(e: &serde_json::Value) -> u64 {
    e["created"].as_u64().unwrap_or(0) * 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn amounts_group_as_each_language_writes_them() {
        assert_eq!(money(Lang::En, 12_500, "XOF"), "12,500 XOF");
        assert_eq!(money(Lang::Fr, 12_500, "XOF"), "12\u{202f}500\u{a0}FCFA");
        assert_eq!(money(Lang::En, 999, "XOF"), "999 XOF");
        assert_eq!(money(Lang::En, 1_000_000, "GHS"), "1,000,000 GHS");
        assert_eq!(group(Lang::En, -1_234_567), "-1,234,567");
        assert_eq!(number(Lang::Fr, 1234.5, 1), "1\u{202f}234,5");
        assert_eq!(number(Lang::En, 97.0, 1), "97");
        assert_eq!(money_text(Lang::En, "100000000", "XOF"), "100,000,000 XOF");
        assert_eq!(
            money_text(Lang::Fr, "1234.5", "GHS"),
            "1\u{202f}234,5\u{a0}GHS"
        );
        assert_eq!(money_text(Lang::En, "n/a", "XOF"), "n/a XOF");
    }

    #[test]
    fn times_are_in_the_merchant_zone_with_the_zone_shown() {
        // 2026-12-05T23:30:00Z
        let ms = 1_796_513_400_000;
        assert_eq!(Zone::Utc.when(ms), "2026-12-05 23:30 UTC");
        assert_eq!(Zone::PortoNovo.when(ms), "2026-12-06 00:30 UTC+1");
        assert_eq!(Zone::PortoNovo.date(ms), "2026-12-06");
        assert_eq!(Zone::Abidjan.date(ms), "2026-12-05");
        assert_eq!(Zone::parse("Africa/Lome"), Some(Zone::Lome));
        assert_eq!(Zone::parse("Europe/Paris"), None);
    }
}
