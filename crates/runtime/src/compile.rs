//! Compiled-code cache: `<cache>/<name>-<hash>.cwasm`, where the hash covers
//! the component bytes and the engine's compatibility hash, so a restart
//! (or another test) reuses the machine code instead of compiling again.

use std::hash::{Hash, Hasher};
use std::path::Path;

use wasmtime::Engine;
use wasmtime::component::Component;

pub fn compile_cached(
    engine: &Engine,
    cache_dir: &Path,
    name: &str,
    content_hash: &str,
    bytes: &[u8],
) -> Result<Component, String> {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    engine.precompile_compatibility_hash().hash(&mut h);
    let key = format!("{name}-{}-{:016x}.cwasm", &content_hash[..32], h.finish());
    let path = cache_dir.join(key);
    if path.exists() {
        // SAFETY: the file was written by `precompile_component` of an engine
        // with the same compatibility hash, in a directory we own.
        match unsafe { Component::deserialize_file(engine, &path) } {
            Ok(c) => return Ok(c),
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e, "cached component unusable; recompiling")
            }
        }
    }
    let started = std::time::Instant::now();
    let compiled = engine
        .precompile_component(bytes)
        .map_err(|e| format!("{e:#}"))?;
    tracing::info!(
        component = name,
        ms = started.elapsed().as_millis() as u64,
        "component compiled"
    );
    if std::fs::create_dir_all(cache_dir).is_ok() {
        // Write then rename: a concurrent reader never sees half a file.
        let tmp = cache_dir.join(format!(".{}.{}.tmp", name, uuid::Uuid::new_v4().simple()));
        if std::fs::write(&tmp, &compiled).is_ok() && std::fs::rename(&tmp, &path).is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
    }
    // SAFETY: produced just above by this engine.
    unsafe { Component::deserialize(engine, &compiled) }.map_err(|e| format!("{e:#}"))
}
