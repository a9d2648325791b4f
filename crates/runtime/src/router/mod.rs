//! The `router` import of API components: the operator operations, each
//! sent to the adapter of its route (`via`, else the operator's first
//! route), and the choice of a new operation's route (`mmc_routing`).
//!
//! Three pieces: this module is the WIT surface (and the route's one
//! answer: availability and the choice); [`dispatch`] sends a call to its
//! adapter (its own Store and deadline, a money movement's fence, status
//! queries paced and fanned out); [`observe`] records what the call
//! answered (metrics, audit trail, the route's health) and turns a failing
//! adapter into the `adapter-error` that says what it means for the money.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::bindings::adapter::Adapter;
use crate::bindings::adapter_types::*;
use crate::bindings::host::mmc::adapter::router::{
    AmountRange, FloatNeed, FloatShortfall, Host, RouteChoice, RouteRefusal, Routed,
};
use crate::state::{Calling, Fence, HostState};
use crate::{CallError, Loaded, Runtime};
use mmc_audit::AdapterCall;
use mmc_routing::{Ask, Observed, Refusal};

mod dispatch;
mod observe;

use self::dispatch::*;
use self::observe::*;

type Outcome<T> = wasmtime::Result<Result<T, AdapterError>>;

/// How long an operator's callback waits for a free adapter instance.
const CALLBACK_SLOT_WAIT: Duration = Duration::from_millis(500);

impl Calling<'_> {
    /// One status query, as an operator call.
    fn status_of(
        &mut self,
        kind: StatusOf,
        via: Option<&str>,
        op: &OperationRef,
    ) -> Result<PspStatus, AdapterError> {
        self.call_out(
            || Err(in_transaction()),
            |runtime| status_of(runtime, kind, via, op),
        )
    }

    /// Status queries asked at once, as operator calls.
    fn statuses(&mut self, kind: StatusOf, ops: &[Routed]) -> Vec<Result<PspStatus, AdapterError>> {
        self.call_out(
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
        Ok(self.call_out(
            || Err(in_transaction()),
            |runtime| routed(runtime, call, target, via, None, f),
        ))
    }
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

impl Host for Calling<'_> {
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
                at_ms: mmc_common::clock::system_now_ms(),
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
        Ok(self.call_out(|| None, |runtime| predicted(runtime, &environment, &phone)))
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
        Ok(self.call_out(
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
