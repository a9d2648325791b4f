//! The shell every operator adapter shares, written once so that an adapter
//! keeps only what is particular to its provider (its wire types and their
//! mapping):
//!
//! - [`bindings`]: the adapter world with the provider's books
//!   (`mmc:adapter/bookkeeping-adapter`), generated here once; an adapter
//!   exports itself with [`export!`](crate::export).
//! - [`settings`]: settings and secrets, `<key>.<slug>` over `<key>`.
//! - [`spec`]: which operators are served and how they are described.
//! - [`exchange`]: the outbound exchange and the one rule that decides what
//!   its ending says about the money (known, unknown, refused, not sent).
//! - [`reasons`]: a provider's failure codes, declared as a table.
//! - [`lookup`]: an operation found by the provider's reference, else by our id.
//! - [`webhook`]: HMAC-signed notifications checked against a time window.
//! - [`token`]: tokens and provider answers kept in the host's cache.
//! - [`wire`]: wire conventions (phone numbers, free text, loose JSON fields,
//!   what a success must say).
//! - [`Adapter`]: the operations, with the ones a provider lacks answered
//!   `not-supported` by default.

pub mod bindings {
    wit_bindgen::generate!({
        path: ["../../wit/platform", "../../wit/adapter"],
        world: "mmc:adapter/bookkeeping-adapter",
        generate_all,
        pub_export_macro: true,
        default_bindings_module: "mmc_adapter_kit::bindings",
        additional_derives: [PartialEq, Eq],
    });
}

pub mod exchange;
pub mod lookup;
pub mod reasons;
pub mod settings;
pub mod spec;
pub mod token;
pub mod webhook;
pub mod wire;

pub use bindings::exports::mmc::adapter::books;
pub use bindings::mmc::adapter::types;
pub use bindings::mmc::platform::{cache, clock, config, log, outbound_http, signing};
pub use mmc_domain;

use bindings::exports::mmc::adapter::operator::Guest;
use books::{Balance, BooksInfo, StatementPage};
use spec::Spec;
use types::*;

/// Exports an [`Adapter`] as the component's `operator` interface:
/// `mmc_adapter_kit::export!(MyAdapter);`. Only a Wasm build has the
/// exports: a native build (the adapter's tests, as an `rlib`) links without
/// them, since their names (`mmc:adapter/operator…`) are not native symbols.
#[macro_export]
macro_rules! export {
    ($adapter:ident) => {
        #[cfg(target_arch = "wasm32")]
        $crate::bindings::export!($adapter);
    };
}

/// A failure with its machine-readable code and its message for people.
pub fn failure(code: &str, message: &str) -> Failure {
    Failure {
        code: code.into(),
        message: message.into(),
    }
}

/// An operation the provider took: its reference there and where it stands.
pub fn started(psp_reference: String, status: PspStatus) -> Started {
    Started {
        psp_reference,
        status,
    }
}

/// A payment the customer completes on the provider's page at `url`.
pub fn redirect(psp_reference: String, url: String) -> Initiated {
    Initiated::Redirect(Redirect { psp_reference, url })
}

/// A request to pay that names no phone number, refused before anything is
/// sent (`<who> needs the customer's phone number.`).
pub fn phone_required(who: &str) -> Initiated {
    let message = format!("{who} needs the customer's phone number.");
    Initiated::Refused(failure("phone_required", &message))
}

/// The adapter contract, with what most providers share filled in: an
/// adapter implements the operations its provider has and exports itself
/// with `mmc_adapter_kit::export!(MyAdapter)`.
pub trait Adapter {
    /// The operators this adapter can serve and how it describes them.
    const SPEC: &'static Spec;

    /// The served operators as [`Spec::describe`] says; a provider that
    /// publishes its own limits or availability adjusts them.
    fn describe() -> Vec<OperatorInfo> {
        Self::SPEC.describe()
    }

    /// Why a one-time code is refused, after the provider's name (how its
    /// payments are approved instead).
    const NO_OTP: &'static str = "takes no one-time code";

    /// Why refunds are refused, after the provider's name (where to refund instead).
    const NO_REFUNDS: &'static str = "offers no refunds";

    fn initiate(req: InitiateRequest) -> Result<Initiated, AdapterError>;

