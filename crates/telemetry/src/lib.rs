//! What the service tells its operators as it runs: the log's shape
//! ([`logging`]) and the OpenTelemetry traces ([`traces`]).

pub mod logging;
pub mod traces;
