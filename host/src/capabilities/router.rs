//! The `router` import of API components: the operator operations, routed to
//! the adapter serving (environment, operator). The adapter runs in its own
//! Store under its own deadline; its failures become `adapter-error` values.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::audit::AdapterCall;
use crate::runtime::bindings::adapter::Adapter;
use crate::runtime::bindings::adapter_types::*;
use crate::runtime::bindings::host::mmc::adapter::router::Host;
use crate::runtime::state::HostState;
use crate::runtime::{CallError, Loaded, Runtime};

type Outcome<T> = wasmtime::Result<Result<T, AdapterError>>;

/// How long an operator's callback waits for a free adapter instance.
const CALLBACK_SLOT_WAIT: Duration = Duration::from_millis(500);

/// At most this many operator calls of one `status-many` run at once.
const STATUS_FAN_OUT: usize = 16;

impl HostState {
    /// Operator calls made for this component call: refused while a storage
    /// transaction is open, and the time they take is not charged to this
    /// call's deadline (each adapter call has its own).
    fn operator_calls<T>(
        &mut self,
        refused: impl FnOnce() -> T,
        calls: impl FnOnce(&Arc<Runtime>) -> T,
    ) -> T {
        if self.open_txn {
            return refused();
        }
        let started = Instant::now();
        let out = calls(&self.runtime);
        self.deadline.extend(started.elapsed());
        out
    }

    /// One status query, as an operator call.
    fn status_of(&mut self, kind: StatusOf, op: &OperationRef) -> Result<PspStatus, AdapterError> {
        self.operator_calls(
            || Err(in_transaction()),
            |runtime| status_of(runtime, kind, op),
        )
    }

    /// Status queries asked at once, as operator calls.
    fn statuses(
        &mut self,
        kind: StatusOf,
        ops: &[OperationRef],
    ) -> Vec<Result<PspStatus, AdapterError>> {
        self.operator_calls(
            || ops.iter().map(|_| Err(in_transaction())).collect(),
            |runtime| statuses(runtime, kind, ops),
        )
    }

    fn with_adapter<T>(
        &mut self,
        call: (&str, &str),
        environment: &str,
        operator: &str,
        f: impl FnOnce(&mut wasmtime::Store<HostState>, &Adapter) -> Outcome<T>,
    ) -> Outcome<T> {
        Ok(self.operator_calls(
            || Err(in_transaction()),
            |runtime| routed(runtime, call, environment, operator, None, f),
        ))
    }
}

/// DESIGN: an operator call (network, seconds) never runs inside a storage transaction.
fn in_transaction() -> AdapterError {
    AdapterError::Rejected(
        "operator calls are not allowed while a storage transaction is open".into(),
    )
}

/// One operator call through the adapter serving (environment, operator),
/// recorded in the audit trail; a failing adapter is an `adapter-error`.
fn routed<T>(
    runtime: &Arc<Runtime>,
    (operation, subject): (&str, &str),
    environment: &str,
    operator: &str,
    slot_wait: Option<Duration>,
    f: impl FnOnce(&mut wasmtime::Store<HostState>, &Adapter) -> Outcome<T>,
) -> Result<T, AdapterError> {
    let started = Instant::now();
    // An operator call may wait on the network for seconds: never on a tokio worker.
    let (result, served_by) = crate::runtime::inline::may_block(|| {
        runtime.call_adapter_waiting(environment, operator, slot_wait, f)
    });
    answered(
        runtime,
        (operation, subject),
        (environment, operator),
        started,
        result,
        served_by,
    )
}

