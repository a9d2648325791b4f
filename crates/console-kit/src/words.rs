//! Where [`crate::html::t`] finds a word after the layout's own: the tables of
//! the frame's areas, then those of the pages, which `mmc-console` adds once
//! ([`add`]) when the service is assembled.

use std::sync::OnceLock;

/// (key, English, French).
pub type Table = &'static [(&'static str, &'static str, &'static str)];

const OWN: &[Table] = &[
    crate::totp::WORDS,
    crate::audit::WORDS,
    crate::format::WORDS,
    crate::outcomes::WORDS,
];

static ADDED: OnceLock<&'static [Table]> = OnceLock::new();

/// The pages' tables, looked in after the frame's. The console has one set
/// of words: a second call with other tables changes nothing.
pub fn add(tables: &'static [Table]) {
    let _ = ADDED.set(tables);
}

/// Every table after the layout's: the frame's, then the pages'.
pub fn tables() -> impl Iterator<Item = Table> {
    OWN.iter()
        .copied()
        .chain(ADDED.get().into_iter().flat_map(|t| t.iter().copied()))
}
