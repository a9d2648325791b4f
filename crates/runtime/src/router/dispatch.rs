//! Sending a call to the adapter of its route: its own Store and
//! deadline, a money movement's sending fence, status queries paced under
//! their provider's cap and asked many at once.

use super::*;

/// At most this many operator calls of one `status-many` run at once.
pub(super) const STATUS_FAN_OUT: usize = 16;

/// One attempt of a money movement, under its sending deadline (see
/// [`Fence`]). When the deadline stopped a request, the answer is `timeout`
/// whatever the adapter made of it: this attempt sends nothing more, and
/// what it or earlier ones sent is asked about by our id, never taken as
/// refused (nor as `busy`, which says nothing was sent at all).
pub(super) fn fenced<T>(
    store: &mut wasmtime::Store<HostState>,
    send_until_ms: u64,
    call: impl FnOnce(&mut wasmtime::Store<HostState>) -> Outcome<T>,
) -> Outcome<T> {
    store.data_mut().fence = Some(Fence::until(send_until_ms));
    let answer = call(store)?;
    if store.data().fence.is_some_and(|f| f.tripped) {
        // Counted as a `timeout` outcome of the call (`mmc_adapter_calls_total`).
        tracing::warn!(
            component = &*store.data().component,
            "money movement fenced: its attempt's deadline had passed"
        );
        return Ok(Err(AdapterError::Timeout(
            "this attempt's sending deadline passed: nothing more was sent".into(),
        )));
    }
    Ok(answer)
}

/// An operator call (network, seconds) never runs inside a storage
/// transaction: it would hold the writer while it waits.
pub(super) fn in_transaction() -> AdapterError {
    AdapterError::Rejected(
        "operator calls are not allowed while a storage transaction is open".into(),
    )
}

/// One operator call through the adapter of its route (`via`, else the
/// operator's first route), recorded in the audit trail; a failing adapter
/// is an `adapter-error`.
pub(super) fn routed<T>(
    runtime: &Arc<Runtime>,
    call: (&str, &str),
    target: (&str, &str),
    via: Option<&str>,
    slot_wait: Option<Duration>,
    f: impl FnOnce(&mut wasmtime::Store<HostState>, &Adapter) -> Outcome<T>,
) -> Result<T, AdapterError> {
    // The provider's request, in the trace: whose money (our id, never the
    // customer's number), which operator, through which adapter.
    let span = tracing::debug_span!(
        "operator",
        operation = call.0,
        subject_id = call.1,
        operator = target.1,
        environment = target.0,
        adapter = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    let _entered = span.enter();
    let started = Instant::now();
    // An operator call may wait on the network for seconds: never on a tokio worker.
    let (result, served_by) =
        crate::inline::may_block(|| runtime.call_adapter_waiting(target, via, slot_wait, f));
    if let Some(l) = &served_by {
        span.record("adapter", l.name.as_str());
    }
    span.record("outcome", outcome_of(&result));
    answered(runtime, call, target, via, started, result, served_by)
}

/// The status queries asked many at a time: of a payment, a refund, a payout.
#[derive(Clone, Copy)]
pub(super) enum StatusOf {
    Payment,
    Refund,
    Payout,
}

impl StatusOf {
    fn operation(self) -> &'static str {
        match self {
            StatusOf::Payment => "status",
            StatusOf::Refund => "refund_status",
            StatusOf::Payout => "payout_status",
        }
    }

    fn call(
        self,
        s: &mut wasmtime::Store<HostState>,
        a: &Adapter,
        op: &OperationRef,
    ) -> wasmtime::Result<Result<PspStatus, AdapterError>> {
        let operator = a.mmc_adapter_operator();
        match self {
            StatusOf::Payment => operator.call_status(s, op),
            StatusOf::Refund => operator.call_refund_status(s, op),
            StatusOf::Payout => operator.call_payout_status(s, op),
        }
    }
}

