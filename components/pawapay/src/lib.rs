//! Live adapter for pawaPay's v2 API where pawaPay really serves: Moov in
//! Benin, Togocom (Mixx by Yas) and Moov in Togo, Orange and Moov in Côte
//! d'Ivoire (MTN and Wave have adapters of their own; pawaPay's Benin list
//! has no Celtiis and no Coris Money, which go through `fedapay`). The
//! provider code comes from the operator table (`provider_code`),
//! overridable per operator.
//!
//! - Our ids are the aggregator's ids, as the UUIDv4 it demands
//!   (`mmc_domain::operator_ids`: `depositId` = payment id, `refundId` =
//!   refund id, `payoutId` = payout id or a UUID derived from it): a status
//!   query works after a timed-out initiation, and a repeated initiation is
//!   answered `DUPLICATE_IGNORED` instead of debiting twice.
//! - Providers whose deposits the account's active configuration lists as
//!   `PREAUTH` (Orange Money in Côte d'Ivoire: the customer generates a code
//!   by USSD) need that code *with* the deposit. `initiate` therefore sends
//!   nothing and answers `otp-required`; `confirm-otp` submits the deposit
//!   with `preAuthorisationCode`. pawaPay documents no synchronous refusal of
//!   a wrong code: the operator checks it after pawaPay took the deposit, so
//!   a wrong code fails the deposit under its id (and the payment with it),
//!   and a `REJECTED` deposit fails the payment too.
//! - Callbacks (final states only) are configured in the aggregator's
//!   dashboard, one URL for all operators: any
//!   `/api/v1/psp/<slug served here>/callback?environment=live` works. Their
//!   signatures (RFC 9421, the aggregator's asymmetric key) cannot be checked
//!   with our HMAC-only signing capability, so `parse-callback` takes only the
//!   id from the body, as a hint: the service answers at once (pawaPay counts
//!   only a quick 200 as delivered) and asks the aggregator right after.
//!
//! - `describe` takes each operator's deposit limits and availability from
//!   the account's active configuration (`GET /v2/active-conf`), kept in the
//!   host's cache for `active_conf_ttl_ms`: pawaPay rejects what its own
//!   configuration does not allow, so the catalogue says so before a payment
//!   is made. Unreachable or unreadable: the operator table's values.
//!
//! - `predict` asks `POST /v2/predict-provider` when `predict_provider` is
//!   `true`: pawaPay knows ported numbers (its Benin misprediction rate is
//!   6%, a prefix table's is worse). Kept a day per number (hashed) in the
//!   cache.
//!
//! Settings: `base_url` (required), `timeout_ms`, `operators`,
//! `provider_code.<slug>`, `active_conf_ttl_ms`, `predict_provider`.
//! Secret: `api_token`.

wit_bindgen::generate!({
    path: ["../../wit/platform", "../../wit/adapter"],
    world: "mmc:adapter/adapter",
    generate_all,
});

mod transformers;

use std::collections::BTreeMap;

use exports::mmc::adapter::operator::Guest;
use mmc::adapter::types::*;
use mmc::platform::log::{self as host_log, Level};
use mmc::platform::outbound_http::{self, Request as HttpRequest, Response as HttpResponse};
use mmc::platform::types::CapabilityError;
use mmc::platform::{cache, config, signing};
use mmc_domain::{Operator, http};
use transformers::{Check, Initiated as Answer};

const FAMILY: &[&str] = &["moov-bj", "togocom-tg", "moov-tg", "orange-ci", "moov-ci"];

/// How long a deposit can still be approved on the phone after pawaPay took
/// it (the operators' own prompts time out within minutes; pawaPay then
/// reports FAILED). Setting `approval_window_ms`.
const DEFAULT_APPROVAL_WINDOW_MS: u64 = 15 * 60 * 1000;

/// How long the active configuration is kept (setting `active_conf_ttl_ms`):
/// pawaPay changes limits and availability rarely, and a stale value is at
/// worst what the operator table would have said.
const DEFAULT_ACTIVE_CONF_TTL_MS: u64 = 5 * 60 * 1000;

/// How long a number's predicted provider is kept: portability moves a
/// number in days, not minutes.
const PREDICTION_TTL_MS: u64 = 24 * 60 * 60 * 1000;

