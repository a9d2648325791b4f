//! What an operator call answered: counted in the metrics, recorded in
//! the audit trail, observed for its route's health, and a failing adapter
//! turned into the `adapter-error` that says what it means for the money.

use super::*;

/// The calls whose outcomes say whether a route can take new operations.
pub(super) const MOVES_MONEY: [&str; 3] = ["initiate", "refund", "payout"];

/// What an operator call made through an adapter answered, counted in the
/// metrics and recorded in the audit trail; a failing adapter is an `adapter-error`.
pub(super) fn answered<T>(
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
        at_ms: mmc_common::clock::system_now_ms(),
    });
    adapter_result(result, operation, operator, via)
}

/// A call's outcome as the metrics and the audit trail name it.
pub(super) fn outcome_of<T>(result: &Result<Result<T, AdapterError>, CallError>) -> &'static str {
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
pub(super) fn observe(
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
    let now = mmc_common::clock::system_now_ms();
    runtime.health.record(key, observed, elapsed_ms, now);
}

/// The adapter's answer as the component sees it: a failure of the call
/// itself becomes the `adapter-error` that says what it means for the money.
pub(super) fn adapter_result<T>(
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