/// Waits for a status query's turn under its provider's cap (see
/// `runtime::pacing`); an error when none comes soon: nothing was asked, the
/// outcome stays unknown, and the next round asks again.
pub(super) fn paced(
    runtime: &Arc<Runtime>,
    kind: StatusOf,
    via: Option<&str>,
    op: &OperationRef,
) -> Result<(), AdapterError> {
    let Some(adapter) = runtime.adapter_via(&op.environment, &op.operator, via) else {
        return Ok(()); // no route: the call itself says so
    };
    let per_second = adapter
        .operators
        .iter()
        .find(|o| o.slug == op.operator)
        .map_or(0, |o| o.status_per_second);
    // Waiting for a turn blocks this thread: never a tokio worker's core
    // (the adapters' own HTTP runs there).
    let turn = crate::inline::may_block(|| {
        runtime
            .status_pacer
            .take(&adapter.name, per_second, crate::pacing::MAX_WAIT)
    });
    if turn {
        return Ok(());
    }
    runtime
        .services
        .metrics
        .adapter_call(&adapter.name, kind.operation(), "paced");
    Err(AdapterError::Unavailable(format!(
        "not asked: {} allows {per_second} status queries a second",
        adapter.name
    )))
}

pub(super) fn status_of(
    runtime: &Arc<Runtime>,
    kind: StatusOf,
    via: Option<&str>,
    op: &OperationRef,
) -> Result<PspStatus, AdapterError> {
    paced(runtime, kind, via, op)?;
    routed(
        runtime,
        (kind.operation(), &op.id),
        (&op.environment, &op.operator),
        via,
        None,
        |s, a| kind.call(s, a, op),
    )
}

/// The `kind` status of each of `ops`, at most [`STATUS_FAN_OUT`] at once, in
/// the order given. Each call has its own adapter deadline.
pub(super) fn statuses(
    runtime: &Arc<Runtime>,
    kind: StatusOf,
    ops: &[Routed],
) -> Vec<Result<PspStatus, AdapterError>> {
    if ops.len() < 2 {
        return ops
            .iter()
            .map(|r| status_of(runtime, kind, r.via.as_deref(), &r.op))
            .collect();
    }
    let next = AtomicUsize::new(0);
    let answers: Vec<Mutex<Option<Result<PspStatus, AdapterError>>>> =
        ops.iter().map(|_| Mutex::new(None)).collect();
    // The caller's span (its request's), so the adapters' lines carry it.
    let span = tracing::Span::current();
    std::thread::scope(|scope| {
        for _ in 0..STATUS_FAN_OUT.min(ops.len()) {
            scope.spawn(|| {
                let _in_request = span.enter();
                // This thread's calls share an instance of the adapter.
                let mut session = runtime.adapter_session();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(Routed { via, op: p }) = ops.get(i) else {
                        break;
                    };
                    let via = via.as_deref();
                    if let Err(e) = paced(runtime, kind, via, p) {
                        *answers[i].lock() = Some(Err(e));
                        continue;
                    }
                    let started = Instant::now();
                    let target = (p.environment.as_str(), p.operator.as_str());
                    let (result, served_by) = session.call(target, via, |s, a| kind.call(s, a, p));
                    let answer = answered(
                        runtime,
                        (kind.operation(), &p.id),
                        target,
                        via,
                        started,
                        result,
                        served_by,
                    );
                    *answers[i].lock() = Some(answer);
                }
            });
        }
    });
    answers
        .into_iter()
        .map(|a| {
            a.into_inner()
                .unwrap_or_else(|| Err(AdapterError::Unavailable("no answer".into())))
        })
        .collect()
}

/// What the adapters serving an operator of `phone`'s country in
/// `environment` predict for it, each adapter asked once, until one tells.
/// A failing adapter is no prediction (the numbering plan stands).
pub(super) fn predicted(runtime: &Arc<Runtime>, environment: &str, phone: &str) -> Option<String> {
    let country = mmc_domain::phone::country_of(phone)?;
    let mut asked: Vec<String> = Vec::new();
    for op in runtime
        .catalogue(environment)
        .into_iter()
        .filter(|o| o.country == country.code())
    {
        let Some(adapter) = runtime.adapter_for(environment, &op.slug) else {
            continue;
        };
        if asked.contains(&adapter.name) {
            continue;
        }
        asked.push(adapter.name.clone());
        let answer = runtime.call_adapter(environment, &op.slug, |s, a| {
            a.mmc_adapter_operator().call_predict(s, phone)
        });
        let outcome = match &answer {
            Ok(Ok(Some(_))) => "ok",
            Ok(Ok(None)) => "none",
            _ => "failed",
        };
        runtime
            .services
            .metrics
            .adapter_call(&adapter.name, "predict", outcome);
        if let Ok(Ok(Some(slug))) = answer
            && mmc_domain::operators::find(&slug)
                .is_some_and(|o| o.slug == slug && o.country == country)
        {
            return Some(slug);
        }
    }
    None
}
