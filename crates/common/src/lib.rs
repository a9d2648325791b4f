//! What every part of the host leans on and nothing of the service's own:
//! time, path prefixes, hashes, secret files, graceful shutdown and keyed
//! concurrency limits (as Spin keeps `spin-common` under its factors).

pub mod clock;
pub mod crypto;
pub mod paths;
pub mod permits;
pub mod private_file;
pub mod shutdown;