    fn confirm_otp(_payment: OperationRef, _otp: String) -> Result<OtpOutcome, AdapterError> {
        Err(unsupported::<Self>(Self::NO_OTP))
    }

    fn status(payment: OperationRef) -> Result<PspStatus, AdapterError>;

    /// A provider that cannot withdraw a payment reports where it stands:
    /// pending means the customer could still approve it.
    fn cancel(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        Self::status(payment)
    }

    fn refund(_req: RefundRequest) -> Result<Started, AdapterError> {
        Err(unsupported::<Self>(Self::NO_REFUNDS))
    }

    fn refund_status(_refund: OperationRef) -> Result<PspStatus, AdapterError> {
        Err(unsupported::<Self>(Self::NO_REFUNDS))
    }

    fn payout(_req: PayoutRequest) -> Result<Started, AdapterError> {
        Err(unsupported::<Self>("offers no payouts"))
    }

    fn payout_status(_payout: OperationRef) -> Result<PspStatus, AdapterError> {
        Err(unsupported::<Self>("offers no payouts"))
    }

    fn parse_callback(req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError>;

    /// Most providers offer no prediction.
    fn predict(_phone: String) -> Result<Option<String>, AdapterError> {
        Ok(None)
    }

    /// What reading the provider's books takes. By default it publishes no
    /// statement: the service reads each operation by status instead.
    fn books_info() -> BooksInfo {
        BooksInfo {
            statement: false,
            final_after_ms: 0,
            max_period_ms: 0,
        }
    }

    fn balances() -> Result<Vec<Balance>, AdapterError> {
        Err(unsupported::<Self>("publishes no balance"))
    }

    fn statement(
        _from_ms: u64,
        _to_ms: u64,
        _cursor: Option<String>,
    ) -> Result<StatementPage, AdapterError> {
        Err(unsupported::<Self>("publishes no statement"))
    }
}

/// `not-supported`: nothing was sent, so nothing was performed.
fn unsupported<A: Adapter + ?Sized>(what: &str) -> AdapterError {
    AdapterError::NotSupported(format!("{} {what}", A::SPEC.provider))
}

impl<A: Adapter> Guest for A {
    fn describe() -> Vec<OperatorInfo> {
        <A as Adapter>::describe()
    }
    fn initiate(req: InitiateRequest) -> Result<Initiated, AdapterError> {
        <A as Adapter>::initiate(req)
    }
    fn confirm_otp(payment: OperationRef, otp: String) -> Result<OtpOutcome, AdapterError> {
        <A as Adapter>::confirm_otp(payment, otp)
    }
    fn status(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        <A as Adapter>::status(payment)
    }
    fn cancel(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        <A as Adapter>::cancel(payment)
    }
    fn refund(req: RefundRequest) -> Result<Started, AdapterError> {
        <A as Adapter>::refund(req)
    }
    fn refund_status(refund: OperationRef) -> Result<PspStatus, AdapterError> {
        <A as Adapter>::refund_status(refund)
    }
    fn payout(req: PayoutRequest) -> Result<Started, AdapterError> {
        <A as Adapter>::payout(req)
    }
    fn payout_status(payout: OperationRef) -> Result<PspStatus, AdapterError> {
        <A as Adapter>::payout_status(payout)
    }
    fn parse_callback(req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        <A as Adapter>::parse_callback(req)
    }
    fn predict(phone: String) -> Result<Option<String>, AdapterError> {
        <A as Adapter>::predict(phone)
    }
}

impl<A: Adapter> books::Guest for A {
    fn info() -> BooksInfo {
        <A as Adapter>::books_info()
    }
    fn balances() -> Result<Vec<Balance>, AdapterError> {
        <A as Adapter>::balances()
    }
    fn statement(
        from_ms: u64,
        to_ms: u64,
        cursor: Option<String>,
    ) -> Result<StatementPage, AdapterError> {
        <A as Adapter>::statement(from_ms, to_ms, cursor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payment_without_a_phone_number_is_refused() {
        assert_eq!(
            phone_required("Test"),
            Initiated::Refused(failure(
                "phone_required",
                "Test needs the customer's phone number."
            ))
        );
    }
}
