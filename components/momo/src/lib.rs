//! Live adapter for the MTN MoMo Open API: collections (request to pay) for
//! `mtn-bj` and `mtn-ci`, disbursements (transfers, refunds).
//!
//! - Stateless: the host makes a fresh instance per call and adapters have no
//!   storage. The OAuth token (`POST /{product}/token/`, an hour long) is kept
//!   in the host's `cache` capability until a minute before it expires, and
//!   renewed at once if MTN answers 401 to it.
//! - Our ids are the resource ids: `X-Reference-Id` is the payment (refund,
//!   payout) id, so a status query works even when the initiation timed out
//!   and we never learnt whether MTN took it.
//! - MTN callbacks are unsigned and sent once. `parse-callback` treats one as
//!   a hint: the service answers at once and then asks MTN by its own
//!   authenticated status query, never trusting what the body claims.
//!   Reconciliation polls anyway.
//!
//! Settings (`<key>.<slug>` overrides `<key>`, so both markets fit one
//! component): `base_url` (required), `target_environment` (default
//! `sandbox`; `mtnbenin`, `mtnivorycoast` in production), `timeout_ms`,
//! `send_callback_url` (default true), `operators`. Secrets, per product
//! (`collection`, `disbursement`): `<product>_api_user`, `<product>_api_key`,
//! `<product>_subscription_key`.

wit_bindgen::generate!({
    path: ["../../wit/platform", "../../wit/adapter"],
    world: "mmc:adapter/adapter",
    generate_all,
});

mod transformers;

use base64::Engine;
use exports::mmc::adapter::operator::Guest;
use mmc::adapter::types::*;
use mmc::platform::outbound_http::{self, Request as HttpRequest, Response as HttpResponse};
use mmc::platform::types::CapabilityError;
use mmc::platform::{cache, config, signing};
use mmc_domain::{Operator, http};

/// Served unless the `operators` setting narrows it.
const FAMILY: &[&str] = &["mtn-bj", "mtn-ci"];

struct Momo;

fn failure(code: &str, message: &str) -> Failure {
    Failure {
        code: code.into(),
        message: message.into(),
    }
}

/// `<key>.<slug>` wins over `<key>`; blank counts as absent.
fn setting(slug: &str, key: &str) -> Option<String> {
    config::get(&format!("{key}.{slug}"))
        .or_else(|| config::get(key))
        .filter(|v| !v.trim().is_empty())
}

fn secret(slug: &str, key: &str) -> Result<String, AdapterError> {
    config::secret(&format!("{key}.{slug}"))
        .or_else(|| config::secret(key))
        .filter(|v| !v.is_empty())
        .ok_or_else(|| AdapterError::NotSent(format!("secret {key} not configured")))
}

/// How long a customer may still approve a request to pay on the phone: MTN
/// ends an unanswered request itself (FAILED, reason EXPIRED) after a few
/// minutes; the default leaves a wide margin. Setting `approval_window_ms`.
const DEFAULT_APPROVAL_WINDOW_MS: u64 = 15 * 60 * 1000;

fn approval_window_ms(slug: &str) -> u64 {
    setting(slug, "approval_window_ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_APPROVAL_WINDOW_MS)
}

/// The operators of the family this deployment serves.
fn served() -> Vec<&'static Operator> {
    let wanted = config::get("operators");
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

/// MTN wants a UUIDv4 in `X-Reference-Id`: ours, as `mmc_domain::operator_ids` maps it.
fn reference_id(id: &str) -> String {
    mmc_domain::operator_ids::to_operator(id, signing::sha256)
}

/// An answer no operation expects: 4xx is a refusal, anything else unreadable.
fn unexpected(resp: &HttpResponse) -> AdapterError {
    match resp.status {
        400..=499 => AdapterError::Rejected(transformers::refusal(resp.status, &resp.body).message),
        s => AdapterError::InvalidResponse(format!(
            "MTN answered {s} unexpectedly: {}",
            http::excerpt(&resp.body)
        )),
    }
}

#[derive(Clone, Copy)]
enum Product {
    Collection,
    Disbursement,
}

impl Product {
    fn name(self) -> &'static str {
        match self {
            Product::Collection => "collection",
            Product::Disbursement => "disbursement",
        }
    }
}

/// One MTN market (operator) with its settings.
struct Market {
    slug: &'static str,
    base_url: String,
    target_environment: String,
    timeout_ms: u32,
}

