//! Live adapter for pawaPay's v2 API where pawaPay really serves: Moov in
//! Benin, Togocom (Mixx by Yas) and Moov in Togo, Orange and Moov in Côte
//! d'Ivoire (MTN and Wave have adapters of their own). How its protocol is
//! mapped (PREAUTH codes, active configuration, provider prediction,
//! unsignable callbacks taken as hints), its settings and secret:
//! `docs/operators.md`.

pub mod transformers;

use std::collections::BTreeMap;

use mmc_adapter_kit::exchange::{Endpoint, OrUnknown, Provider, Reply, quoted_refusal};
use mmc_adapter_kit::spec::Spec;
use mmc_adapter_kit::token::{self, HostCache};
use mmc_adapter_kit::types::*;
use mmc_adapter_kit::{Adapter, lookup, phone_required, settings, started, webhook, wire};
use mmc_domain::Operator;
use transformers::{Check, DepositConf, Initiated as Answer};

static SPEC: Spec = Spec {
    provider: "pawaPay",
    // pawaPay also reaches MTN in Benin and Côte d'Ivoire (MTN_MOMO_BEN,
    // MTN_MOMO_CIV): a second route to them, served when the `operators`
    // setting names them (by default `momo` reaches MTN directly).
    family: &[
        "mtn-bj",
        "moov-bj",
        "togocom-tg",
        "moov-tg",
        "mtn-ci",
        "orange-ci",
        "moov-ci",
    ],
    default_served: Some(&["moov-bj", "togocom-tg", "moov-tg", "orange-ci", "moov-ci"]),
    // How long a deposit can still be approved on the phone after pawaPay
    // took it (the operators' own prompts time out within minutes; pawaPay
    // then reports FAILED).
    approval_window_ms: 15 * 60 * 1000,
    status_per_second: 0,
};

static PAWAPAY: Provider = Provider {
    name: "pawaPay",
    credential: Some("API token"),
    refusal: |status, body| quoted_refusal("pawaPay", status, body),
};

/// How long a number's predicted provider is kept: portability moves a
/// number in days, not minutes.
const PREDICTION_TTL_MS: u64 = 24 * 60 * 60 * 1000;

/// Providers whose deposits pawaPay takes only with the customer's
/// generated code (`PREAUTH`): Orange Money CI (the customer dials
/// `#144*82#`). Used when the active configuration cannot be read, so that
/// such deposits still ask the customer for the code instead of going out
/// without it (pawaPay would refuse every one).
const PREAUTH_PROVIDERS: &[&str] = &["ORANGE_CIV"];

pub struct Pawapay;

/// The provider code pawaPay knows `op` by (setting `provider_code.<slug>`, else the table's).
fn provider_of(op: &Operator) -> String {
    settings::setting(&format!("provider_code.{}", op.slug))
        .or_else(|| op.provider_code.map(str::to_string))
        .unwrap_or_default()
}

/// Whether deposits to `op` need the customer's code (`PREAUTH`), as the
/// account's active configuration says; when it cannot be had, what
/// pawaPay's provider list documents ([`PREAUTH_PROVIDERS`]) or the operator
/// table says.
fn preauth(op: &Operator, conf: Option<&BTreeMap<String, DepositConf>>) -> bool {
    let provider = provider_of(op);
    conf.and_then(|c| c.get(&provider)).map_or_else(
        || op.requires_otp || PREAUTH_PROVIDERS.contains(&provider.as_str()),
        DepositConf::preauth,
    )
}

/// The account's XOF deposit configuration by provider code, from the cache
/// or `GET /v2/active-conf`; `None` when it cannot be had (never an error:
/// `describe` must answer).
fn active_conf() -> Option<BTreeMap<String, DepositConf>> {
    let published = token::Published {
        key: "active_conf",
        what: "pawaPay's active configuration",
        provider: &PAWAPAY,
        secret: "api_token",
    };
    published.get(|api| {
        let conf: transformers::ActiveConf = api.get("active configuration", "/v2/active-conf")?;
        Ok(transformers::deposit_conf(&conf))
    })
}

/// pawaPay wants UUIDv4 ids: ours ([`lookup::operator_uuid`]), so a status
/// query works after a timed-out initiation and a repeated one is answered
/// `DUPLICATE_IGNORED`.
use lookup::operator_uuid as uuid_for;

/// The aggregator's API for one served operator.
struct Api {
    op: &'static Operator,
    provider: String,
    endpoint: Endpoint,
}

impl Api {
    fn of(operator: &str) -> Result<Api, AdapterError> {
        let market = SPEC.market(operator)?;
        Ok(Api {
            endpoint: market.bearer_endpoint(&PAWAPAY, "api_token")?,
            op: market.op,
            provider: provider_of(market.op),
        })
    }

