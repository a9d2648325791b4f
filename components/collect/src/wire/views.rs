//! The JSON shapes of a payment: the Payment object with its NextAction, the
//! legacy Collection view, and the operator catalogue.

use mmc_domain::operators::Country;
use mmc_domain::{Status, time};
use serde::Serialize;
use serde_json::{Value, json};

use crate::API_VERSION;
use crate::mmc::adapter::types::OperatorInfo;
use crate::store::{Customer, Failure, Payment};

/// The legacy Collection view of a payment (shape shared with the legacy facade).
pub fn legacy_collection(p: &Payment, replay: bool) -> Value {
    mmc_domain::legacy::collection_json(
        &mmc_domain::legacy::Collection {
            id: &p.id,
            reference: &p.reference,
            status: p.status.as_str(),
            amount: p.amount,
            currency: &p.currency,
            country: &p.country,
            operator: p.operator.as_deref(),
            phone: p.customer.as_ref().and_then(|c| c.phone.as_deref()),
            psp_reference: p.psp_reference.as_deref(),
            failure_message: p.failure.as_ref().map(|f| f.message.as_str()),
        },
        replay,
    )
}

#[derive(Serialize)]
struct NextAction<'a> {
    checkout_url: Option<&'a str>,
    message: &'static str,
    #[serde(rename = "type")]
    kind: &'static str,
}

fn next_action(p: &Payment) -> NextAction<'_> {
    let (kind, message) = match p.status {
        Status::Processing => (
            "await_customer_validation",
            "Ask the customer to approve the payment on their phone.",
        ),
        Status::AwaitingOtp => (
            "confirm_otp",
            "Send the one-time code the customer received to POST /collect/payments/{id}/confirm.",
        ),
        Status::AwaitingPayment => (
            "redirect_to_checkout",
            "Send the customer to checkout_url to pay.",
        ),
        Status::Pending => ("none", "The payment is being submitted to the operator."),
        _ => ("none", "No action is needed."),
    };
    let checkout_url = if p.status == Status::AwaitingPayment {
        p.checkout_url.as_deref()
    } else {
        None
    };
    NextAction {
        checkout_url,
        message,
        kind,
    }
}

/// The Payment object of the spec's table, serialised straight from the
/// record (a `json!` map cost a GET a tenth of its time). Fields in
/// alphabetical order, as the map had them.
#[derive(Serialize)]
pub struct PaymentView<'a> {
    amount: u64,
    amount_minor: u64,
    api_version: &'static str,
    checkout_url: Option<&'a str>,
    completed_at: Option<String>,
    country: &'a str,
    created_at: String,
    currency: &'a str,
    customer: Option<&'a Customer>,
    description: Option<&'a str>,
    environment: &'a str,
    /// What its provider charges on it by the rate card (null: none applies).
    expected_fee: Option<u64>,
    expires_at: String,
    external_merchant_id: Option<&'a str>,
    failure_code: Option<&'a str>,
    failure_message: Option<&'a str>,
    id: &'a str,
    idempotent_replay: bool,
    metadata: Option<&'a Value>,
    mode: &'static str,
    /// The amount less the expected fee: what the merchant keeps.
    net_amount: Option<u64>,
    next_action: NextAction<'a>,
    object: &'static str,
    operator: Option<&'a str>,
    psp_reference: Option<&'a str>,
    reference: &'a str,
    /// Only when flagged: an unflagged payment's JSON is as it always was.
    #[serde(skip_serializing_if = "Option::is_none")]
    review: Option<&'a Failure>,
    status: &'static str,
}

impl<'a> PaymentView<'a> {
    pub fn new(p: &'a Payment, replay: bool) -> PaymentView<'a> {
        PaymentView {
            amount: p.amount,
            amount_minor: p.amount * 100,
            api_version: API_VERSION,
            checkout_url: p.checkout_url.as_deref(),
            completed_at: p.completed_at_ms.map(time::rfc3339),
            country: &p.country,
            created_at: time::rfc3339(p.created_at_ms),
            currency: &p.currency,
            customer: p.customer.as_ref(),
            description: p.description.as_deref(),
            environment: &p.environment,
            expected_fee: p.expected_fee,
            expires_at: time::rfc3339(p.expires_at_ms),
            external_merchant_id: p.external_merchant_id.as_deref(),
            failure_code: p.failure.as_ref().map(|f| f.code.as_str()),
            failure_message: p.failure.as_ref().map(|f| f.message.as_str()),
            id: &p.id,
            idempotent_replay: replay,
            metadata: p.metadata.as_ref(),
            mode: p.mode.as_str(),
            net_amount: p.net_amount(),
            next_action: next_action(p),
            object: "collect.payment",
            operator: p.operator.as_deref(),
            psp_reference: p.psp_reference.as_deref(),
            reference: &p.reference,
            review: p.review.as_ref(),
            status: p.status.as_str(),
        }
    }
}

/// `{"object":"list","data":[{"country","currency","operators":[…]}]}`.
pub fn catalogue_json(ops: &[OperatorInfo], country: Option<Country>) -> Value {
    let data: Vec<Value> = Country::ALL
        .into_iter()
        .filter(|c| country.is_none_or(|wanted| wanted == *c))
        .map(|c| {
            let operators: Vec<Value> = ops
                .iter()
                .filter(|o| o.country == c.code())
                .map(|o| {
                    json!({
                        "slug": o.slug, "name": o.name, "aliases": o.aliases, "requires_otp": o.requires_otp,
                        "modes": o.modes, "min_amount": o.min_amount, "max_amount": o.max_amount, "status": o.status,
                    })
                })
                .collect();
            json!({"country": c.code(), "currency": c.currency(), "operators": operators})
        })
        .collect();
    json!({"object": "list", "data": data})
}
