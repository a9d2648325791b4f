//! The calls the host makes into components: an HTTP request, a job, the
//! rendering of stored events, `collect`'s exports, and an operator's adapter.

use super::*;
use crate::state::LeaseGuard;

impl Runtime {
    /// One HTTP request into an API component.
    pub fn handle(
        self: &Arc<Self>,
        component: &str,
        caller: Option<&Caller>,
        req: &Request,
    ) -> Result<Response, CallError> {
        let loaded = self
            .get(component)
            .ok_or_else(|| CallError::NotLoaded(component.into()))?;
        let handler = loaded.handler.as_ref();
        self.invoke(&loaded, |store, pre| {
            let pre = match pre {
                Pre::Collect(p) => p.instance_pre(),
                Pre::Service(p) => p.instance_pre(),
                Pre::Surface(p) => p.instance_pre(),
                Pre::Adapter(_) => return Err(wasmtime::format_err!("not an API component")),
            };
            let handler =
                handler.ok_or_else(|| wasmtime::format_err!("no mmc:api/handler#handle export"))?;
            // Only the handler is looked up and type-checked: the generated
            // `instantiate` checks every export (payments, jobs) on every call.
            let instance = pre.instantiate(&mut *store)?;
            let handle = instance
                .get_typed_func::<(Option<&Caller>, &Request), (Response,)>(&mut *store, handler)?;
            Ok(handle.call(&mut *store, (caller, req))?.0)
        })
    }

    /// One unit of background work (expiry, reconciliation...) in a component that has jobs.
    pub fn run_job(
        self: &Arc<Self>,
        component: &str,
        job: &str,
        limit: u32,
    ) -> Result<u32, CallError> {
        self.run_job_leased(component, job, limit, None)
    }

    /// [`run_job`](Self::run_job) under a job lease: none of its writes
    /// commits once `lease` is no longer held (see [`LeaseGuard`]).
    pub fn run_job_leased(
        self: &Arc<Self>,
        component: &str,
        job: &str,
        limit: u32,
        lease: Option<Arc<dyn LeaseGuard>>,
    ) -> Result<u32, CallError> {
        let loaded = self
            .get(component)
            .ok_or_else(|| CallError::NotLoaded(component.into()))?;
        if !matches!(loaded.kind, Kind::Collect | Kind::Service) {
            return Err(CallError::WrongKind(component.into()));
        }
        self.invoke(&loaded, |store, pre| {
            store.data_mut().lease = lease;
            run_job_in(store, pre, job, limit)
        })
    }

    /// The JSON bodies of events `collect` stored in its compact form (its
    /// `events` export), for webhook deliveries and the events API.
    pub fn render_events(
        self: &Arc<Self>,
        payloads: Vec<Vec<u8>>,
    ) -> Result<Vec<Option<Vec<u8>>>, CallError> {
        self.call_collect(|store, collect| {
            collect.mmc_api_events().call_render(&mut *store, &payloads)
        })
    }

    /// Calls an export of the `collect` component in a Store of its own: its
    /// `payments` (for facades such as legacy), its `events`.
    pub fn call_collect<R>(
        self: &Arc<Self>,
        f: impl FnOnce(&mut Store<HostState>, &Collect) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        let loaded = self
            .get(PAYMENTS_COMPONENT)
            .ok_or_else(|| CallError::NotLoaded(PAYMENTS_COMPONENT.into()))?;
        self.invoke(&loaded, |store, pre| match pre {
            Pre::Collect(p) => {
                let instance = p.instantiate(&mut *store)?;
                f(store, &instance)
            }
            _ => Err(wasmtime::format_err!(
                "{PAYMENTS_COMPONENT} is not the collect world (payments, events)"
            )),
        })
    }

    /// Calls the `books` export of adapter `name`: none when it has none
    /// (an adapter that reads no books, or no adapter of that name).
    pub fn call_books<R>(
        self: &Arc<Self>,
        name: &str,
        f: impl FnOnce(&mut Store<HostState>, &bindings::provider_books::Guest) -> wasmtime::Result<R>,
    ) -> Result<Option<R>, CallError> {
        let Some(loaded) = self.get(name).filter(|l| l.kind == Kind::Adapter) else {
            return Err(CallError::NotLoaded(name.into()));
        };
        let Some(indices) = loaded.books.clone() else {
            return Ok(None);
        };
        self.invoke(&loaded, |store, pre| match pre {
            Pre::Adapter(p) => {
                let instance = p.instance_pre().instantiate(&mut *store)?;
                let books = indices.load(&mut *store, &instance)?;
                f(store, &books)
            }
            _ => unreachable!("kind checked above"),
        })
        .map(Some)
    }

