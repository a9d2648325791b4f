//! The `payments` import of facade components (legacy): served by the
//! `collect` component's `payments` export in its own Store, so the rules
//! are written once. Failures of collect become a 500 `failure` value.

use std::sync::Arc;
use std::time::Instant;

use crate::Runtime;
use crate::bindings::collect::Collect;
use crate::bindings::facade::mmc::api::payments::Host;
use crate::bindings::http_types::Caller;
use crate::bindings::payment_types::{CreateRequest, Created, Failure, Payment};
use crate::state::{Deadline, HostState};

type Outcome<T> = wasmtime::Result<Result<T, Failure>>;

/// What the facade's `payments` sees of a call: the runtime (which calls
/// `collect`), whether a storage transaction is open, and the call's deadline.
pub(crate) struct View<'a> {
    runtime: &'a Arc<Runtime>,
    open_txn: bool,
    deadline: &'a mut Deadline,
}

/// The marker the runtime links `payments` (and its types) with.
pub(crate) type Cap = View<'static>;

impl wasmtime::component::HasData for Cap {
    type Data<'a> = View<'a>;
}

pub(crate) fn view(s: &mut HostState) -> View<'_> {
    View {
        runtime: &s.runtime,
        open_txn: s.open_txn,
        deadline: &mut s.deadline,
    }
}

impl View<'_> {
    fn with_payments<T>(
        &mut self,
        f: impl FnOnce(
            &mut wasmtime::Store<HostState>,
            &Collect,
        ) -> wasmtime::Result<Result<T, Failure>>,
    ) -> Outcome<T> {
        if self.open_txn {
            return Ok(Err(Failure {
                status: 500,
                code: "internal_error".into(),
                message: "payments calls are not allowed while a storage transaction is open"
                    .into(),
                param: None,
            }));
        }
        let started = Instant::now();
        let result = self.runtime.call_collect(f);
        // Collect has its own deadline: the facade is not charged for it.
        self.deadline.extend(started.elapsed());
        Ok(result.unwrap_or_else(|e| {
            Err(Failure {
                status: 500,
                code: "internal_error".into(),
                message: e.to_string(),
                param: None,
            })
        }))
    }
}

impl crate::bindings::facade::mmc::api::payment_types::Host for View<'_> {}
impl crate::bindings::surface::mmc::api::http_types::Host for View<'_> {}

impl Host for View<'_> {
    fn create(&mut self, caller: Caller, req: CreateRequest) -> Outcome<Created> {
        self.with_payments(|s, c| c.mmc_api_payments().call_create(s, &caller, &req))
    }

    fn get(&mut self, caller: Caller, reference_or_id: String, sync: bool) -> Outcome<Payment> {
        self.with_payments(|s, c| {
            c.mmc_api_payments()
                .call_get(s, &caller, &reference_or_id, sync)
        })
    }

    fn confirm(
        &mut self,
        caller: Caller,
        reference_or_id: String,
        otp: String,
    ) -> Outcome<Payment> {
        self.with_payments(|s, c| {
            c.mmc_api_payments()
                .call_confirm(s, &caller, &reference_or_id, &otp)
        })
    }
}
