//! Live adapter for FedaPay (a Benin aggregator, API v1): by default
//! `celtiis-bj` (no-redirect push) and `coris-bj` (FedaPay's payment page),
//! and with the `operators` setting any operator FedaPay documents for
//! collection. A payment is a transaction created, given a token, then
//! pushed to the phone or paid on FedaPay's page; creating and tokenising
//! move no money, the push does. How its protocol is mapped (the search and
//! list scan for an operation whose answer was lost, signed webhooks, no
//! refunds), its settings and secrets: `docs/operators.md`.

mod api;
pub mod transformers;

use api::Api;
use mmc_adapter_kit::books::{Balance, BooksInfo};
use mmc_adapter_kit::exchange::{OrUnknown, Provider, coded_refusal};
use mmc_adapter_kit::spec::Spec;
use mmc_adapter_kit::types::*;
use mmc_adapter_kit::webhook::{self, Hmac};
use mmc_adapter_kit::{
    Adapter, log, lookup, phone_required, redirect, settings, started, token, wire,
};
use mmc_domain::Operator;
use transformers::{Kind, Payout, PayoutFields, Transaction, TransactionFields};

static SPEC: Spec = Spec {
    provider: "FedaPay",
    // Every operator FedaPay documents for collection in our three countries.
    family: &[
        "mtn-bj",
        "moov-bj",
        "celtiis-bj",
        "coris-bj",
        "togocom-tg",
        "moov-tg",
        "mtn-ci",
        "moov-ci",
        "orange-ci",
        "wave-ci",
    ],
    // Served without an `operators` setting: the ones nobody else routes.
    default_served: Some(&["celtiis-bj", "coris-bj"]),
    // FedaPay does not say how long a pending transaction can still be paid
    // (its page stays usable and a prompt may be approved late): a wide
    // window, so expiry never gives up on a payment that may still be approved.
    approval_window_ms: 30 * 60 * 1000,
    status_per_second: 0,
};

static FEDAPAY: Provider = Provider {
    name: "FedaPay",
    credential: Some("secret key"),
    refusal: |status, body| coded_refusal("FedaPay", status, body),
};

/// `X-FEDAPAY-SIGNATURE: t=<ts>,s=<hex>` over `<ts>.<raw body>`, as
/// FedaPay's official libraries verify.
const SIGNATURE: Hmac = Hmac {
    header: "X-FEDAPAY-SIGNATURE",
    signature_key: "s",
    separator: ".",
};

const PAGE: &str = "page";

/// FedaPay's no-redirect modes (its "payment methods" page); the others go
/// through its payment page.
fn default_mode(slug: &str) -> &'static str {
    match slug {
        "mtn-bj" => "mtn_open",
        "moov-bj" => "moov",
        "celtiis-bj" => "sbin",
        "togocom-tg" => "togocel",
        "moov-tg" => "moov_tg",
        "mtn-ci" => "mtn_ci",
        _ => PAGE,
    }
}

pub struct FedaPay;

/// The modes FedaPay lists for XOF on this account; `None` when they cannot
/// be had (never an error: `describe` must answer, and the operator table
/// then stands). FedaPay publishes no limits or operational status, only
/// these modes. A read that failed is logged by the kit, an adapter not
/// configured is not; currencies read without XOF modes are said here.
fn xof_modes() -> Option<Vec<String>> {
    let modes = transformers::xof_modes(&currencies()?);
    if modes.is_none() {
        log::log(
            log::Level::Warn,
            "FedaPay lists no XOF modes, describing from the operator table",
        );
    }
    modes
}

/// The ISO code of FedaPay's currency `id` (transactions and payouts name
/// their currency by id), from the account's currencies.
fn iso_of(id: u64) -> Option<String> {
    currencies().and_then(|c| transformers::iso_of(&c, id))
}

/// Sent on every request, as FedaPay's libraries do.
const ACCEPT: (&str, &str) = ("Accept", "application/json");

/// The account's currencies, from the cache or `GET /v1/currencies`; `None`
/// when they cannot be had.
fn currencies() -> Option<Vec<transformers::CurrencyModes>> {
    let published = token::Published {
        key: "currencies",
        what: "FedaPay's currencies",
        provider: &FEDAPAY,
        secret: "secret_key",
    };
    published.get(|api| {
        api.with(ACCEPT)
            .get_with("/v1/currencies", |b| transformers::many("currencies", b))
    })
}

