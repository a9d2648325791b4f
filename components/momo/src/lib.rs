//! Live adapter for the MTN MoMo Open API: collections (request to pay) for
//! `mtn-bj` and `mtn-ci`, disbursements (transfers, refunds). How its
//! protocol is mapped, its settings and secrets (`<key>.<slug>` overrides
//! `<key>`, so both markets fit one component): `docs/operators.md`.

pub mod transformers;

use mmc_adapter_kit::books::{Balance, BooksInfo};
use mmc_adapter_kit::exchange::{Endpoint, Provider, before_sending, coded_refusal, json};
use mmc_adapter_kit::spec::{Market, Spec};
use mmc_adapter_kit::token::{self, Bearer, HostCache};
use mmc_adapter_kit::types::*;
use mmc_adapter_kit::{Adapter, lookup, phone_required, started, webhook};

static SPEC: Spec = Spec {
    provider: "MTN MoMo",
    family: &["mtn-bj", "mtn-ci"],
    default_served: None,
    // MTN ends an unanswered request to pay itself (FAILED, reason EXPIRED)
    // after a few minutes; the default leaves a wide margin.
    approval_window_ms: 15 * 60 * 1000,
    // MTN's published best practices cap status requests at 10 a second; per
    // node (a fleet of N nodes sets `status_per_second` to 10/N).
    status_per_second: 10,
};

static MTN: Provider = Provider {
    name: "MTN",
    credential: None,
    refusal: |status, body| coded_refusal("MTN MoMo", status, body),
};

/// MTN tokens last `expires_in` seconds (an hour); one is reused until ten
/// minutes before that (MTN's published best practice), not fetched for
/// every operation.
const TOKEN_MARGIN_S: u64 = 600;

pub struct Momo;

/// MTN wants a UUIDv4 in `X-Reference-Id`: our id's
/// ([`lookup::operator_uuid`]), so a status query works even when the
/// initiation timed out.
use lookup::operator_uuid as reference_id;

/// MTN's products: each has its own API user, keys and tokens.
const COLLECTION: &str = "collection";
const DISBURSEMENT: &str = "disbursement";

/// One MTN market (operator) with its settings.
struct Mtn {
    market: Market,
    base_url: String,
    target_environment: String,
}

impl Mtn {
    fn of(operator: &str) -> Result<Mtn, AdapterError> {
        let market = SPEC.market(operator)?;
        Ok(Mtn {
            base_url: market.base_url()?,
            target_environment: market
                .setting("target_environment")
                .unwrap_or_else(|| "sandbox".into()),
            market,
        })
    }

    /// MTN takes only the target environment's currency (its sandbox: EUR)
    /// and answers 400 otherwise: refused here, before anything is sent, and
    /// said as the configuration problem it is.
    fn takes(&self, currency: &str) -> Result<(), AdapterError> {
        let expected = match self.target_environment.as_str() {
            "sandbox" => "EUR",
            "mtnbenin" | "mtnivorycoast" => "XOF",
            _ => return Ok(()),
        };
        if currency == expected {
            return Ok(());
        }
        Err(AdapterError::NotSent(format!(
            "MTN's target environment {} takes {expected} only, not {currency}: set \
             target_environment.{} to the market (mtnbenin, mtnivorycoast)",
            self.target_environment,
            self.market.slug()
        )))
    }

    /// MTN's API under a product's subscription key.
    fn endpoint(&self, subscription_key: &str) -> Endpoint {
        let api = Endpoint {
            provider: &MTN,
            base_url: self.base_url.clone(),
            headers: vec![(
                "X-Target-Environment".into(),
                self.target_environment.clone(),
            )],
            timeout_ms: self.market.timeout_ms(),
        };
        api.with(("Ocp-Apim-Subscription-Key", subscription_key))
    }
}

/// A token for one operation on one product, kept in the host's cache until
/// [`TOKEN_MARGIN_S`] before it expires and renewed at once when MTN drops it.
struct Session {
    api: Endpoint,
    bearer: Bearer<'static>,
}

