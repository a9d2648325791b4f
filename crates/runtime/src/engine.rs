//! The engine and what every Store of it is linked with: the Wasm
//! configuration (epochs, the pooling allocator sized for the largest
//! memory cap), the API components' imports, the adapters' narrower ones,
//! and the ticker that drives deadlines.

use super::*;
use crate::bindings::host::mmc::{adapter, platform};
use crate::state::Calling;
use mmc_capabilities::{
    Types, cache, clock, config, journal, log, node, outbound_http, signing, storage,
};

/// The engine, its pool sized for the largest memory cap any component has
/// and for every instance slot.
pub(super) fn engine(config: &Config) -> anyhow::Result<Engine> {
    let mut wasm_config = wasmtime::Config::new();
    wasm_config.epoch_interruption(true);
    wasm_config.wasm_component_model(true);
    let max_memory_mib = largest_override(config, config.limits.memory_mib, |c| c.memory_mib);
    if !config.limits.reserve_address_space {
        // A slot of exactly the cap: no guard region, explicit bounds checks.
        wasm_config
            .memory_reservation(max_memory_mib << 20)
            .memory_guard_size(0)
            .memory_reservation_for_growth(0);
    }
    wasm_config.allocation_strategy(pool::strategy(
        max_memory_mib,
        config.limits.concurrent_calls
            + config.limits.adapter_slots()
            + config.limits.warm_instances,
    ));
    Engine::new(&wasm_config).map_err(|e| {
        let hint = if config.limits.reserve_address_space {
            " (a host that caps virtual memory needs limits.reserve_address_space=false)"
        } else {
            ""
        };
        anyhow::anyhow!("wasmtime engine: {e:#}{hint}")
    })
}

/// Everything an API component may import.
pub(super) fn api_linker(engine: &Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    wasi_io::link(&mut linker)?;
    link_platform(&mut linker)?;
    platform::storage::add_to_linker::<_, storage::Cap>(&mut linker, |s| storage::View {
        component: &s.component,
        backend: &*s.runtime.services.storage,
        metrics: &s.runtime.services.metrics,
        table: &mut s.table,
        open_txn: &mut s.open_txn,
        lease: s.lease.as_deref(),
    })?;
    platform::node::add_to_linker::<_, node::Cap>(&mut linker, |s| {
        node::View(&*s.runtime.services.nodes)
    })?;
    adapter::router::add_to_linker::<_, Calling<'static>>(&mut linker, HostState::calling)?;
    bindings::surface::mmc::api::http_types::add_to_linker::<_, Calling<'static>>(
        &mut linker,
        HostState::calling,
    )?;
    bindings::facade::mmc::api::payment_types::add_to_linker::<_, Calling<'static>>(
        &mut linker,
        HostState::calling,
    )?;
    bindings::facade::mmc::api::payments::add_to_linker::<_, Calling<'static>>(
        &mut linker,
        HostState::calling,
    )?;
    Ok(linker)
}

/// What an adapter may import: no storage and no router, so it cannot
/// reach payment data (the journal is the adapter's own, and append-only).
pub(super) fn adapter_linker(engine: &Engine) -> wasmtime::Result<Linker<HostState>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    wasi_io::link(&mut linker)?;
    link_platform(&mut linker)?;
    // Imported by the simulated provider only (`simulated-provider`).
    bindings::simulated::mmc::platform::journal::add_to_linker::<_, journal::Cap>(
        &mut linker,
        |s| journal::View {
            component: &s.component,
            journal: &s.runtime.services.journal,
            clock: &*s.runtime.services.clock,
            metrics: &s.runtime.services.metrics,
        },
    )?;
    Ok(linker)
}

/// The capabilities both kinds of component import, each linked with a
/// view of only what it needs.
fn link_platform(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    platform::types::add_to_linker::<_, Types>(linker, |_| Types)?;
    adapter::types::add_to_linker::<_, Types>(linker, |_| Types)?;
    platform::outbound_http::add_to_linker::<_, outbound_http::Cap>(linker, |s| {
        outbound_http::View {
            component: &s.component,
            allowed_hosts: &s.config.allowed_hosts,
            timeout_ms: s.runtime.limits.outbound_timeout_ms,
            fence: &mut s.fence,
            clock: &*s.runtime.services.clock,
            client: &*s.runtime.services.http,
        }
    })?;
    platform::signing::add_to_linker::<_, signing::Cap>(linker, |_| signing::View)?;
    platform::clock::add_to_linker::<_, clock::Cap>(linker, |s| {
        clock::View(&*s.runtime.services.clock)
    })?;
    platform::log::add_to_linker::<_, log::Cap>(linker, |s| log::View {
        component: &s.component,
        metrics: &s.runtime.services.metrics,
    })?;
    platform::config::add_to_linker::<_, config::Cap>(linker, |s| config::View {
        own: &s.config,
        facts: &s.runtime.facts,
    })?;
    platform::cache::add_to_linker::<_, cache::Cap>(linker, |s| cache::View {
        component: &s.component,
        cache: &s.runtime.services.cache,
        clock: &*s.runtime.services.clock,
    })?;
    Ok(())
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