/// How a served operator is paid: pushed in one of FedaPay's no-redirect
/// modes, or on FedaPay's page.
enum Route {
    Push(String),
    Page,
}

fn route(op: &Operator) -> Route {
    let mode = settings::setting(&format!("mode.{}", op.slug))
        .map(|m| m.trim().to_string())
        .unwrap_or_else(|| default_mode(op.slug).into());
    if mode == PAGE || mode == "redirect" {
        Route::Page
    } else {
        Route::Push(mode)
    }
}

/// Payout modes are not documented per operator: the collection mode, unless
/// `payout_mode.<slug>` says otherwise.
fn payout_mode(op: &Operator) -> Option<String> {
    settings::setting(&format!("payout_mode.{}", op.slug)).or(match route(op) {
        Route::Push(mode) => Some(mode),
        Route::Page => None,
    })
}

impl Adapter for FedaPay {
    const NO_OTP: &'static str = "payments are approved on the phone or on FedaPay's page, not with a one-time code sent here";
    const NO_REFUNDS: &'static str = "documents no refund API: refund from FedaPay's dashboard";

    const SPEC: &'static Spec = &SPEC;

    fn describe() -> Vec<OperatorInfo> {
        let ops = SPEC.served();
        let modes = if ops.is_empty() { None } else { xof_modes() };
        ops.into_iter()
            .map(|op| {
                // No FedaPay mode takes a one-time code: a Coris payment is
                // confirmed on FedaPay's page, never with `confirm-otp`, and
                // the catalogue says what the provider does (the kit's default).
                let mut info = SPEC.info(op);
                // A push mode FedaPay does not list for XOF on this account would be
                // refused: closed, so nothing is sent. The page picks among the listed ones.
                if let (Some(listed), Route::Push(mode)) = (&modes, route(op))
                    && !listed.contains(&mode)
                {
                    info.status = "closed".into();
                }
                info
            })
            .collect()
    }

    fn initiate(req: InitiateRequest) -> Result<Initiated, AdapterError> {
        let api = Api::of(&req.operator)?;
        let route = route(api.op);
        if matches!(route, Route::Push(_)) && req.phone.is_none() {
            return Ok(phone_required("Mobile money"));
        }
        let (id, token) = match api.prepare(&req)? {
            Ok(prepared) => prepared,
            Err(refused) => return Ok(Initiated::Refused(refused)),
        };
        let mode = match route {
            Route::Page => {
                return Ok(redirect(id.to_string(), token.url));
            }
            Route::Push(mode) => mode,
        };
        // The money-moving call: from here on an error leaves the outcome
        // unknown, and the transaction is found again by our id.
        let push = transformers::Push {
            token: token.token,
            phone_number: req
                .phone
                .as_deref()
                .map(|p| transformers::PhoneNumber::new(p, &req.country)),
        };
        // Its body is not used, but an unreadable one is not an answer.
        let read = |b: &[u8]| transformers::parse::<serde_json::Value>("push answer", b);
        let path = format!("/v1/{mode}");
        Ok(match api.endpoint.submit(&path, &push, 200..=299, read)? {
            Ok(_) => Initiated::AwaitingCustomer(id.to_string()),
            Err(refused) => Initiated::Refused(refused),
        })
    }

    /// FedaPay documents no way to withdraw a transaction, so `cancel` (the
    /// kit's default) reports this too: pending means the customer may still pay it.
    fn status(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        let api = Api::of(&payment.operator)?;
        // Nothing under our id: never created, or still in flight (the
        // caller decides when this is final).
        let found: Option<Transaction> = api.find(&payment.id, payment.psp_reference.as_deref())?;
        lookup::status_of(found, |t| t.status(&iso_of))
    }