/// What an operator call made through an adapter answered, counted in the
/// metrics and recorded in the audit trail; a failing adapter is an `adapter-error`.
fn answered<T>(
    runtime: &Arc<Runtime>,
    (operation, subject): (&str, &str),
    (environment, operator): (&str, &str),
    started: Instant,
    result: Result<Result<T, AdapterError>, CallError>,
    served_by: Option<Arc<Loaded>>,
) -> Result<T, AdapterError> {
    let elapsed = started.elapsed();
    let outcome = match &result {
        Ok(Ok(_)) => "ok",
        Ok(Err(e)) => match e {
            AdapterError::Timeout(_) => "timeout",
            AdapterError::Unavailable(_) => "unavailable",
            AdapterError::InvalidResponse(_) => "invalid_response",
            AdapterError::Rejected(_) => "rejected",
            AdapterError::NotSent(_) => "not_sent",
            AdapterError::NotSupported(_) => "not_supported",
            AdapterError::Unauthenticated(_) => "unauthenticated",
            AdapterError::Busy(_) => "busy",
        },
        Err(CallError::Deadline(_)) => "deadline",
        Err(CallError::Memory(_)) => "memory",
        Err(CallError::Trap { .. }) => "trap",
        Err(CallError::Busy(_)) => "busy",
        Err(_) => "no_route",
    };
    let adapter = served_by.as_ref().map_or("none", |l| l.name.as_str());
    runtime
        .services
        .metrics
        .adapter_call(adapter, operation, outcome);
    // Refused because of us, or never sent: a configuration or capacity problem
    // someone must look at (the payment itself is safe: nothing was performed).
    if let (Ok(Err(e)), "rejected" | "not_sent") = (&result, outcome) {
        tracing::error!(adapter, operator, operation, error = ?e, "operator call refused");
    }
    runtime.services.audit.record(AdapterCall {
        subject_id: subject.to_string(),
        environment: environment.to_string(),
        operator: operator.to_string(),
        adapter: served_by.as_ref().map(|l| l.name.clone()),
        version: served_by.as_ref().map(|l| l.hash.clone()),
        operation: operation.to_string(),
        outcome: outcome.to_string(),
        duration_ms: elapsed.as_secs_f64() * 1000.0,
        at_ms: crate::clock::system_now_ms(),
    });
    match result {
        // `busy` means "nothing was sent": only the host knows that. An
        // adapter saying it may have sent anything: unknown.
        Ok(Err(AdapterError::Busy(m))) => Err(AdapterError::Unavailable(format!(
            "the adapter answered busy, which only the host may say: {m}"
        ))),
        Ok(inner) => inner,
        // The outcome at the operator is unknown: the caller leaves the payment for reconciliation.
        Err(CallError::Deadline(c)) => Err(AdapterError::Timeout(format!(
            "adapter {c} exceeded its deadline"
        ))),
        Err(e @ CallError::NoRoute { .. }) => Err(AdapterError::NotSupported(e.to_string())),
        // No instance was free within the deadline: the adapter never ran.
        Err(e @ CallError::Busy(_)) => Err(AdapterError::Busy(e.to_string())),
        Err(e) => Err(AdapterError::Unavailable(e.to_string())),
    }
}