/// `describe` runs when the adapter is loaded: a slow pawaPay must not hold
/// that up for long (the operator table is the fallback).
const ACTIVE_CONF_TIMEOUT_MS: u32 = 3_000;

struct Pawapay;

fn failure(code: &str, message: &str) -> Failure {
    Failure {
        code: code.into(),
        message: message.into(),
    }
}

fn setting(key: &str) -> Option<String> {
    config::get(key).filter(|v| !v.trim().is_empty())
}

fn served() -> Vec<&'static Operator> {
    let wanted = setting("operators");
    FAMILY
        .iter()
        .filter(|slug| {
            wanted
                .as_deref()
                .is_none_or(|w| w.split(',').any(|s| s.trim() == **slug))
        })
        .filter_map(|slug| mmc_domain::operators::find(slug))
        .collect()
}

/// The provider code pawaPay knows `op` by (setting `provider_code.<slug>`, else the table's).
fn provider_of(op: &Operator) -> String {
    setting(&format!("provider_code.{}", op.slug))
        .or_else(|| op.provider_code.map(str::to_string))
        .unwrap_or_default()
}

/// Providers whose deposits pawaPay takes only with the customer's
/// generated code (`PREAUTH`): Orange Money CI (the customer dials
/// `#144*82#`). Used when the active configuration cannot be read, so that
/// such deposits still ask the customer for the code instead of going out
/// without it (pawaPay would refuse every one).
const PREAUTH_PROVIDERS: &[&str] = &["ORANGE_CIV"];

/// Whether deposits to `op` need the customer's code (`PREAUTH`), as the
/// account's active configuration says; when it cannot be had, what
/// pawaPay's provider list documents ([`PREAUTH_PROVIDERS`]) or the operator
/// table says.
fn preauth(op: &Operator, conf: Option<&BTreeMap<String, transformers::DepositConf>>) -> bool {
    let provider = provider_of(op);
    conf.and_then(|c| c.get(&provider)).map_or_else(
        || op.requires_otp || PREAUTH_PROVIDERS.contains(&provider.as_str()),
        transformers::DepositConf::preauth,
    )
}

