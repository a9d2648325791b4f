//! Where [`crate::html::t`] finds a word after the layout's own: the tables
//! of the frame's areas, then those of the pages, set once when the service
//! is assembled ([`crate::add_words`]). It takes nothing from the modules
//! whose words it holds: they look their words up through it.

use std::sync::OnceLock;

/// (key, English, French).
pub type Table = &'static [(&'static str, &'static str, &'static str)];

static SET: OnceLock<[&'static [Table]; 2]> = OnceLock::new();

/// The frame's tables, then the pages'. The console has one set of words:
/// a second call with other tables changes nothing.
pub(crate) fn set(frame: &'static [Table], pages: &'static [Table]) {
    let _ = SET.set([frame, pages]);
}

/// Every table after the layout's: the frame's, then the pages'.
pub fn tables() -> impl Iterator<Item = Table> {
    SET.get()
        .into_iter()
        .flat_map(|[frame, pages]| frame.iter().chain(pages.iter()).copied())
}