impl Market {
    fn of(operator: &str) -> Result<Market, AdapterError> {
        let op = served()
            .into_iter()
            .find(|o| o.slug == operator)
            .ok_or_else(|| {
                AdapterError::NotSupported(format!("this adapter does not serve {operator}"))
            })?;
        let base_url = setting(op.slug, "base_url")
            .ok_or_else(|| AdapterError::NotSent("base_url not configured".into()))?;
        Ok(Market {
            slug: op.slug,
            base_url: base_url.trim_end_matches('/').to_string(),
            target_environment: setting(op.slug, "target_environment")
                .unwrap_or_else(|| "sandbox".into()),
            timeout_ms: setting(op.slug, "timeout_ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
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
            self.target_environment, self.slug
        )))
    }

    /// One HTTP exchange; transport failures and 5xx become adapter errors.
    fn send(
        &self,
        method: &str,
        path: &str,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    ) -> Result<HttpResponse, AdapterError> {
        let req = HttpRequest {
            method: method.into(),
            url: format!("{}{path}", self.base_url),
            headers,
            body,
            timeout_ms: self.timeout_ms,
        };
        mmc_domain::exchange!(outbound_http::send(&req), "MTN", method, path;
            CapabilityError, AdapterError)
    }
}

/// A token for one operation on one product (see the module comment).
struct Session<'a> {
    market: &'a Market,
    product: Product,
    token: std::cell::RefCell<String>,
    /// The token came from the cache: MTN may have dropped it since.
    cached: std::cell::Cell<bool>,
    subscription_key: String,
}

/// MTN caps status requests at 10 a second (its published best practices);
/// the host spaces this adapter's status queries to it (setting
/// `status_per_second`, per node: a fleet of N nodes sets 10/N).
const STATUS_PER_SECOND: u32 = 10;

/// MTN tokens last `expires_in` seconds (an hour); one is reused until ten
/// minutes before that (MTN's published best practice), not fetched for
/// every operation.
const TOKEN_MARGIN_S: u64 = 600;