/// The account's XOF deposit configuration by provider code, from the cache
/// or `GET /v2/active-conf`; `None` when it cannot be had (never an error:
/// `describe` must answer).
fn active_conf() -> Option<BTreeMap<String, transformers::DepositConf>> {
    let base_url = setting("base_url")?;
    let base_url = base_url.trim_end_matches('/');
    let token = config::secret("api_token").filter(|t| !t.is_empty())?;
    // Per base URL and token (hashed: the cache is no place for secrets), so a
    // configuration change never serves another account's answer.
    let account: String = signing::sha256(token.as_bytes())[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let key = format!("active_conf:{base_url}:{account}");
    if let Some(conf) = cache::get(&key).and_then(|b| serde_json::from_slice(&b).ok()) {
        return Some(conf);
    }
    let timeout_ms = match setting("timeout_ms").and_then(|v| v.parse::<u32>().ok()) {
        Some(t) if t > 0 => t.min(ACTIVE_CONF_TIMEOUT_MS),
        _ => ACTIVE_CONF_TIMEOUT_MS,
    };
    let req = HttpRequest {
        method: "GET".into(),
        url: format!("{base_url}/v2/active-conf"),
        headers: vec![("Authorization".into(), format!("Bearer {token}"))],
        body: Vec::new(),
        timeout_ms,
    };
    let read = match outbound_http::send(&req) {
        Ok(resp) if resp.status == 200 => {
            transformers::parse::<transformers::ActiveConf>("active configuration", &resp.body)
        }
        Ok(resp) => Err(format!(
            "pawaPay answered {} to GET /v2/active-conf: {}",
            resp.status,
            http::excerpt(&resp.body)
        )),
        Err(e) => Err(format!("GET /v2/active-conf failed: {e:?}")),
    };
    match read {
        Ok(conf) => {
            let deposits = transformers::deposit_conf(&conf);
            let ttl = setting("active_conf_ttl_ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(DEFAULT_ACTIVE_CONF_TTL_MS);
            if let Ok(bytes) = serde_json::to_vec(&deposits) {
                cache::set(&key, &bytes, ttl);
            }
            Some(deposits)
        }
        Err(e) => {
            host_log::log(
                Level::Warn,
                &format!(
                    "active configuration unavailable, describing from the operator table: {e}"
                ),
            );
            None
        }
    }
}

/// pawaPay wants UUIDv4 ids: ours, as `mmc_domain::operator_ids` maps them
/// (stable, so a retry or a status query names the same operation).
fn uuid_for(id: &str) -> String {
    mmc_domain::operator_ids::to_operator(id, signing::sha256)
}

/// The id pawaPay knows an operation by: always derived from ours, never a
/// stored reference (which only ever held this very id): whatever a message
/// from outside named, our queries name the operation we sent.
fn reference(op: &OperationRef) -> String {
    uuid_for(&op.id)
}

fn unexpected(resp: &HttpResponse) -> AdapterError {
    match resp.status {
        // Our key refused: nothing performed, and our problem, not the customer's.
        401 | 403 => AdapterError::Rejected(format!(
            "pawaPay refused our API token ({}): {}",
            resp.status,
            http::excerpt(&resp.body)
        )),
        400..=499 => AdapterError::Rejected(format!(
            "pawaPay refused the request ({}): {}",
            resp.status,
            http::excerpt(&resp.body)
        )),
        s => AdapterError::InvalidResponse(format!(
            "pawaPay answered {s} unexpectedly: {}",
            http::excerpt(&resp.body)
        )),
    }
}

/// The aggregator's API for one served operator.
struct Api {
    op: &'static Operator,
    provider: String,
    base_url: String,
    token: String,
    timeout_ms: u32,
}

impl Api {
    fn of(operator: &str) -> Result<Api, AdapterError> {
        let op = served()
            .into_iter()
            .find(|o| o.slug == operator)
            .ok_or_else(|| {
                AdapterError::NotSupported(format!("this adapter does not serve {operator}"))
            })?;
        let base_url = setting("base_url")
            .ok_or_else(|| AdapterError::NotSent("base_url not configured".into()))?;
        let token = config::secret("api_token")
            .filter(|t| !t.is_empty())
            .ok_or_else(|| AdapterError::NotSent("secret api_token not configured".into()))?;
        Ok(Api {
            op,
            provider: provider_of(op),
            base_url: base_url.trim_end_matches('/').to_string(),
            token,
            timeout_ms: setting("timeout_ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        })
    }

    /// One exchange; transport failures and 5xx become adapter errors.
    fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<HttpResponse, AdapterError> {
        let mut headers = vec![("Authorization".into(), format!("Bearer {}", self.token))];
        if body.is_some() {
            headers.push(("Content-Type".into(), "application/json".into()));
        }
        let req = HttpRequest {
            method: method.into(),
            url: format!("{}{path}", self.base_url),
            headers,
            body: body.unwrap_or_default(),
            timeout_ms: self.timeout_ms,
        };
        mmc_domain::exchange!(outbound_http::send(&req), "pawaPay", method, path;
            CapabilityError, AdapterError)
    }

    /// POSTs an initiation. Refusals come as `REJECTED` bodies with 200 or
    /// 400, so any readable answer below 500 counts.
    fn initiate(&self, path: &str, body: &impl serde::Serialize) -> Result<Answer, AdapterError> {
        let resp = self.send(
            "POST",
            path,
            Some(serde_json::to_vec(body).expect("wire types serialise")),
        )?;
        // Refused because of us (token, path, throttling): not the customer's refusal.
        if matches!(resp.status, 401 | 403 | 404 | 429) {
            return Err(unexpected(&resp));
        }
        match transformers::parse::<transformers::Initiation>("initiation", &resp.body) {
            Ok(i) => transformers::initiation(i).map_err(AdapterError::InvalidResponse),
            Err(_) if (400..500).contains(&resp.status) => Err(unexpected(&resp)),
            Err(e) => Err(AdapterError::InvalidResponse(e)),
        }
    }

    /// `GET /v2/{kind}/{id}`.
    fn check(&self, kind: &str, id: &str) -> Result<PspStatus, AdapterError> {
        let resp = self.send("GET", &format!("/v2/{kind}/{id}"), None)?;
        if resp.status != 200 {
            return Err(unexpected(&resp));
        }
        let check: Check = transformers::parse("status check", &resp.body)
            .map_err(AdapterError::InvalidResponse)?;
        transformers::check_status(&check).map_err(AdapterError::InvalidResponse)
    }

    /// Where an operation stands that pawaPay answered `DUPLICATE_IGNORED`
    /// for: it exists, an earlier request got through. A status check that
    /// fails now (even with a 4xx) cannot make it "not performed": it is
    /// pending, and asked about again later.
    fn after_duplicate(&self, kind: &str, id: &str) -> PspStatus {
        match self.check(kind, id) {
            Ok(PspStatus::NotFound) | Err(_) => PspStatus::Pending,
            Ok(status) => status,
        }
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

impl Guest for Pawapay {
    fn describe() -> Vec<OperatorInfo> {
        let ops = served();
        let conf = if ops.is_empty() { None } else { active_conf() };
        ops.into_iter()
            .map(|op| {
                let (min_amount, max_amount, status) = match &conf {
                    None => (op.min_amount, op.max_amount, "operational"),
                    // Not configured for XOF deposits on this account: pawaPay would refuse.
                    Some(c) => match c.get(&provider_of(op)) {
                        None => (op.min_amount, op.max_amount, "closed"),
                        Some(d) => {
                            let min = d.min.unwrap_or(op.min_amount);
                            let max = d.max.unwrap_or(op.max_amount);
                            // Nonsense limits are not believed: the table's stand.
                            let (min, max) = if min <= max {
                                (min, max)
                            } else {
                                (op.min_amount, op.max_amount)
                            };
                            (min, max, transformers::availability(d.status.as_deref()))
                        }
                    },
                };
                (op, min_amount, max_amount, status)
            })
            .map(|(op, min_amount, max_amount, status)| OperatorInfo {
                slug: op.slug.into(),
                name: op.name.into(),
                aliases: op.aliases.iter().map(|a| a.to_string()).collect(),
                country: op.country.code().into(),
                currency: op.currency().into(),
                requires_otp: preauth(op, conf.as_ref()),
                modes: vec!["direct".into(), "hosted".into()],
                min_amount,
                max_amount,
                status: status.into(),
                approval_window_ms: setting("approval_window_ms")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(DEFAULT_APPROVAL_WINDOW_MS),
                status_per_second: 0,
            })
            .collect()
    }

    fn initiate(req: InitiateRequest) -> Result<Initiated, AdapterError> {
        let api = Api::of(&req.operator)?;
        let Some(phone) = req.phone.as_deref() else {
            return Ok(Initiated::Refused(failure(
                "phone_required",
                "Mobile money needs the customer's phone number.",
            )));
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
        let answer = api.initiate("/v2/deposits", &deposit)?;
        Ok(match answer {
            Answer::Accepted | Answer::Duplicate => Initiated::AwaitingCustomer(deposit_id),
            Answer::Rejected(f) => Initiated::Refused(transformers::failure_for(&f)),
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
        let answer = api.initiate("/v2/deposits", &deposit)?;
        Ok(match answer {
            // The operator checks the code afterwards: a wrong one fails the deposit.
            Answer::Accepted => OtpOutcome::Accepted(PspStatus::Pending),
            // An earlier confirmation got through (its answer was lost): report where it stands.
            Answer::Duplicate => {
                OtpOutcome::Accepted(api.after_duplicate("deposits", &reference(&payment)))
            }
            Answer::Rejected(f) => {
                OtpOutcome::Accepted(PspStatus::Failed(transformers::failure_for(&f)))
            }
        })
    }

    fn status(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        Api::of(&payment.operator)?.check("deposits", &reference(&payment))
    }

    /// Deposits cannot be withdrawn once sent: report where it stands.
    /// Pending means the customer could still approve it.
    fn cancel(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        Api::of(&payment.operator)?.check("deposits", &reference(&payment))
    }

    fn refund(req: RefundRequest) -> Result<Started, AdapterError> {
        let api = Api::of(&req.payment.operator)?;
        let refund_id = uuid_for(&req.refund_id);
        let body = transformers::Refund {
            refund_id: refund_id.clone(),
            deposit_id: reference(&req.payment),
            amount: req.amount.to_string(),
            currency: req.payment.currency.clone(),
        };
        let status = match api.initiate("/v2/refunds", &body)? {
            Answer::Accepted => PspStatus::Pending,
            Answer::Duplicate => api.after_duplicate("refunds", &refund_id),
            Answer::Rejected(f) => PspStatus::Failed(transformers::failure_for(&f)),
        };
        Ok(Started {
            psp_reference: refund_id,
            status,
        })
    }

    fn refund_status(refund: OperationRef) -> Result<PspStatus, AdapterError> {
        Api::of(&refund.operator)?.check("refunds", &reference(&refund))
    }

    fn payout(req: PayoutRequest) -> Result<Started, AdapterError> {
        let api = Api::of(&req.operator)?;
        let payout_id = uuid_for(&req.payout_id);
        let body = transformers::Payout {
            payout_id: payout_id.clone(),
            amount: req.amount.to_string(),
            currency: req.currency.clone(),
            recipient: transformers::Party::mmo(&req.phone, &api.provider),
            client_reference_id: req.reference.clone(),
            customer_message: transformers::customer_message(Some(&req.reference)),
        };
        let status = match api.initiate("/v2/payouts", &body)? {
            Answer::Accepted => PspStatus::Pending,
            Answer::Duplicate => api.after_duplicate("payouts", &payout_id),
            Answer::Rejected(f) => PspStatus::Failed(transformers::failure_for(&f)),
        };
        Ok(Started {
            psp_reference: payout_id,
            status,
        })
    }

    fn payout_status(payout: OperationRef) -> Result<PspStatus, AdapterError> {
        Api::of(&payout.operator)?.check("payouts", &reference(&payout))
    }

    fn predict(phone: String) -> Result<Option<String>, AdapterError> {
        if setting("predict_provider").as_deref() != Some("true") {
            return Ok(None);
        }
        let Some(first) = served().first().map(|o| o.slug) else {
            return Ok(None);
        };
        let api = Api::of(first)?;
        let digits: String = phone.chars().filter(char::is_ascii_digit).collect();
        // Phone numbers are personal data: the cache keeps a hash of them.
        let hashed: String = signing::sha256(digits.as_bytes())[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let key = format!("predict:{}:{hashed}", api.base_url);
        if let Some(slug) = cache::get(&key) {
            return Ok(Some(String::from_utf8_lossy(&slug).into_owned()).filter(|s| !s.is_empty()));
        }
        let body = transformers::PredictRequest {
            phone_number: digits,
        };
        let resp = api.send(
            "POST",
            "/v2/predict-provider",
            Some(serde_json::to_vec(&body).expect("wire types serialise")),
        )?;
        let slug = match resp.status {
            200 => {
                let p: transformers::Prediction = transformers::parse("prediction", &resp.body)
                    .map_err(AdapterError::InvalidResponse)?;
                // Any operator pawaPay knows, served here or not (MTN has its own adapter).
                mmc_domain::OPERATORS
                    .iter()
                    .find(|o| !p.provider.is_empty() && provider_of(o) == p.provider)
                    .map(|o| o.slug.to_string())
            }
            // Not a number pawaPay can place: no prediction.
            400 => None,
            _ => return Err(unexpected(&resp)),
        };
        cache::set(
            &key,
            slug.as_deref().unwrap_or("").as_bytes(),
            PREDICTION_TTL_MS,
        );
        Ok(slug)
    }

    /// Takes the subject's id from the body; the status is asked for after
    /// the answer (see the module comment on signatures).
    fn parse_callback(req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        if req.method != "POST" && req.method != "PUT" {
            return Err(AdapterError::Rejected(format!(
                "pawaPay callbacks are POST, not {}",
                req.method
            )));
        }
        let body: transformers::Callback =
            transformers::parse("callback", &req.body).map_err(AdapterError::InvalidResponse)?;
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
        // A hint only (its signature is not checked here): the service answers at
        // once and asks pawaPay for the status right after.
        Ok(vec![CallbackUpdate {
            kind,
            id: Some(ours),
            psp_reference: Some(id),
            status: PspStatus::Pending,
        }])
    }
}

export!(Pawapay);
