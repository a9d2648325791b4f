//! The `signing` capability: HMAC-SHA256 and SHA-256, computed natively.

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use crate::runtime::bindings::host::mmc::platform::signing::Host;
use crate::runtime::state::HostState;

pub fn hmac_sha256(key: &[u8], message: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

impl Host for HostState {
    fn hmac_sha256(&mut self, key: Vec<u8>, message: Vec<u8>) -> wasmtime::Result<Vec<u8>> {
        Ok(hmac_sha256(&key, &message))
    }

    fn sha256(&mut self, data: Vec<u8>) -> wasmtime::Result<Vec<u8>> {
        Ok(Sha256::digest(&data).to_vec())
    }
}
