//! The `signing` capability: HMAC-SHA256 and SHA-256 (see [`mmc_common::crypto`]).

use crate::bindings::host::mmc::platform::signing::Host;
use mmc_common::crypto;

/// Needs nothing but the call's arguments.
pub struct View;

/// The marker the runtime links this interface with.
pub type Cap = View;

impl wasmtime::component::HasData for View {
    type Data<'a> = View;
}

impl Host for View {
    fn hmac_sha256(&mut self, key: Vec<u8>, message: Vec<u8>) -> wasmtime::Result<Vec<u8>> {
        let _span = tracing::debug_span!("signing", algorithm = "hmac-sha256").entered();
        Ok(crypto::hmac_sha256(&key, &message))
    }

    fn sha256(&mut self, data: Vec<u8>) -> wasmtime::Result<Vec<u8>> {
        let _span = tracing::debug_span!("signing", algorithm = "sha256").entered();
        Ok(crypto::sha256(&data))
    }
}
