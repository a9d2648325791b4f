//! The `router` import of API components: the operator operations, each
//! sent to the adapter of its route (`via`, else the operator's first
//! route), and the choice of a new operation's route (`crate::routing`). The
//! adapter runs in its own Store under its own deadline; its failures become
//! `adapter-error` values, and the outcomes of the calls that move money
//! feed the routes' health.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::audit::AdapterCall;
use crate::routing::{Ask, Observed, Refusal};
use crate::runtime::bindings::adapter::Adapter;
use crate::runtime::bindings::adapter_types::*;
use crate::runtime::bindings::host::mmc::adapter::router::{
    AmountRange, FloatNeed, FloatShortfall, Host, RouteChoice, RouteRefusal, Routed,
};
use crate::runtime::state::{Fence, HostState};
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
    fn status_of(
        &mut self,
        kind: StatusOf,
        via: Option<&str>,
        op: &OperationRef,
    ) -> Result<PspStatus, AdapterError> {
        self.operator_calls(
            || Err(in_transaction()),
            |runtime| status_of(runtime, kind, via, op),
        )
    }

    /// Status queries asked at once, as operator calls.
    fn statuses(&mut self, kind: StatusOf, ops: &[Routed]) -> Vec<Result<PspStatus, AdapterError>> {
        self.operator_calls(
            || ops.iter().map(|_| Err(in_transaction())).collect(),
            |runtime| statuses(runtime, kind, ops),
        )
    }

    fn with_adapter<T>(
        &mut self,
        call: (&str, &str),
        target: (&str, &str),
        via: Option<&str>,
        f: impl FnOnce(&mut wasmtime::Store<HostState>, &Adapter) -> Outcome<T>,
    ) -> Outcome<T> {
        Ok(self.operator_calls(
            || Err(in_transaction()),
            |runtime| routed(runtime, call, target, via, None, f),
        ))
    }
}

/// One attempt of a money movement, under its sending deadline (see
/// [`Fence`]). When the deadline stopped a request, the answer is `timeout`
/// whatever the adapter made of it: this attempt sends nothing more, and
/// what it or earlier ones sent is asked about by our id, never taken as
/// refused (nor as `busy`, which says nothing was sent at all).
fn fenced<T>(
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

/// DESIGN: an operator call (network, seconds) never runs inside a storage transaction.
fn in_transaction() -> AdapterError {
    AdapterError::Rejected(
        "operator calls are not allowed while a storage transaction is open".into(),
    )
}

/// One operator call through the adapter of its route (`via`, else the
/// operator's first route), recorded in the audit trail; a failing adapter
/// is an `adapter-error`.
fn routed<T>(
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
    let (result, served_by) = crate::runtime::inline::may_block(|| {
        runtime.call_adapter_waiting(target, via, slot_wait, f)
    });
    if let Some(l) = &served_by {
        span.record("adapter", l.name.as_str());
    }
    span.record("outcome", outcome_of(&result));
    answered(runtime, call, target, via, started, result, served_by)
}

/// A refusal as the component reads it (an unroutable one with its explanation).
fn refusal(refusal: Refusal, explanation: Option<serde_json::Value>) -> RouteRefusal {
    match refusal {
        Refusal::NotOffered => RouteRefusal::NotOffered,
        Refusal::Closed => RouteRefusal::Closed,
        Refusal::Mode => RouteRefusal::ModeNotSupported,
        Refusal::Amount { min, max, currency } => RouteRefusal::AmountOutOfRange(AmountRange {
            min_amount: min,
            max_amount: max,
            currency,
        }),
        Refusal::Unroutable => {
            RouteRefusal::Unroutable(explanation.map(|e| e.to_string()).unwrap_or_default())
        }
    }
}

/// The calls whose outcomes say whether a route can take new operations.
const MOVES_MONEY: [&str; 3] = ["initiate", "refund", "payout"];

/// What an operator call made through an adapter answered, counted in the
/// metrics and recorded in the audit trail; a failing adapter is an `adapter-error`.
fn answered<T>(
    runtime: &Arc<Runtime>,
    (operation, subject): (&str, &str),
    (environment, operator): (&str, &str),
    via: Option<&str>,
    started: Instant,
    result: Result<Result<T, AdapterError>, CallError>,
    served_by: Option<Arc<Loaded>>,
) -> Result<T, AdapterError> {
    let elapsed = started.elapsed();
    let outcome = outcome_of(&result);
    let adapter = served_by.as_ref().map_or("none", |l| l.name.as_str());
    runtime
        .services
        .metrics
        .adapter_call(adapter, operation, outcome);
    if let Some(moves) = MOVES_MONEY.iter().find(|m| **m == operation)
        && let Some(l) = &served_by
    {
        observe(runtime, (environment, &l.name, operator), outcome, elapsed);
        runtime.services.metrics.operator_request(
            (environment, operator, &l.name, moves),
            outcome,
            elapsed,
        );
    }
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
    adapter_result(result, operation, operator, via)
}

/// A call's outcome as the metrics and the audit trail name it.
fn outcome_of<T>(result: &Result<Result<T, AdapterError>, CallError>) -> &'static str {
    match result {
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
    }
}

