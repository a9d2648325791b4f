//! How the console writes amounts and times for its reader: the merchant's
//! currency with the language's grouping, the merchant's time zone shown.

/// The formatting words: (key, English, French), looked up by [`super::html::t`].
pub const WORDS: &[(&str, &str, &str)] = &[];