    /// POSTs an initiation. Refusals come as `REJECTED` bodies with 200 or
    /// 400, so the body of any answer below 500 is read: below 400 it is the
    /// answer (unreadable: unknown), a 4xx we cannot read is a refusal.
    fn initiate(&self, path: &str, body: &impl serde::Serialize) -> Result<Answer, AdapterError> {
        let answer = match PAWAPAY.reply_if(self.endpoint.post(path, body)?, |s| s < 400)? {
            Reply::Success(resp) => PAWAPAY.read("initiation", &resp.body)?,
            Reply::Declined(resp) => {
                serde_json::from_slice(&resp.body).map_err(|_| PAWAPAY.unexpected(&resp))?
            }
        };
        transformers::initiation(answer).or_unknown()
    }

    /// `GET /v2/{kind}/{our id's UUID}`.
    fn check(&self, kind: &str, our_id: &str) -> Result<PspStatus, AdapterError> {
        let path = format!("/v2/{kind}/{}", uuid_for(our_id));
        let check: Check = self.endpoint.get("status check", &path)?;
        transformers::check_status(&check).or_unknown()
    }

    /// Sends a deposit, refund or payout under our id: where it then stands.
    fn send(
        &self,
        kind: &str,
        our_id: &str,
        body: &impl serde::Serialize,
    ) -> Result<Started, AdapterError> {
        let status = match self.initiate(&format!("/v2/{kind}"), body)? {
            Answer::Accepted => PspStatus::Pending,
            // `DUPLICATE_IGNORED`: an earlier request got through (its answer was
            // lost). A status check that fails now (even with a 4xx) cannot make
            // it "not performed": it is pending, and asked about again later.
            Answer::Duplicate => match self.check(kind, our_id) {
                Ok(PspStatus::NotFound) | Err(_) => PspStatus::Pending,
                Ok(status) => status,
            },
            Answer::Rejected(f) => PspStatus::Failed(f),
        };
        Ok(started(uuid_for(our_id), status))
    }

    /// A deposit of `amount` from `phone` under our `payment_id`.
    fn deposit(
        &self,
        payment_id: &str,
        amount: u64,
        currency: &str,
        phone: &str,
    ) -> transformers::Deposit {
        transformers::Deposit {
            deposit_id: uuid_for(payment_id),
            amount: amount.to_string(),
            currency: currency.into(),
            payer: transformers::Party::mmo(phone, &self.provider),
            pre_authorisation_code: None,
            client_reference_id: payment_id.into(),
            customer_message: None,
        }
    }
}

/// `op` as the account's active configuration `conf` describes it.
fn info(op: &'static Operator, conf: Option<&BTreeMap<String, DepositConf>>) -> OperatorInfo {
    let mut info = SPEC.info(op);
    info.requires_otp = preauth(op, conf);
    let Some(conf) = conf else {
        return info;
    };
    match conf.get(&provider_of(op)) {
        // Not configured for XOF deposits on this account: pawaPay would refuse.
        None => info.status = "closed".into(),
        Some(d) => {
            let min = d.min.unwrap_or(op.min_amount);
            let max = d.max.unwrap_or(op.max_amount);
            // Nonsense limits are not believed: the table's stand.
            if min <= max {
                (info.min_amount, info.max_amount) = (min, max);
            }
            info.status = transformers::availability(d.status.as_deref()).into();
        }
    }
    info
}

impl Adapter for Pawapay {
    const SPEC: &'static Spec = &SPEC;

    fn describe() -> Vec<OperatorInfo> {
        let ops = SPEC.served();
        let conf = if ops.is_empty() { None } else { active_conf() };
        ops.into_iter().map(|op| info(op, conf.as_ref())).collect()
    }

    fn initiate(req: InitiateRequest) -> Result<Initiated, AdapterError> {
        let api = Api::of(&req.operator)?;
        let Some(phone) = req.phone.as_deref() else {
            return Ok(phone_required("Mobile money"));
        };
        let deposit_id = uuid_for(&req.payment_id);
        if preauth(api.op, active_conf().as_ref()) {
            // PREAUTH: nothing to send until the customer's code arrives.
            return Ok(Initiated::OtpRequired(deposit_id));
        }
        let deposit = transformers::Deposit {
            client_reference_id: req.reference.clone(),
            customer_message: transformers::customer_message(req.description.as_deref()),
            ..api.deposit(&req.payment_id, req.amount, &req.currency, phone)
        };
        Ok(match api.initiate("/v2/deposits", &deposit)? {
            Answer::Accepted | Answer::Duplicate => Initiated::AwaitingCustomer(deposit_id),
            Answer::Rejected(f) => Initiated::Refused(f),
        })
    }