/// What a call that moves money says of its route's health (none when the
/// cause was ours: no instance free, no adapter to call).
fn observe(
    runtime: &Arc<Runtime>,
    (environment, adapter, operator): (&str, &str, &str),
    outcome: &str,
    elapsed: std::time::Duration,
) {
    let observed = match outcome {
        "ok" => Observed::Answered,
        "busy" | "no_route" => return,
        _ => Observed::Failed,
    };
    let key = (environment.into(), adapter.into(), operator.into());
    let elapsed_ms = elapsed.as_secs_f64() * 1000.0;
    let now = crate::clock::system_now_ms();
    runtime.health.record(key, observed, elapsed_ms, now);
}

/// The adapter's answer as the component sees it: a failure of the call
/// itself becomes the `adapter-error` that says what it means for the money.
fn adapter_result<T>(
    result: Result<Result<T, AdapterError>, CallError>,
    operation: &str,
    operator: &str,
    via: Option<&str>,
) -> Result<T, AdapterError> {
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
        // The route an operation was sent through is not loaded now: only
        // a new operation may take that as "nothing done"; any other call
        // about it is asked again later.
        Err(CallError::NoRoute { .. }) if via.is_some() && !MOVES_MONEY.contains(&operation) => {
            Err(AdapterError::Unavailable(format!(
                "{} is not loaded now, or no longer serves {operator}",
                via.unwrap_or_default()
            )))
        }
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
fn paced(
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
fn statuses(
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

    fn route(
        &mut self,
        environment: String,
        operator: String,
        merchant: String,
        subject: String,
        operation: String,
        amount: u64,
        mode: Option<String>,
        skip: Vec<String>,
    ) -> wasmtime::Result<Result<RouteChoice, RouteRefusal>> {
        let ask = Ask {
            environment: &environment,
            operator: &operator,
            merchant: &merchant,
            operation: &operation,
            amount,
            mode: mode.as_deref(),
            skip: &skip,
        };
        let chosen = self.runtime.choose_route(&ask);
        let (adapter, reason) = match &chosen {
            Ok(c) => (c.adapter.as_str(), c.reason),
            Err(_) => ("none", "unroutable"),
        };
        let services = &self.runtime.services;
        services
            .metrics
            .route_chosen(&environment, &operator, adapter, reason);
        // The first route is the rule; any other choice is worth a line in
        // the operation's audit trail (the admin API's calls of a payment).
        if reason != "preferred" {
            services.audit.record(AdapterCall {
                subject_id: subject,
                environment: environment.clone(),
                operator: operator.clone(),
                adapter: Some(adapter.to_string()),
                version: None,
                operation: "route".into(),
                outcome: reason.into(),
                duration_ms: 0.0,
                at_ms: crate::clock::system_now_ms(),
            });
        }
        let expected_fee = |adapter: &str| {
            self.runtime
                .expected_fee(adapter, Some(&operator), &operation, amount)
        };
        Ok(chosen
            .map(|choice| RouteChoice {
                expected_fee: expected_fee(&choice.adapter),
                adapter: choice.adapter,
                explanation: choice.explanation.to_string(),
            })
            .map_err(|refused| refusal(refused.refusal, Some(refused.explanation))))
    }

    fn available(
        &mut self,
        environment: String,
        operator: String,
        amount: u64,
        mode: Option<String>,
    ) -> wasmtime::Result<Result<(), RouteRefusal>> {
        let ask = Ask {
            environment: &environment,
            operator: &operator,
            merchant: "",
            operation: "collection",
            amount,
            mode: mode.as_deref(),
            skip: &[],
        };
        Ok(self
            .runtime
            .route_available(&ask)
            .map_err(|r| refusal(r, None)))
    }

    fn initiate(
        &mut self,
        via: Option<String>,
        req: InitiateRequest,
        send_until_ms: u64,
    ) -> Outcome<Initiated> {
        let (env, op, id) = (
            req.environment.clone(),
            req.operator.clone(),
            req.payment_id.clone(),
        );
        self.with_adapter(("initiate", &id), (&env, &op), via.as_deref(), |s, a| {
            fenced(s, send_until_ms, |s| {
                a.mmc_adapter_operator().call_initiate(s, &req)
            })
        })
    }

    fn confirm_otp(
        &mut self,
        via: Option<String>,
        payment: OperationRef,
        otp: String,
    ) -> Outcome<OtpOutcome> {
        let (env, op, id) = (
            payment.environment.clone(),
            payment.operator.clone(),
            payment.id.clone(),
        );
        self.with_adapter(("confirm_otp", &id), (&env, &op), via.as_deref(), |s, a| {
            a.mmc_adapter_operator().call_confirm_otp(s, &payment, &otp)
        })
    }

    fn status(&mut self, via: Option<String>, payment: OperationRef) -> Outcome<PspStatus> {
        Ok(self.status_of(StatusOf::Payment, via.as_deref(), &payment))
    }

    fn status_many(
        &mut self,
        payments: Vec<Routed>,
    ) -> wasmtime::Result<Vec<Result<PspStatus, AdapterError>>> {
        Ok(self.statuses(StatusOf::Payment, &payments))
    }

    fn cancel(&mut self, via: Option<String>, payment: OperationRef) -> Outcome<PspStatus> {
        let (env, op, id) = (
            payment.environment.clone(),
            payment.operator.clone(),
            payment.id.clone(),
        );
        self.with_adapter(("cancel", &id), (&env, &op), via.as_deref(), |s, a| {
            a.mmc_adapter_operator().call_cancel(s, &payment)
        })
    }

    fn refund(
        &mut self,
        via: Option<String>,
        req: RefundRequest,
        send_until_ms: u64,
    ) -> Outcome<Started> {
        let (env, op, id) = (
            req.payment.environment.clone(),
            req.payment.operator.clone(),
            req.payment.id.clone(),
        );
        self.with_adapter(("refund", &id), (&env, &op), via.as_deref(), |s, a| {
            fenced(s, send_until_ms, |s| {
                a.mmc_adapter_operator().call_refund(s, &req)
            })
        })
    }

    fn refund_status(&mut self, via: Option<String>, refund: OperationRef) -> Outcome<PspStatus> {
        Ok(self.status_of(StatusOf::Refund, via.as_deref(), &refund))
    }

    fn refund_status_many(
        &mut self,
        refunds: Vec<Routed>,
    ) -> wasmtime::Result<Vec<Result<PspStatus, AdapterError>>> {
        Ok(self.statuses(StatusOf::Refund, &refunds))
    }

    fn payout(
        &mut self,
        via: Option<String>,
        req: PayoutRequest,
        send_until_ms: u64,
    ) -> Outcome<Started> {
        let (env, op, id) = (
            req.environment.clone(),
            req.operator.clone(),
            req.payout_id.clone(),
        );
        self.with_adapter(("payout", &id), (&env, &op), via.as_deref(), |s, a| {
            fenced(s, send_until_ms, |s| {
                a.mmc_adapter_operator().call_payout(s, &req)
            })
        })
    }

    fn payout_status(&mut self, via: Option<String>, payout: OperationRef) -> Outcome<PspStatus> {
        Ok(self.status_of(StatusOf::Payout, via.as_deref(), &payout))
    }

    fn payout_status_many(
        &mut self,
        payouts: Vec<Routed>,
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

    fn float_short(
        &mut self,
        environment: String,
        needs: Vec<FloatNeed>,
    ) -> wasmtime::Result<Vec<FloatShortfall>> {
        let needs: Vec<(String, String, u64)> = needs
            .into_iter()
            .map(|n| (n.operator, n.currency, n.amount))
            .collect();
        Ok(self
            .runtime
            .float_short(&environment, &needs)
            .into_iter()
            .map(|(adapter, w, needed)| FloatShortfall {
                adapter,
                wallet: w.name,
                currency: w.currency,
                available: w.available,
                needed,
            })
            .collect())
    }

    fn parse_callback(
        &mut self,
        via: Option<String>,
        req: Inbound,
    ) -> Outcome<Vec<CallbackUpdate>> {
        let (env, op) = (req.environment.clone(), req.operator.clone());
        // An operator waits seconds for our answer (MTN: 2 s), then retries: with
        // every instance busy, answer "busy" soon (503) rather than wait a payment's time.
        Ok(self.operator_calls(
            || Err(in_transaction()),
            |runtime| {
                routed(
                    runtime,
                    ("parse_callback", "callback"),
                    (&env, &op),
                    via.as_deref(),
                    Some(CALLBACK_SLOT_WAIT),
                    |s, a| a.mmc_adapter_operator().call_parse_callback(s, &req),
                )
            },
        ))
    }
}