    /// Asks component `name` to check record `id` again with its provider
    /// (its `recheck` export): whether the provider was asked. False when
    /// the component has no such export.
    pub fn recheck(
        self: &Arc<Self>,
        name: &str,
        (environment, merchant_id): (&str, &str),
        id: &str,
        within: Option<&str>,
    ) -> Result<bool, CallError> {
        let loaded = self
            .get(name)
            .ok_or_else(|| CallError::NotLoaded(name.into()))?;
        let Some(indices) = loaded.recheck.clone() else {
            return Ok(false);
        };
        self.invoke(&loaded, |store, pre| {
            let pre = match pre {
                Pre::Collect(p) => p.instance_pre(),
                Pre::Service(p) => p.instance_pre(),
                _ => unreachable!("found at load on API components only"),
            };
            let instance = pre.instantiate(&mut *store)?;
            indices.load(&mut *store, &instance)?.call_recheck(
                &mut *store,
                environment,
                merchant_id,
                id,
                within,
            )
        })
    }

    /// Calls the adapter serving (environment, operator).
    pub fn call_adapter<R>(
        self: &Arc<Self>,
        environment: &str,
        operator: &str,
        f: impl FnOnce(&mut Store<HostState>, &Adapter) -> wasmtime::Result<R>,
    ) -> Result<R, CallError> {
        self.call_adapter_traced(environment, operator, f).0
    }

    /// As [`Runtime::call_adapter`], also returning the version that served
    /// the call (for the audit trail). The version is pinned for the call:
    /// a hot swap meanwhile affects only later calls.
    pub fn call_adapter_traced<R>(
        self: &Arc<Self>,
        environment: &str,
        operator: &str,
        f: impl FnOnce(&mut Store<HostState>, &Adapter) -> wasmtime::Result<R>,
    ) -> (Result<R, CallError>, Option<Arc<Loaded>>) {
        self.call_adapter_waiting((environment, operator), None, None, f)
    }

    /// As [`Runtime::call_adapter_traced`], waiting at most `slot_wait` (when
    /// shorter than the usual wait) for a free instance: for callers that
    /// must answer sooner than a payment waits (an operator's callback).
    /// The adapter is `via` when given (the route an operation was sent
    /// through), else the operator's first route.
    pub fn call_adapter_waiting<R>(
        self: &Arc<Self>,
        (environment, operator): (&str, &str),
        via: Option<&str>,
        slot_wait: Option<Duration>,
        f: impl FnOnce(&mut Store<HostState>, &Adapter) -> wasmtime::Result<R>,
    ) -> (Result<R, CallError>, Option<Arc<Loaded>>) {
        let Some(loaded) = self.adapter_via(environment, operator, via) else {
            let e = CallError::NoRoute {
                environment: environment.into(),
                operator: operator.into(),
            };
            return (Err(e), None);
        };
        let result = if loaded.warm_calls().is_some() {
            self.call_warm(&loaded, slot_wait, f)
        } else {
            self.invoke_waiting(&loaded, slot_wait, |store, pre| match pre {
                Pre::Adapter(p) => {
                    let instance = p.instantiate(&mut *store)?;
                    f(store, &instance)
                }
                _ => unreachable!("adapter_for checks the kind"),
            })
        };
        (result, Some(loaded))
    }
}

/// The `jobs.run` export of an API component that has jobs.
fn run_job_in(
    store: &mut Store<HostState>,
    pre: &Pre,
    job: &str,
    limit: u32,
) -> wasmtime::Result<u32> {
    match pre {
        Pre::Collect(p) => {
            p.instantiate(&mut *store)?
                .mmc_api_jobs()
                .call_run(&mut *store, job, limit)
        }
        Pre::Service(p) => {
            p.instantiate(&mut *store)?
                .mmc_api_jobs()
                .call_run(&mut *store, job, limit)
        }
        _ => unreachable!("kind checked by the caller"),
    }
}
