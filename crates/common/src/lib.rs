//! What every part of the host leans on and nothing of the service's own
//! (as Spin keeps `spin-common` under its factors): time, path prefixes,
//! hashes, secret files, graceful shutdown, memory given back after a burst,
//! the limits kept per key (concurrency and rate), and requests served on
//! the tokio worker that read them (`inline`).

pub mod clock;
pub mod crypto;
pub mod inline;
pub mod memory;
pub mod paths;
pub mod permits;
pub mod private_file;
pub mod rate_limit;
pub mod shutdown;
