//! The `router` import of API components: the operator operations, routed to
//! the adapter serving (environment, operator). The adapter runs in its own
//! Store under its own deadline; its failures become `adapter-error` values.

use std::time::Instant;

use crate::admin::audit::AdapterCall;
use crate::runtime::CallError;
use crate::runtime::bindings::adapter::Adapter;
use crate::runtime::bindings::adapter_types::*;
use crate::runtime::bindings::host::mmc::adapter::router::Host;
use crate::runtime::state::HostState;

type Outcome<T> = wasmtime::Result<Result<T, AdapterError>>;

impl HostState {
    fn with_adapter<T>(
        &mut self,
        (operation, subject): (&str, &str),
        environment: &str,
        operator: &str,
        f: impl FnOnce(
            &mut wasmtime::Store<HostState>,
            &Adapter,
        ) -> wasmtime::Result<Result<T, AdapterError>>,
    ) -> Outcome<T> {
        if self.open_txn {
            // DESIGN: an operator call (network, seconds) never runs inside a storage transaction.
            return Ok(Err(AdapterError::Rejected(
                "operator calls are not allowed while a storage transaction is open".into(),
            )));
        }
        let started = Instant::now();
        let (result, served_by) = self.runtime.call_adapter_traced(environment, operator, f);
        let elapsed = started.elapsed();
        self.deadline.extend(elapsed);
        let outcome = match &result {
            Ok(Ok(_)) => "ok",
            Ok(Err(e)) => match e {
                AdapterError::Timeout(_) => "timeout",
                AdapterError::Unavailable(_) => "unavailable",
                AdapterError::InvalidResponse(_) => "invalid_response",
                AdapterError::Rejected(_) => "rejected",
                AdapterError::NotSupported(_) => "not_supported",
                AdapterError::Unauthenticated(_) => "unauthenticated",
            },
            Err(CallError::Deadline(_)) => "deadline",
            Err(CallError::Memory(_)) => "memory",
            Err(CallError::Trap { .. }) => "trap",
            Err(CallError::Busy(_)) => "busy",
            Err(_) => "no_route",
        };
        self.runtime.services.audit.record(AdapterCall {
            subject_id: subject.to_string(),
            environment: environment.to_string(),
            operator: operator.to_string(),
            adapter: served_by.as_ref().map(|l| l.name.clone()),
            version: served_by.as_ref().map(|l| l.hash.clone()),
            operation: operation.to_string(),
            outcome: outcome.to_string(),
            duration_ms: elapsed.as_secs_f64() * 1000.0,
            at_ms: crate::capabilities::clock::system_now_ms(),
        });
        Ok(match result {
            Ok(inner) => inner,
            // The outcome at the operator is unknown: the caller leaves the payment for reconciliation.
            Err(CallError::Deadline(c)) => Err(AdapterError::Timeout(format!(
                "adapter {c} exceeded its deadline"
            ))),
            Err(e @ CallError::NoRoute { .. }) => Err(AdapterError::NotSupported(e.to_string())),
            Err(e) => Err(AdapterError::Unavailable(e.to_string())),
        })
    }
}

impl Host for HostState {
    fn catalogue(&mut self, environment: String) -> wasmtime::Result<Vec<OperatorInfo>> {
        Ok(self.runtime.catalogue(&environment))
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
        let (env, op, id) = (
            payment.environment.clone(),
            payment.operator.clone(),
            payment.id.clone(),
        );
        self.with_adapter(("status", &id), &env, &op, |s, a| {
            a.mmc_adapter_operator().call_status(s, &payment)
        })
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
        let (env, op, id) = (
            refund.environment.clone(),
            refund.operator.clone(),
            refund.id.clone(),
        );
        self.with_adapter(("refund_status", &id), &env, &op, |s, a| {
            a.mmc_adapter_operator().call_refund_status(s, &refund)
        })
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
        let (env, op, id) = (
            payout.environment.clone(),
            payout.operator.clone(),
            payout.id.clone(),
        );
        self.with_adapter(("payout_status", &id), &env, &op, |s, a| {
            a.mmc_adapter_operator().call_payout_status(s, &payout)
        })
    }

    fn parse_callback(&mut self, req: Inbound) -> Outcome<Vec<CallbackUpdate>> {
        let (env, op) = (req.environment.clone(), req.operator.clone());
        self.with_adapter(("parse_callback", "callback"), &env, &op, |s, a| {
            a.mmc_adapter_operator().call_parse_callback(s, &req)
        })
    }
}
