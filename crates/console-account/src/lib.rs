//! The console's account pages: sign-in, the second factor and a person's
//! security ([`auth`]), the team ([`team`]), the developers' keys and
//! webhooks ([`keys`], [`hooks`]) and the audit log's page ([`audit`]).

pub mod audit;
pub mod auth;
pub mod hooks;
pub mod keys;
pub mod team;