impl<'a> Session<'a> {
    fn open(market: &'a Market, product: Product) -> Result<Session<'a>, AdapterError> {
        let p = product.name();
        let subscription_key = secret(market.slug, &format!("{p}_subscription_key"))?;
        let session = Session {
            market,
            product,
            token: Default::default(),
            cached: Default::default(),
            subscription_key,
        };
        match cache::get(&session.cache_key()?) {
            Some(t) => {
                *session.token.borrow_mut() = String::from_utf8_lossy(&t).into_owned();
                session.cached.set(true);
            }
            None => session.renew()?,
        }
        Ok(session)
    }

    /// Cached per market, product and API user (each has its own token).
    fn cache_key(&self) -> Result<String, AdapterError> {
        let p = self.product.name();
        let user = secret(self.market.slug, &format!("{p}_api_user"))?;
        Ok(format!(
            "token/{p}/{}/{}/{user}",
            self.market.base_url, self.market.target_environment
        ))
    }

    /// A new token from `POST /{product}/token/`, cached for its lifetime.
    fn renew(&self) -> Result<(), AdapterError> {
        let p = self.product.name();
        let user = secret(self.market.slug, &format!("{p}_api_user"))?;
        let key = secret(self.market.slug, &format!("{p}_api_key"))?;
        let basic = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{key}"));
        let resp = self.market.send(
            "POST",
            &format!("/{p}/token/"),
            vec![
                ("Authorization".into(), format!("Basic {basic}")),
                (
                    "Ocp-Apim-Subscription-Key".into(),
                    self.subscription_key.clone(),
                ),
            ],
            Vec::new(),
        )?;
        match resp.status {
            200 => {
                let token =
                    transformers::parse_token(&resp.body).map_err(AdapterError::InvalidResponse)?;
                let ttl_s = token.expires_in.unwrap_or(0).saturating_sub(TOKEN_MARGIN_S);
                cache::set(
                    &self.cache_key()?,
                    token.access_token.as_bytes(),
                    ttl_s * 1000,
                );
                *self.token.borrow_mut() = token.access_token;
                self.cached.set(false);
                Ok(())
            }
            // Our credentials are wrong: an operator-side problem for the payment, not the customer's.
            401 | 403 => Err(AdapterError::Unavailable(format!(
                "MTN refused our {p} API user ({}): {}",
                resp.status,
                http::excerpt(&resp.body)
            ))),
            _ => Err(unexpected(&resp)),
        }
    }

    /// One exchange under the session's token. A 401 to a cached token (MTN
    /// dropped it) performed nothing: the token is renewed and the request
    /// sent once more, under the same X-Reference-Id.
    fn send(
        &self,
        method: &str,
        path: &str,
        extra_headers: &[(String, String)],
        body: Vec<u8>,
    ) -> Result<HttpResponse, AdapterError> {
        let attempt = || {
            let mut headers = self.headers();
            headers.extend(extra_headers.iter().cloned());
            self.market.send(method, path, headers, body.clone())
        };
        let resp = attempt()?;
        if resp.status == 401 && self.cached.get() {
            cache::set(&self.cache_key()?, &[], 0);
            self.renew().map_err(before_sending)?;
            return attempt();
        }
        Ok(resp)
    }

    fn headers(&self) -> Vec<(String, String)> {
        vec![
            (
                "Authorization".into(),
                format!("Bearer {}", self.token.borrow()),
            ),
            (
                "X-Target-Environment".into(),
                self.market.target_environment.clone(),
            ),
            (
                "Ocp-Apim-Subscription-Key".into(),
                self.subscription_key.clone(),
            ),
        ]
    }

    fn get(&self, path: &str) -> Result<HttpResponse, AdapterError> {
        self.send("GET", path, &[], Vec::new())
    }

    /// A creating POST: MTN answers 202 with an empty body.
    fn create(
        &self,
        path: &str,
        reference: &str,
        callback_url: Option<&str>,
        body: &impl serde::Serialize,
    ) -> Result<HttpResponse, AdapterError> {
        let mut headers = vec![
            ("X-Reference-Id".into(), reference.to_string()),
            ("Content-Type".into(), "application/json".into()),
        ];
        if let Some(url) = callback_url {
            headers.push(("X-Callback-Url".into(), url.into()));
        }
        let body = serde_json::to_vec(body).expect("wire types serialise");
        self.send("POST", path, &headers, body)
    }

    /// Status of a request to pay, transfer or refund at `path`.
    fn query(&self, path: &str) -> Result<PspStatus, AdapterError> {
        let resp = self.get(path)?;
        match resp.status {
            200 => transformers::parse_transaction(&resp.body)
                .and_then(|t| transformers::status_of(&t))
                .map_err(AdapterError::InvalidResponse),
            // Unknown to MTN: the creating request never arrived, or is still in flight
            // (the caller decides when "not found" becomes final).
            404 => Ok(PspStatus::NotFound),
            _ => Err(unexpected(&resp)),
        }
    }
}

/// A failure before the creating request was sent (the token request): the
/// operation itself certainly did not reach MTN.
fn before_sending(e: AdapterError) -> AdapterError {
    match e {
        AdapterError::NotSupported(m) | AdapterError::NotSent(m) => AdapterError::NotSent(m),
        AdapterError::Timeout(m)
        | AdapterError::Unavailable(m)
        | AdapterError::InvalidResponse(m)
        | AdapterError::Rejected(m)
        | AdapterError::Unauthenticated(m)
        | AdapterError::Busy(m) => {
            AdapterError::NotSent(format!("no MTN token, nothing sent: {m}"))
        }
    }
}

/// After a creating POST: 202 is accepted; 409 means this reference (our id)
/// already exists at MTN, i.e. an earlier attempt of this very operation got through.
fn created(resp: &HttpResponse) -> Result<bool, AdapterError> {
    match resp.status {
        202 | 409 => Ok(true),
        // Refused because of us (credentials, target environment, path, throttling):
        // nothing performed, and not the customer's doing.
        401 | 403 | 404 | 429 => Err(AdapterError::Rejected(
            transformers::refusal(resp.status, &resp.body).message,
        )),
        400..=499 => Ok(false),
        _ => Err(unexpected(resp)),
    }
}

/// The `X-Reference-Id` of a payment: always derived from our id, never a
/// stored reference (which only ever held this very id): whatever a message
/// from outside named, our queries name the request we sent.
fn payment_reference(op: &OperationRef) -> String {
    reference_id(&op.id)
}

fn payment_status(op: &OperationRef) -> Result<PspStatus, AdapterError> {
    let market = Market::of(&op.operator)?;
    let reference = payment_reference(op);
    Session::open(&market, Product::Collection)?
        .query(&format!("/collection/v1_0/requesttopay/{reference}"))
}

impl Guest for Momo {
    fn describe() -> Vec<OperatorInfo> {
        served()
            .into_iter()
            .map(|op| OperatorInfo {
                slug: op.slug.into(),
                name: op.name.into(),
                aliases: op.aliases.iter().map(|a| a.to_string()).collect(),
                country: op.country.code().into(),
                currency: op.currency().into(),
                requires_otp: false,
                modes: vec!["direct".into(), "hosted".into()],
                min_amount: op.min_amount,
                max_amount: op.max_amount,
                status: "operational".into(),
                approval_window_ms: approval_window_ms(op.slug),
                status_per_second: setting(op.slug, "status_per_second")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(STATUS_PER_SECOND),
            })
            .collect()
    }

