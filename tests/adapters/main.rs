//! Live operator adapters against faithful fake operator servers, over real HTTP.

#[path = "../support/mod.rs"]
mod support;
