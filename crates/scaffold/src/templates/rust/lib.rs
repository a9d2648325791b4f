//! Live adapter for Acme (`moov-bj`), a collections API: a request to
//! pay pushed to the customer's phone, its status asked by our id, and a
//! signed callback once it is final.
//!
//! - `initiate`: `POST /v1/collections` with our payment id as `reference`
//!   (Acme refuses a second collection under one reference, so a retry
//!   can never pay twice); `201` → awaiting the customer.
//! - `status` (and `cancel`: Acme cannot withdraw a request to pay):
//!   `GET /v1/collections?reference=<our id>`; an empty list is `not-found`.
//! - `parse-callback`: `X-Signature: t=<unix seconds>,v1=<hex
//!   HMAC-SHA256(webhook_secret, "<t>.<raw body>")>` is checked (and the
//!   timestamp's age) before anything is read.
//!
//! Settings: `base_url` (required), `timeout_ms`, `operators`,
//! `webhook_tolerance_seconds`. Secrets: `api_key` (a bearer token),
//! `webhook_secret`.

mod transformers;

use mmc_adapter_kit::exchange::{Endpoint, Provider};
use mmc_adapter_kit::spec::Spec;
use mmc_adapter_kit::types::*;
use mmc_adapter_kit::webhook::{self, Hmac};
use mmc_adapter_kit::{Adapter, lookup, phone_required, wire};
use mmc_domain::http;
use transformers::{Collection, List};

static SPEC: Spec = Spec {
    provider: "Acme",
    // The slugs of the operator table this provider is documented for.
    family: &["moov-bj"],
    default_served: None,
    // How long the customer can still approve a request to pay.
    approval_window_ms: 5 * 60 * 1000,
    status_per_second: 0,
};

static ACME: Provider = Provider {
    name: "Acme",
    credential: Some("API key"),
    refusal: transformers::refusal,
};

const SIGNATURE: Hmac = Hmac {
    header: "X-Signature",
    signature_key: "v1",
    separator: ".",
};

struct Acme;

/// Acme's API for a served operator: its `base_url`, our `api_key` as a bearer token.
fn api(operator: &str) -> Result<Endpoint, AdapterError> {
    SPEC.market(operator)?.bearer_endpoint(&ACME, "api_key")
}

/// The collection made under our id, if Acme has one (a successful one
/// wins if there were ever two).
fn collection(api: &Endpoint, payment: &OperationRef) -> Result<Option<Collection>, AdapterError> {
    let path = format!(
        "/v1/collections?reference={}",
        http::encode_component(&payment.id)
    );
    let list: List = api.get("collection list", &path)?;
    Ok(lookup::pick(list.data, |c| c.status == "SUCCESSFUL"))
}

impl Adapter for Acme {
    const SPEC: &'static Spec = &SPEC;

    fn initiate(req: InitiateRequest) -> Result<Initiated, AdapterError> {
        let api = api(&req.operator)?;
        let Some(phone) = req.phone.as_deref() else {
            return Ok(phone_required("Acme"));
        };
        let body = transformers::CreateCollection {
            reference: req.payment_id.clone(),
            amount: req.amount.to_string(),
            currency: req.currency.clone(),
            msisdn: wire::digits(phone),
            callback_url: req.callback_url.clone(),
        };
        // 201: created (unreadable, the outcome is unknown); a 4xx other than
        // our own 401/403/404/429: Acme's refusal, nothing was performed.
        let read = |b: &[u8]| wire::parse::<Collection>("Acme collection", b);
        Ok(match api.submit("/v1/collections", &body, [201], read)? {
            Ok(created) => Initiated::AwaitingCustomer(created.id),
            Err(refused) => Initiated::Refused(refused),
        })
    }

    fn status(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        let api = api(&payment.operator)?;
        lookup::status_of(collection(&api, &payment)?, |c| Ok(transformers::status(c)))
    }

    /// A signed callback about one collection, reported under our id.
    fn parse_callback(req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        webhook::method(&req, &["POST"], "Acme callbacks")?;
        SIGNATURE.verify(&req)?;
        let event: transformers::Event = ACME.read("callback", &req.body)?;
        let status = transformers::status(&event.data);
        let (id, reference) = (Some(event.data.reference), event.data.id);
        Ok(webhook::report(SubjectKind::Payment, id, reference, status))
    }
}

mmc_adapter_kit::export!(Acme);
