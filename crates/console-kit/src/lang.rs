//! The reader's language: French or English, as the request asks.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lang {
    En,
    Fr,
}

impl Lang {
    pub fn code(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Fr => "fr",
        }
    }

    /// `?lang=` first, then the `mmc_lang` cookie, then Accept-Language.
    pub fn pick(query: Option<&str>, cookie: Option<&str>, accept: Option<&str>) -> Lang {
        let parse = |s: &str| match s.trim().get(..2) {
            Some(p) if p.eq_ignore_ascii_case("fr") => Some(Lang::Fr),
            Some(p) if p.eq_ignore_ascii_case("en") => Some(Lang::En),
            _ => None,
        };
        query
            .and_then(parse)
            .or_else(|| cookie.and_then(parse))
            .or_else(|| accept.and_then(|a| a.split(',').find_map(parse)))
            .unwrap_or(Lang::En)
    }
}
