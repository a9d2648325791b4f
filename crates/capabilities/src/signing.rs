//! The `signing` capability: HMAC-SHA256 and SHA-256 (see [`mmc_common::crypto`]).

use crate::bindings::host::mmc::platform::signing::Host;
use crate::state::HostState;
use mmc_common::crypto;

impl Host for HostState {
    fn hmac_sha256(&mut self, key: Vec<u8>, message: Vec<u8>) -> wasmtime::Result<Vec<u8>> {
        let _span = tracing::debug_span!("signing", algorithm = "hmac-sha256").entered();
        Ok(crypto::hmac_sha256(&key, &message))
    }

    fn sha256(&mut self, data: Vec<u8>) -> wasmtime::Result<Vec<u8>> {
        let _span = tracing::debug_span!("signing", algorithm = "sha256").entered();
        Ok(crypto::sha256(&data))
    }
}