impl Session {
    fn open(mtn: &Mtn, p: &'static str) -> Result<Session, AdapterError> {
        let secret = |name: &str| mtn.market.secret(&format!("{p}_{name}"));
        let (user, key) = (secret("api_user")?, secret("api_key")?);
        let api = mtn.endpoint(&secret("subscription_key")?);
        // Cached per market, product and API user (each has its own token).
        let (url, env) = (&mtn.base_url, &mtn.target_environment);
        let cache_key = format!("token/{p}/{url}/{env}/{user}");
        let token_api = api.clone();
        let renew = move || {
            let path = format!("/{p}/token/");
            token::client_credentials(&token_api, &path, (&user, &key), TOKEN_MARGIN_S)
        };
        let bearer = Bearer::open(HostCache, cache_key, "no MTN token", renew)?;
        Ok(Session { api, bearer })
    }

    /// A creating POST under our `reference`: MTN answers 202 with an empty
    /// body, and 409 when this reference already exists at MTN (an earlier
    /// attempt of this very operation got through).
    fn create(
        &self,
        path: &str,
        reference: &str,
        callback_url: Option<&str>,
        body: &impl serde::Serialize,
    ) -> Result<Result<(), Failure>, AdapterError> {
        let mut headers = vec![("X-Reference-Id".into(), reference.to_string())];
        if let Some(url) = callback_url {
            headers.push(("X-Callback-Url".into(), url.into()));
        }
        // A 401 to a token MTN dropped: sent once more under the same reference.
        let resp = self
            .bearer
            .exchange(&self.api, ("POST", path), &headers, json(body))?;
        MTN.answer(resp, [202, 409], |_| Ok(()))
    }
}

/// Where the request to pay, transfer or refund at `path` (under our id's
/// reference) stands. Unknown to MTN (404): the creating request never
/// arrived, or is still in flight (the caller decides when "not found"
/// becomes final).
fn query(op: &OperationRef, product: &'static str, path: &str) -> Result<PspStatus, AdapterError> {
    let session = Session::open(&Mtn::of(&op.operator)?, product)?;
    let path = format!("{path}/{}", reference_id(&op.id));
    let resp = session
        .bearer
        .exchange(&session.api, ("GET", &path), &[], None)?;
    let found = MTN.found(resp, transformers::parse_transaction)?;
    lookup::status_of(found, transformers::status_of)
}

/// Sends a refund or a transfer: a decline is refused (nothing performed).
fn disburse(
    mtn: &Mtn,
    path: &str,
    id: &str,
    body: &impl serde::Serialize,
) -> Result<Started, AdapterError> {
    let reference = reference_id(id);
    let session = Session::open(mtn, DISBURSEMENT).map_err(before_sending("no MTN token"))?;
    session
        .create(path, &reference, None, body)?
        .map_err(|refused| AdapterError::Rejected(refused.message))?;
    Ok(started(reference, PspStatus::Pending))
}

impl Adapter for Momo {
    const NO_OTP: &'static str = "payments are approved on the phone, not with a one-time code";

    const SPEC: &'static Spec = &SPEC;

    fn initiate(req: InitiateRequest) -> Result<Initiated, AdapterError> {
        let mtn = Mtn::of(&req.operator)?;
        let Some(phone) = req.phone.as_deref() else {
            return Ok(phone_required("MTN MoMo"));
        };
        mtn.takes(&req.currency)?;
        let reference = reference_id(&req.payment_id);
        let callback = mtn
            .market
            .setting("send_callback_url")
            .is_none_or(|v| v != "false")
            .then_some(req.callback_url.as_str());
        let session = Session::open(&mtn, COLLECTION).map_err(before_sending("no MTN token"))?;
        let body = transformers::request_to_pay(&req, phone);
        let path = "/collection/v1_0/requesttopay";
        Ok(match session.create(path, &reference, callback, &body)? {
            Ok(()) => Initiated::AwaitingCustomer(reference),
            Err(refused) => Initiated::Refused(refused),
        })
    }

