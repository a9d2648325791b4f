//! The engine and what every Store of it is linked with: the Wasm
//! configuration (epochs, the pooling allocator sized for the largest
//! memory cap), the API components' imports, the adapters' narrower ones,
//! and the ticker that drives deadlines.

use super::*;

/// The engine, its pool sized for the largest memory cap any component has
/// and for every instance slot.
pub(super) fn engine(config: &Config) -> anyhow::Result<Engine> {
    let mut wasm_config = wasmtime::Config::new();
    wasm_config.epoch_interruption(true);
    wasm_config.wasm_component_model(true);
    let max_memory_mib = config
        .components
        .values()
        .filter_map(|c| c.memory_mib)
        .chain([config.limits.memory_mib])
        .max()
        .unwrap_or(config.limits.memory_mib);
    wasm_config.allocation_strategy(pool::strategy(
        max_memory_mib,
        config.limits.concurrent_calls
            + config.limits.adapter_slots()
            + config.limits.warm_instances,
    ));
    Engine::new(&wasm_config).map_err(|e| anyhow::anyhow!("wasmtime engine: {e}"))
}

/// Everything an API component may import.
pub(super) fn api_linker(engine: &Engine) -> anyhow::Result<Linker<HostState>> {
    let mut api_linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut api_linker).map_err(|e| anyhow::anyhow!("{e}"))?;
    wasi_io::link(&mut api_linker).map_err(|e| anyhow::anyhow!("{e}"))?;
    bindings::host::HostCapabilities::add_to_linker::<_, HasSelf<HostState>>(
        &mut api_linker,
        |s| s,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    bindings::surface::mmc::api::http_types::add_to_linker::<_, HasSelf<HostState>>(
        &mut api_linker,
        |s| s,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    bindings::facade::mmc::api::payment_types::add_to_linker::<_, HasSelf<HostState>>(
        &mut api_linker,
        |s| s,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    bindings::facade::mmc::api::payments::add_to_linker::<_, HasSelf<HostState>>(
        &mut api_linker,
        |s| s,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(api_linker)
}

/// What an adapter may import: no storage and no router, so it cannot
/// reach payment data (the journal is the adapter's own, and append-only).
pub(super) fn adapter_linker(engine: &Engine) -> anyhow::Result<Linker<HostState>> {
    let mut adapter_linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut adapter_linker)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    wasi_io::link(&mut adapter_linker).map_err(|e| anyhow::anyhow!("{e}"))?;
    bindings::adapter::Adapter::add_to_linker::<_, HasSelf<HostState>>(&mut adapter_linker, |s| s)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    // Imported by the simulated provider only (`simulated-provider`).
    bindings::simulated::mmc::platform::journal::add_to_linker::<_, HasSelf<HostState>>(
        &mut adapter_linker,
        |s| s,
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(adapter_linker)
}

/// Starts the thread that advances `engine`'s epoch every [`TICK`], until
/// the flag it returns is set (when the runtime is dropped). Once a second
/// it also lets the runtime's idle warm instances go if nothing else holds
/// the runtime ([`Runtime::release_if_orphaned`]); `runtime` is set once the
/// runtime exists.
pub(super) fn start_epoch_ticker(
    engine: &Engine,
    runtime: Arc<std::sync::OnceLock<std::sync::Weak<Runtime>>>,
) -> anyhow::Result<Arc<AtomicBool>> {
    const TICKS_A_SECOND: u32 = 100;
    let stop_ticker = Arc::new(AtomicBool::new(false));
    let engine = engine.clone();
    let stop = stop_ticker.clone();
    std::thread::Builder::new()
        .name("epoch-ticker".into())
        .spawn(move || {
            let mut ticks = 0u32;
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(TICK);
                engine.increment_epoch();
                ticks = (ticks + 1) % TICKS_A_SECOND;
                if ticks == 0
                    && let Some(runtime) = runtime.get().and_then(std::sync::Weak::upgrade)
                {
                    runtime.release_if_orphaned();
                }
            }
        })?;
    Ok(stop_ticker)
}
