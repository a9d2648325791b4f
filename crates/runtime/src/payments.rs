//! The `payments` import of facade components (legacy): served by the
//! `collect` component's `payments` export in its own Store, so the rules
//! are written once. Failures of collect become a 500 `failure` value.

use crate::bindings::collect::Collect;
use crate::bindings::facade::mmc::api::payments::Host;
use crate::bindings::http_types::Caller;
use crate::bindings::payment_types::{CreateRequest, Created, Failure, Payment};
use crate::state::{Calling, HostState};

type Outcome<T> = wasmtime::Result<Result<T, Failure>>;

impl Calling<'_> {
    fn with_payments<T>(
        &mut self,
        f: impl FnOnce(
            &mut wasmtime::Store<HostState>,
            &Collect,
        ) -> wasmtime::Result<Result<T, Failure>>,
    ) -> Outcome<T> {
        let failure = |message: String| Failure {
            status: 500,
            code: "internal_error".into(),
            message,
            param: None,
        };
        Ok(self.call_out(
            || {
                Err(failure(
                    "payments calls are not allowed while a storage transaction is open".into(),
                ))
            },
            // Failures of collect (not loaded, trapped) are the facade's 500.
            |runtime| {
                runtime
                    .call_collect(f)
                    .unwrap_or_else(|e| Err(failure(e.to_string())))
            },
        ))
    }
}

impl crate::bindings::facade::mmc::api::payment_types::Host for Calling<'_> {}
impl crate::bindings::surface::mmc::api::http_types::Host for Calling<'_> {}

impl Host for Calling<'_> {
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