    /// MTN has no way to withdraw a request to pay, so `cancel` (the kit's
    /// default) reports this too: pending means the customer could still approve it.
    fn status(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        query(&payment, COLLECTION, "/collection/v1_0/requesttopay")
    }

    fn refund(req: RefundRequest) -> Result<Started, AdapterError> {
        let mtn = Mtn::of(&req.payment.operator)?;
        mtn.takes(&req.payment.currency)?;
        let body = transformers::refund(&req, reference_id(&req.payment.id));
        disburse(&mtn, "/disbursement/v2_0/refund", &req.refund_id, &body)
    }

    fn refund_status(refund: OperationRef) -> Result<PspStatus, AdapterError> {
        query(&refund, DISBURSEMENT, "/disbursement/v1_0/refund")
    }

    fn payout(req: PayoutRequest) -> Result<Started, AdapterError> {
        let mtn = Mtn::of(&req.operator)?;
        mtn.takes(&req.currency)?;
        let body = transformers::transfer(&req);
        disburse(&mtn, "/disbursement/v1_0/transfer", &req.payout_id, &body)
    }

    fn payout_status(payout: OperationRef) -> Result<PspStatus, AdapterError> {
        query(&payout, DISBURSEMENT, "/disbursement/v1_0/transfer")
    }

    /// MTN signs nothing, so anyone can call our callback URL: the body only
    /// names the payment (`externalId` = our id). It is a hint: the service
    /// answers at once (MTN gives a partner 2 s) and asks MTN right after, by
    /// its own authenticated status query, never trusting what the body claims.
    /// MTN publishes no statement: each operation is read back by status
    /// (with its `financialTransactionId`).
    fn books_info() -> BooksInfo {
        BooksInfo {
            statement: false,
            final_after_ms: 0,
            max_period_ms: 0,
        }
    }

    /// Each served market's collection and disbursement accounts, for the
    /// products whose API user is configured.
    fn balances() -> Result<Vec<Balance>, AdapterError> {
        let mut out = Vec::new();
        for op in SPEC.served() {
            let mtn = Mtn::of(op.slug)?;
            for product in [COLLECTION, DISBURSEMENT] {
                let Ok(session) = Session::open(&mtn, product) else {
                    continue; // this product is not configured here
                };
                let path = format!("/{product}/v1_0/account/balance");
                let resp = session
                    .bearer
                    .exchange(&session.api, ("GET", &path), &[], None)?;
                let read = |b: &[u8]| {
                    mmc_adapter_kit::wire::parse::<transformers::Balance>("MTN balance", b)
                };
                let balance = MTN
                    .answer(resp, [200], read)?
                    .map_err(|refused| AdapterError::Rejected(refused.message))?;
                out.push(Balance {
                    wallet: format!("{} {product}", op.slug),
                    currency: balance.currency,
                    available: balance.available_balance,
                    reserved: None,
                    // Payouts leave the market's disbursement account.
                    pays_out: if product == DISBURSEMENT {
                        vec![op.slug.to_string()]
                    } else {
                        Vec::new()
                    },
                });
            }
        }
        Ok(out)
    }

    fn parse_callback(req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        webhook::method(&req, &["PUT", "POST"], "MTN callbacks")?;
        let claimed = transformers::parse_transaction(&req.body)
            .map_err(|e| AdapterError::InvalidResponse(format!("MTN callback: {e}")))?;
        let id = claimed
            .external_id
            .clone()
            .filter(|id| !id.is_empty())
            .ok_or_else(|| {
                AdapterError::InvalidResponse("MTN callback without externalId".into())
            })?;
        SPEC.market(&req.operator)?;
        let reference = reference_id(&id);
        Ok(webhook::hint(SubjectKind::Payment, id, reference))
    }
}

mmc_adapter_kit::export!(Momo);