    /// Only reached for a payment `initiate` left awaiting the code, so the
    /// provider's auth type is not asked again (a configuration lookup that
    /// failed now must not fail a payment).
    fn confirm_otp(payment: OperationRef, otp: String) -> Result<OtpOutcome, AdapterError> {
        let api = Api::of(&payment.operator)?;
        let phone = payment
            .phone
            .as_deref()
            .ok_or_else(|| AdapterError::Rejected("the payment has no phone number".into()))?;
        let deposit = transformers::Deposit {
            pre_authorisation_code: Some(otp),
            ..api.deposit(&payment.id, payment.amount, &payment.currency, phone)
        };
        // The operator checks the code afterwards: a wrong one fails the deposit.
        Ok(OtpOutcome::Accepted(
            api.send("deposits", &payment.id, &deposit)?.status,
        ))
    }

    /// Deposits cannot be withdrawn once sent, so `cancel` (the kit's
    /// default) reports this too: pending means the customer could still approve it.
    fn status(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        Api::of(&payment.operator)?.check("deposits", &payment.id)
    }

    fn refund(req: RefundRequest) -> Result<Started, AdapterError> {
        let api = Api::of(&req.payment.operator)?;
        let body = transformers::Refund {
            refund_id: uuid_for(&req.refund_id),
            deposit_id: uuid_for(&req.payment.id),
            amount: req.amount.to_string(),
            currency: req.payment.currency.clone(),
        };
        api.send("refunds", &req.refund_id, &body)
    }

    fn refund_status(refund: OperationRef) -> Result<PspStatus, AdapterError> {
        Api::of(&refund.operator)?.check("refunds", &refund.id)
    }

    fn payout(req: PayoutRequest) -> Result<Started, AdapterError> {
        let api = Api::of(&req.operator)?;
        let body = transformers::Payout {
            payout_id: uuid_for(&req.payout_id),
            amount: req.amount.to_string(),
            currency: req.currency.clone(),
            recipient: transformers::Party::mmo(&req.phone, &api.provider),
            client_reference_id: req.reference.clone(),
            customer_message: transformers::customer_message(Some(&req.reference)),
        };
        api.send("payouts", &req.payout_id, &body)
    }

    fn payout_status(payout: OperationRef) -> Result<PspStatus, AdapterError> {
        Api::of(&payout.operator)?.check("payouts", &payout.id)
    }

    fn predict(phone: String) -> Result<Option<String>, AdapterError> {
        if settings::setting("predict_provider").as_deref() != Some("true") {
            return Ok(None);
        }
        let Some(first) = SPEC.served().first().map(|o| o.slug) else {
            return Ok(None);
        };
        let api = Api::of(first)?;
        let digits = wire::digits(&phone);
        // Phone numbers are personal data: the cache keeps a hash of them.
        let (url, hash) = (&api.endpoint.base_url, token::digest(&digits, 16));
        let key = format!("predict:{url}:{hash}");
        token::kept(HostCache, &key, PREDICTION_TTL_MS, || {
            let body = transformers::PredictRequest {
                phone_number: digits,
            };
            let resp = api.endpoint.post("/v2/predict-provider", &body)?;
            Ok(match resp.status {
                200 => {
                    let p: transformers::Prediction = PAWAPAY.read("prediction", &resp.body)?;
                    // Any operator pawaPay knows, served here or not (MTN has its own adapter).
                    mmc_domain::OPERATORS
                        .iter()
                        .find(|o| !p.provider.is_empty() && provider_of(o) == p.provider)
                        .map(|o| o.slug.to_string())
                }
                // Not a number pawaPay can place: no prediction.
                400 => None,
                _ => return Err(PAWAPAY.unexpected(&resp)),
            })
        })
    }

    /// Takes the subject's id from the body, as a hint: pawaPay signs with
    /// an asymmetric key (RFC 9421) that our HMAC-only signing cannot check,
    /// so the service answers at once and asks pawaPay right after.
    fn parse_callback(req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        webhook::method(&req, &["POST", "PUT"], "pawaPay callbacks")?;
        let body: transformers::Callback = PAWAPAY.read("callback", &req.body)?;
        // A refund's callback also names the deposit it refunds.
        let (kind, id) = match (body.refund_id, body.payout_id, body.deposit_id) {
            (Some(id), None, _) => (SubjectKind::Refund, id),
            (None, Some(id), None) => (SubjectKind::Payout, id),
            (None, None, Some(id)) => (SubjectKind::Payment, id),
            _ => {
                return Err(AdapterError::InvalidResponse(
                    "pawaPay callback must name exactly one of depositId, payoutId, refundId"
                        .into(),
                ));
            }
        };
        // Only UUIDs reach the aggregator; anything else is not one of ours.
        let ours = mmc_domain::operator_ids::from_operator(&id).ok_or_else(|| {
            AdapterError::InvalidResponse(format!("pawaPay callback id {id} is not a UUID"))
        })?;
        Ok(webhook::hint(kind, ours, id))
    }
}

mmc_adapter_kit::export!(Pawapay);