    fn payout(req: PayoutRequest) -> Result<Started, AdapterError> {
        let api = Api::of(&req.operator)?;
        let mode = payout_mode(api.op).ok_or_else(|| {
            AdapterError::NotSupported(format!(
                "no FedaPay payout mode for {}: set payout_mode.{}",
                api.op.slug, api.op.slug
            ))
        })?;
        // FedaPay takes no idempotency key: an earlier attempt under our id
        // (its answer lost) is looked for first, and started or reported,
        // never created again. When that cannot be told, nothing new is
        // created and the outcome stays unknown (asked again by our id).
        let earlier: Option<Payout> = api.find(&req.payout_id, None).map_err(|e| {
            AdapterError::Unavailable(format!(
                "could not tell whether an earlier attempt created this FedaPay payout: {e:?}"
            ))
        })?;
        if let Some(p) = earlier {
            if p.status != "pending" {
                return Ok(started(p.id.to_string(), p.status(&iso_of).or_unknown()?));
            }
            // Created, never started: start that one.
            return api.start_payout(p.id);
        }
        let (firstname, lastname) = transformers::split_name(&req.beneficiary_name);
        let body = transformers::CreatePayout {
            amount: req.amount,
            currency: transformers::Currency {
                iso: req.currency.clone(),
            },
            mode,
            customer: transformers::Customer {
                firstname: Some(firstname),
                lastname: Some(lastname),
                phone_number: Some(transformers::PhoneNumber::new(
                    &req.phone,
                    api.op.country.code(),
                )),
            },
            description: wire::clip(&req.reference, 255),
            custom_metadata: transformers::metadata(&req.payout_id),
        };
        // Creating a payout sends nothing: only starting it does; a refusal
        // to create it is one too.
        let what = "creating the FedaPay payout";
        let read = |b: &[u8]| transformers::one("payout", b);
        let created: Payout = api
            .draft(what, "/v1/payouts", &body, read)?
            .map_err(|refused| AdapterError::Rejected(refused.message))?;
        api.start_payout(created.id)
    }

    fn payout_status(payout: OperationRef) -> Result<PspStatus, AdapterError> {
        let api = Api::of(&payout.operator)?;
        let found: Option<Payout> = api.find(&payout.id, payout.psp_reference.as_deref())?;
        lookup::status_of(found, |p| p.status(&iso_of))
    }

    /// A signed webhook. Final transaction (or payout) states are reported
    /// with our id from `custom_metadata`; other events are acknowledged
    /// and ignored.
    /// FedaPay publishes its balances, not a statement: each transaction
    /// is read back by status.
    fn books_info() -> BooksInfo {
        BooksInfo {
            statement: false,
            final_after_ms: 0,
            max_period_ms: 0,
        }
    }

    /// One balance per payment mode (`mtn_open`, `moov`…) and currency.
    fn balances() -> Result<Vec<Balance>, AdapterError> {
        let api = Api::of(SPEC.account_market()?.op.slug)?;
        let balances: Vec<transformers::Balance> = api
            .endpoint
            .get_with("/v1/balances", |b| transformers::many("balances", b))?;
        Ok(balances
            .into_iter()
            .map(|b| Balance {
                // A mode's balance pays the payouts sent in that mode.
                pays_out: SPEC
                    .served()
                    .iter()
                    .filter(|op| payout_mode(op).as_deref() == Some(b.mode.as_str()))
                    .map(|op| op.slug.to_string())
                    .collect(),
                wallet: b.mode,
                currency: b
                    .currency_id
                    .and_then(iso_of)
                    .unwrap_or_else(|| "XOF".into()),
                available: b.amount.to_string(),
                reserved: None,
            })
            .collect())
    }

    fn parse_callback(req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        webhook::method(&req, &["POST"], "FedaPay webhooks")?;
        SIGNATURE.verify(&req)?;
        let event: transformers::Event = FEDAPAY.read("webhook", &req.body)?;
        let name = event.name.or(event.kind).unwrap_or_default();
        let entity = event.entity.unwrap_or_default();
        if name.starts_with("transaction.") {
            final_update::<TransactionFields>(&name, SubjectKind::Payment, entity)
        } else if name.starts_with("payout.") {
            final_update::<PayoutFields>(&name, SubjectKind::Payout, entity)
        } else {
            Ok(webhook::ignored(&format!("FedaPay event {name}")))
        }
    }
}

/// A webhook's transaction or payout, reported with our id from
/// `custom_metadata` once final. `created`/`updated` while pending: nothing
/// final, and no proof a push was ever sent.
fn final_update<K: Kind>(
    name: &str,
    kind: SubjectKind,
    entity: serde_json::Value,
) -> Result<Vec<CallbackUpdate>, AdapterError> {
    let t: transformers::Record<K> =
        wire::from_value(&format!("FedaPay event {name}'s entity"), entity).or_unknown()?;
    let status = t.status(&iso_of).or_unknown()?;
    if matches!(status, PspStatus::Pending) {
        return Ok(Vec::new());
    }
    Ok(webhook::report(kind, t.ours(), t.id.to_string(), status))
}

mmc_adapter_kit::export!(FedaPay);
