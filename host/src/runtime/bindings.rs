//! Host-side bindings of the WIT worlds. The capability interfaces are
//! generated once (`host`) and reused by every world through `with`, so a
//! type such as `operator-info` is one Rust type whether it comes from an
//! adapter's export or goes to an API component's import.

pub mod host {
    wasmtime::component::bindgen!({
        path: ["../wit/platform", "../wit/adapter", "../wit/api"],
        world: "mmc:api/host-capabilities",
        imports: { default: trappable },
        with: {
            "mmc:platform/storage.transaction": crate::capabilities::storage::TxnHandle,
        },
        additional_derives: [PartialEq],
    });
}

pub mod adapter {
    wasmtime::component::bindgen!({
        path: ["../wit/platform", "../wit/adapter", "../wit/api"],
        world: "mmc:adapter/adapter",
        imports: { default: trappable },
        with: {
            "mmc:platform": super::host::mmc::platform,
            "mmc:adapter/types": super::host::mmc::adapter::types,
        },
    });
}

/// The provider's books, exported by adapters of the `bookkeeping-adapter`
/// world: only its `books` export is used (looked up per component, since an
/// adapter built for `adapter` alone has none).
pub mod books {
    wasmtime::component::bindgen!({
        path: ["../wit/platform", "../wit/adapter", "../wit/api"],
        world: "mmc:adapter/bookkeeping-adapter",
        imports: { default: trappable },
        with: {
            "mmc:platform": super::host::mmc::platform,
            "mmc:adapter/types": super::host::mmc::adapter::types,
        },
    });
}

/// The simulated provider's world: the `journal` it keeps its books in.
pub mod simulated {
    wasmtime::component::bindgen!({
        path: ["../wit/platform", "../wit/adapter", "../wit/api"],
        world: "mmc:adapter/simulated-provider",
        imports: { default: trappable },
        with: {
            "mmc:platform/types": super::host::mmc::platform::types,
            "mmc:platform/outbound-http": super::host::mmc::platform::outbound_http,
            "mmc:platform/signing": super::host::mmc::platform::signing,
            "mmc:platform/clock": super::host::mmc::platform::clock,
            "mmc:platform/log": super::host::mmc::platform::log,
            "mmc:platform/config": super::host::mmc::platform::config,
            "mmc:platform/cache": super::host::mmc::platform::cache,
            "mmc:adapter/types": super::host::mmc::adapter::types,
        },
    });
}

pub mod surface {
    wasmtime::component::bindgen!({
        path: ["../wit/platform", "../wit/adapter", "../wit/api"],
        world: "mmc:api/surface",
        imports: { default: trappable },
        with: {
            "mmc:platform": super::host::mmc::platform,
            "mmc:adapter": super::host::mmc::adapter,
        },
    });
}

pub mod facade {
    wasmtime::component::bindgen!({
        path: ["../wit/platform", "../wit/adapter", "../wit/api"],
        world: "mmc:api/facade",
        imports: { default: trappable },
        with: {
            "mmc:platform": super::host::mmc::platform,
            "mmc:adapter": super::host::mmc::adapter,
            "mmc:api/http-types": super::surface::mmc::api::http_types,
        },
    });
}

pub mod service {
    wasmtime::component::bindgen!({
        path: ["../wit/platform", "../wit/adapter", "../wit/api"],
        world: "mmc:api/service",
        imports: { default: trappable },
        with: {
            "mmc:platform": super::host::mmc::platform,
            "mmc:adapter": super::host::mmc::adapter,
            "mmc:api/http-types": super::surface::mmc::api::http_types,
        },
    });
}

pub mod collect {
    wasmtime::component::bindgen!({
        path: ["../wit/platform", "../wit/adapter", "../wit/api"],
        world: "mmc:api/collect",
        imports: { default: trappable },
        with: {
            "mmc:platform": super::host::mmc::platform,
            "mmc:adapter": super::host::mmc::adapter,
            "mmc:api/http-types": super::surface::mmc::api::http_types,
            "mmc:api/payment-types": super::facade::mmc::api::payment_types,
        },
    });
}

pub use books::exports::mmc::adapter::books as provider_books;
/// The `recheck` export of the components that own money movements
/// (`collect`, bulk payouts): looked up per component at load.
pub use collect::exports::mmc::api::recheck as record_recheck;
pub use facade::mmc::api::payment_types;
pub use host::mmc::adapter::types as adapter_types;
pub use host::mmc::platform::types::CapabilityError;
pub use surface::mmc::api::http_types;