/// The status queries asked many at a time: of a payment, a refund, a payout.
#[derive(Clone, Copy)]
enum StatusOf {
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
fn paced(runtime: &Arc<Runtime>, kind: StatusOf, op: &OperationRef) -> Result<(), AdapterError> {
    let Some(adapter) = runtime.adapter_for(&op.environment, &op.operator) else {
        return Ok(()); // no route: the call itself says so
    };
    let per_second = adapter
        .operators
        .iter()
        .find(|o| o.slug == op.operator)
        .map_or(0, |o| o.status_per_second);
    // Waiting for a turn blocks this thread: never a tokio worker's core
    // (the adapters' own HTTP runs there).
    let turn = crate::runtime::inline::may_block(|| {
        runtime
            .status_pacer
            .take(&adapter.name, per_second, crate::runtime::pacing::MAX_WAIT)
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

fn status_of(
    runtime: &Arc<Runtime>,
    kind: StatusOf,
    op: &OperationRef,
) -> Result<PspStatus, AdapterError> {
    paced(runtime, kind, op)?;
    routed(
        runtime,
        (kind.operation(), &op.id),
        &op.environment,
        &op.operator,
        None,
        |s, a| kind.call(s, a, op),
    )
}

/// The `kind` status of each of `ops`, at most [`STATUS_FAN_OUT`] at once, in
/// the order given. Each call has its own adapter deadline.
fn statuses(
    runtime: &Arc<Runtime>,
    kind: StatusOf,
    ops: &[OperationRef],
) -> Vec<Result<PspStatus, AdapterError>> {
    if ops.len() < 2 {
        return ops.iter().map(|p| status_of(runtime, kind, p)).collect();
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
                    let Some(p) = ops.get(i) else { break };
                    if let Err(e) = paced(runtime, kind, p) {
                        *answers[i].lock() = Some(Err(e));
                        continue;
                    }
                    let started = Instant::now();
                    let (result, served_by) =
                        session.call(&p.environment, &p.operator, |s, a| kind.call(s, a, p));
                    let answer = answered(
                        runtime,
                        (kind.operation(), &p.id),
                        (&p.environment, &p.operator),
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
fn predicted(runtime: &Arc<Runtime>, environment: &str, phone: &str) -> Option<String> {
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

impl Host for HostState {
    fn catalogue(&mut self, environment: String) -> wasmtime::Result<Vec<OperatorInfo>> {
        Ok(self.runtime.catalogue(&environment))
    }

    fn operator(
        &mut self,
        environment: String,
        slug: String,
    ) -> wasmtime::Result<Option<OperatorInfo>> {
        Ok(self.runtime.operator_info(&environment, &slug))
    }

    fn initiate(&mut self, req: InitiateRequest) -> Outcome<Initiated> {
        let (env, op, id) = (
            req.environment.clone(),
            req.operator.clone(),
            req.payment_id.clone(),
        );
        self.with_adapter(("initiate", &id), &env, &op, |s, a| {
            a.mmc_adapter_operator().call_initiate(s, &req)
        })
    }

    fn confirm_otp(&mut self, payment: OperationRef, otp: String) -> Outcome<OtpOutcome> {
        let (env, op, id) = (
            payment.environment.clone(),
            payment.operator.clone(),
            payment.id.clone(),
        );
        self.with_adapter(("confirm_otp", &id), &env, &op, |s, a| {
            a.mmc_adapter_operator().call_confirm_otp(s, &payment, &otp)
        })
    }

    fn status(&mut self, payment: OperationRef) -> Outcome<PspStatus> {
        Ok(self.status_of(StatusOf::Payment, &payment))
    }

    fn status_many(
        &mut self,
        payments: Vec<OperationRef>,
    ) -> wasmtime::Result<Vec<Result<PspStatus, AdapterError>>> {
        Ok(self.statuses(StatusOf::Payment, &payments))
    }

    fn cancel(&mut self, payment: OperationRef) -> Outcome<PspStatus> {
        let (env, op, id) = (
            payment.environment.clone(),
            payment.operator.clone(),
            payment.id.clone(),
        );
        self.with_adapter(("cancel", &id), &env, &op, |s, a| {
            a.mmc_adapter_operator().call_cancel(s, &payment)
        })
    }

    fn refund(&mut self, req: RefundRequest) -> Outcome<Started> {
        let (env, op, id) = (
            req.payment.environment.clone(),
            req.payment.operator.clone(),
            req.payment.id.clone(),
        );
        self.with_adapter(("refund", &id), &env, &op, |s, a| {
            a.mmc_adapter_operator().call_refund(s, &req)
        })
    }

    fn refund_status(&mut self, refund: OperationRef) -> Outcome<PspStatus> {
        Ok(self.status_of(StatusOf::Refund, &refund))
    }

    fn refund_status_many(
        &mut self,
        refunds: Vec<OperationRef>,
    ) -> wasmtime::Result<Vec<Result<PspStatus, AdapterError>>> {
        Ok(self.statuses(StatusOf::Refund, &refunds))
    }

    fn payout(&mut self, req: PayoutRequest) -> Outcome<Started> {
        let (env, op, id) = (
            req.environment.clone(),
            req.operator.clone(),
            req.payout_id.clone(),
        );
        self.with_adapter(("payout", &id), &env, &op, |s, a| {
            a.mmc_adapter_operator().call_payout(s, &req)
        })
    }

    fn payout_status(&mut self, payout: OperationRef) -> Outcome<PspStatus> {
        Ok(self.status_of(StatusOf::Payout, &payout))
    }

    fn payout_status_many(
        &mut self,
        payouts: Vec<OperationRef>,
    ) -> wasmtime::Result<Vec<Result<PspStatus, AdapterError>>> {
        Ok(self.statuses(StatusOf::Payout, &payouts))
    }

    fn predict(&mut self, environment: String, phone: String) -> wasmtime::Result<Option<String>> {
        Ok(self.operator_calls(|| None, |runtime| predicted(runtime, &environment, &phone)))
    }

    fn served_by(
        &mut self,
        environment: String,
        operator: String,
    ) -> wasmtime::Result<Option<String>> {
        Ok(self
            .runtime
            .adapter_for(&environment, &operator)
            .map(|l| l.name.clone()))
    }

    fn parse_callback(&mut self, req: Inbound) -> Outcome<Vec<CallbackUpdate>> {
        let (env, op) = (req.environment.clone(), req.operator.clone());
        // An operator waits seconds for our answer (MTN: 2 s), then retries: with
        // every instance busy, answer "busy" soon (503) rather than wait a payment's time.
        Ok(self.operator_calls(
            || Err(in_transaction()),
            |runtime| {
                routed(
                    runtime,
                    ("parse_callback", "callback"),
                    &env,
                    &op,
                    Some(CALLBACK_SLOT_WAIT),
                    |s, a| a.mmc_adapter_operator().call_parse_callback(s, &req),
                )
            },
        ))
    }
}