    fn initiate(req: InitiateRequest) -> Result<Initiated, AdapterError> {
        let market = Market::of(&req.operator)?;
        let Some(phone) = req.phone.as_deref() else {
            return Ok(Initiated::Refused(failure(
                "phone_required",
                "MTN MoMo needs the customer's phone number.",
            )));
        };
        market.takes(&req.currency)?;
        let reference = reference_id(&req.payment_id);
        let callback = setting(market.slug, "send_callback_url")
            .is_none_or(|v| v != "false")
            .then_some(req.callback_url.as_str());
        let session = Session::open(&market, Product::Collection).map_err(before_sending)?;
        let resp = session.create(
            "/collection/v1_0/requesttopay",
            &reference,
            callback,
            &transformers::request_to_pay(&req, phone),
        )?;
        if created(&resp)? {
            Ok(Initiated::AwaitingCustomer(reference))
        } else {
            Ok(Initiated::Refused(transformers::refusal(
                resp.status,
                &resp.body,
            )))
        }
    }

    fn confirm_otp(_payment: OperationRef, _otp: String) -> Result<OtpOutcome, AdapterError> {
        Err(AdapterError::NotSupported(
            "MTN MoMo payments are approved on the phone, not with a one-time code".into(),
        ))
    }

    fn status(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        payment_status(&payment)
    }

    /// MTN has no way to withdraw a request to pay: report where it stands.
    /// Pending means the customer could still approve it on the phone.
    fn cancel(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        payment_status(&payment)
    }

    fn refund(req: RefundRequest) -> Result<Started, AdapterError> {
        let market = Market::of(&req.payment.operator)?;
        market.takes(&req.payment.currency)?;
        let reference = reference_id(&req.refund_id);
        let body = transformers::Refund {
            amount: req.amount.to_string(),
            currency: req.payment.currency.clone(),
            external_id: req.refund_id.clone(),
            payer_message: format!("Refund: {}", req.reason),
            payee_note: format!("Refund: {}", req.reason),
            reference_id_to_refund: payment_reference(&req.payment),
        };
        let session = Session::open(&market, Product::Disbursement).map_err(before_sending)?;
        let resp = session.create("/disbursement/v2_0/refund", &reference, None, &body)?;
        if created(&resp)? {
            Ok(Started {
                psp_reference: reference,
                status: PspStatus::Pending,
            })
        } else {
            Err(unexpected(&resp))
        }
    }

    fn refund_status(refund: OperationRef) -> Result<PspStatus, AdapterError> {
        let market = Market::of(&refund.operator)?;
        let reference = payment_reference(&refund);
        Session::open(&market, Product::Disbursement)?
            .query(&format!("/disbursement/v1_0/refund/{reference}"))
    }

    fn payout(req: PayoutRequest) -> Result<Started, AdapterError> {
        let market = Market::of(&req.operator)?;
        market.takes(&req.currency)?;
        let reference = reference_id(&req.payout_id);
        let session = Session::open(&market, Product::Disbursement).map_err(before_sending)?;
        let resp = session.create(
            "/disbursement/v1_0/transfer",
            &reference,
            None,
            &transformers::transfer(&req),
        )?;
        if created(&resp)? {
            Ok(Started {
                psp_reference: reference,
                status: PspStatus::Pending,
            })
        } else {
            Err(unexpected(&resp))
        }
    }

    fn payout_status(payout: OperationRef) -> Result<PspStatus, AdapterError> {
        let market = Market::of(&payout.operator)?;
        let reference = payment_reference(&payout);
        Session::open(&market, Product::Disbursement)?
            .query(&format!("/disbursement/v1_0/transfer/{reference}"))
    }

    /// MTN signs nothing, so anyone can call our callback URL: the body only
    /// names the payment (`externalId` = our id). It is a hint: the service
    /// answers at once (MTN gives a partner 2 s) and asks MTN right after, by
    /// its own authenticated status query, never trusting what the body claims.
    /// This provider offers no prediction.
    fn predict(_phone: String) -> Result<Option<String>, AdapterError> {
        Ok(None)
    }

    fn parse_callback(req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        if req.method != "PUT" && req.method != "POST" {
            return Err(AdapterError::Rejected(format!(
                "MTN callbacks are PUT (or POST), not {}",
                req.method
            )));
        }
        let claimed = transformers::parse_transaction(&req.body)
            .map_err(|e| AdapterError::InvalidResponse(format!("MTN callback: {e}")))?;
        let id = claimed
            .external_id
            .clone()
            .filter(|id| !id.is_empty())
            .ok_or_else(|| {
                AdapterError::InvalidResponse("MTN callback without externalId".into())
            })?;
        Market::of(&req.operator)?;
        Ok(vec![CallbackUpdate {
            kind: SubjectKind::Payment,
            psp_reference: Some(reference_id(&id)),
            id: Some(id),
            status: PspStatus::Pending,
        }])
    }
}

export!(Momo);
