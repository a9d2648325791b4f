//! Live adapter for Wave Côte d'Ivoire (`wave-ci`): Checkout for payments,
//! Payout for payouts.
//!
//! - Wave is hosted even in `direct` mode: `initiate` opens a checkout
//!   session (`client_reference` = our payment id) and returns
//!   `initiated::redirect` with Wave's `wave_launch_url`.
//! - Webhooks are configured once per wallet in the Wave Business Portal
//!   (not per request): point them at
//!   `{public_base_url}/api/v1/psp/wave-ci/callback?environment=live`.
//!   `parse-callback` verifies `Wave-Signature` (HMAC-SHA256 with the
//!   `webhook_secret` over the timestamp immediately followed by the raw
//!   body) and the timestamp's age before reading anything.
//! - Refunds are whole-session and synchronous at Wave.
//!
//! Settings: `base_url` (required), `timeout_ms`, `webhook_tolerance_seconds`
//! (default 300), `restrict_payer_mobile` (default false: Wave accounts are
//! not tied to the network of the number the merchant gave), `operators`,
//! `webhook_security` (`signing`, the default, or `shared_secret`),
//! `approval_window_ms`. Secrets: `api_key` (Checkout; Payout too unless
//! `payout_api_key` is set: Wave scopes keys per API), `webhook_secret`.

wit_bindgen::generate!({
    path: ["../../wit/platform", "../../wit/adapter"],
    world: "mmc:adapter/adapter",
    generate_all,
});

mod transformers;

use exports::mmc::adapter::operator::Guest;
use mmc::adapter::types::*;
use mmc::platform::outbound_http::{self, Request as HttpRequest, Response as HttpResponse};
use mmc::platform::types::CapabilityError;
use mmc::platform::{clock, config, log, signing};
use mmc_domain::{Operator, http};
use transformers::{Payout, Search, Session};

const FAMILY: &[&str] = &["wave-ci"];
const DEFAULT_TOLERANCE_S: u64 = 300;
/// A checkout session can be paid until it expires at Wave (`when_expires`,
/// 30 minutes by default) unless we expire it first, which cancel and expiry
/// do. Setting `approval_window_ms`.
const DEFAULT_APPROVAL_WINDOW_MS: u64 = 30 * 60 * 1000;

struct Wave;

fn setting(key: &str) -> Option<String> {
    config::get(key).filter(|v| !v.trim().is_empty())
}

fn secret(key: &str) -> Option<String> {
    config::secret(key).filter(|v| !v.is_empty())
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

fn unexpected(resp: &HttpResponse) -> AdapterError {
    match resp.status {
        // Our key refused: nothing performed, and our problem, not the customer's.
        401 | 403 => AdapterError::Rejected(format!(
            "Wave refused our API key ({}): {}",
            resp.status,
            http::excerpt(&resp.body)
        )),
        400..=499 => AdapterError::Rejected(transformers::refusal(resp.status, &resp.body).message),
        s => AdapterError::InvalidResponse(format!(
            "Wave answered {s} unexpectedly: {}",
            http::excerpt(&resp.body)
        )),
    }
}

/// The Wave API for one served operator.
struct Api {
    base_url: String,
    api_key: String,
    timeout_ms: u32,
}

impl Api {
    /// The Checkout API (collections, refunds, expiry).
    fn of(operator: &str) -> Result<Api, AdapterError> {
        Api::with_key(operator, "api_key")
    }

    /// The Payout API. Wave scopes each API key to the APIs chosen for it in
    /// the Business Portal: `payout_api_key` when the payout key is another
    /// one, else `api_key` (a key allowed both).
    fn payouts(operator: &str) -> Result<Api, AdapterError> {
        Api::with_key(
            operator,
            if secret("payout_api_key").is_some() {
                "payout_api_key"
            } else {
                "api_key"
            },
        )
    }

    fn with_key(operator: &str, key_name: &str) -> Result<Api, AdapterError> {
        if !served().iter().any(|o| o.slug == operator) {
            return Err(AdapterError::NotSupported(format!(
                "this adapter does not serve {operator}"
            )));
        }
        let base_url = setting("base_url")
            .ok_or_else(|| AdapterError::NotSent("base_url not configured".into()))?;
        let api_key = secret(key_name)
            .ok_or_else(|| AdapterError::NotSent(format!("secret {key_name} not configured")))?;
        Ok(Api {
            base_url: base_url.trim_end_matches('/').to_string(),
            api_key,
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
        extra_headers: Vec<(String, String)>,
        body: Option<Vec<u8>>,
    ) -> Result<HttpResponse, AdapterError> {
        let mut headers = vec![("Authorization".into(), format!("Bearer {}", self.api_key))];
        if body.is_some() {
            headers.push(("Content-Type".into(), "application/json".into()));
        }
        headers.extend(extra_headers);
        let req = HttpRequest {
            method: method.into(),
            url: format!("{}{path}", self.base_url),
            headers,
            body: body.unwrap_or_default(),
            timeout_ms: self.timeout_ms,
        };
        mmc_domain::exchange!(outbound_http::send(&req), "Wave", method, path;
            CapabilityError, AdapterError)
    }

    fn get<T: serde::de::DeserializeOwned>(
        &self,
        what: &str,
        path: &str,
    ) -> Result<T, AdapterError> {
        let resp = self.send("GET", path, Vec::new(), None)?;
        if resp.status != 200 {
            return Err(unexpected(&resp));
        }
        transformers::parse(what, &resp.body).map_err(AdapterError::InvalidResponse)
    }

    /// The checkout session of a payment: by its id when we have it, else by
    /// our payment id (`client_reference`), e.g. after a timed-out initiation.
    fn session(&self, payment: &OperationRef) -> Result<Option<Session>, AdapterError> {
        if let Some(id) = &payment.psp_reference {
            return self
                .get("checkout session", &format!("/v1/checkout/sessions/{id}"))
                .map(Some);
        }
        let found: Search<Session> = self.get(
            "session search",
            &format!(
                "/v1/checkout/sessions/search?client_reference={}",
                http::encode_component(&payment.id)
            ),
        )?;
        // Several sessions for one payment would be our bug; a paid one wins.
        let mut sessions = found.result;
        let paid = sessions.iter().position(transformers::Session::paid);
        Ok(match paid {
            Some(i) => Some(sessions.swap_remove(i)),
            None => sessions.pop(),
        })
    }
}

/// Checks a webhook by the security strategy chosen for it in Wave's
/// Business Portal (`webhook_security`): `signing` (the default: the
/// `Wave-Signature` HMAC of the raw body, checked against the clock) or
/// `shared_secret` (Wave sends the secret as `Authorization: Bearer …`).
fn verify_signature(req: &Inbound) -> Result<(), AdapterError> {
    let refuse = |m: &str| Err(AdapterError::Unauthenticated(m.into()));
    let Some(secret) = secret("webhook_secret") else {
        // Never accept what we cannot check.
        return refuse("webhook_secret not configured");
    };
    if setting("webhook_security").as_deref() == Some("shared_secret") {
        let bearer = req
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case("authorization"))
            .and_then(|(_, v)| v.strip_prefix("Bearer "));
        return match bearer {
            Some(b) if http::constant_time_eq(b.as_bytes(), secret.as_bytes()) => Ok(()),
            Some(_) => refuse("the webhook's shared secret does not match"),
            None => refuse("no Authorization header (webhook_security = shared_secret)"),
        };
    }
    let Some(header) = req
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("wave-signature"))
        .map(|(_, v)| v.as_str())
    else {
        return refuse("no Wave-Signature header");
    };
    let Some((timestamp, signatures)) = transformers::parse_signature_header(header) else {
        return refuse("malformed Wave-Signature header");
    };
    let tolerance = setting("webhook_tolerance_seconds")
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_TOLERANCE_S);
    let sent_s: u64 = timestamp.parse().unwrap_or(0);
    let now_s = clock::now_ms() / 1000;
    if now_s.abs_diff(sent_s) > tolerance {
        return refuse("Wave-Signature timestamp outside the tolerance (replayed or clock skew)");
    }
    // Signed: the timestamp immediately followed by the raw body, byte for byte.
    let mut message = timestamp.into_bytes();
    message.extend_from_slice(&req.body);
    let expected = hex::encode(signing::hmac_sha256(secret.as_bytes(), &message));
    if signatures
        .iter()
        .any(|s| http::constant_time_eq(s.as_bytes(), expected.as_bytes()))
    {
        Ok(())
    } else {
        refuse("Wave-Signature does not match")
    }
}

impl Guest for Wave {
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
                approval_window_ms: setting("approval_window_ms")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(DEFAULT_APPROVAL_WINDOW_MS),
                status_per_second: 0,
            })
            .collect()
    }

    fn initiate(req: InitiateRequest) -> Result<Initiated, AdapterError> {
        let api = Api::of(&req.operator)?;
        let Some(return_url) = req.return_url.clone() else {
            return Err(AdapterError::Rejected(
                "Wave needs a return URL for the customer".into(),
            ));
        };
        let restrict = setting("restrict_payer_mobile").is_some_and(|v| v == "true");
        let body = transformers::CreateSession {
            amount: req.amount.to_string(),
            currency: req.currency.clone(),
            success_url: return_url.clone(),
            error_url: return_url,
            client_reference: req.payment_id.clone(),
            restrict_payer_mobile: req.phone.clone().filter(|_| restrict),
        };
        let resp = api.send(
            "POST",
            "/v1/checkout/sessions",
            Vec::new(),
            Some(serde_json::to_vec(&body).expect("wire types serialise")),
        )?;
        match resp.status {
            200 | 201 => {
                let session: Session = transformers::parse("checkout session", &resp.body)
                    .map_err(AdapterError::InvalidResponse)?;
                let url = session.wave_launch_url.ok_or_else(|| {
                    AdapterError::InvalidResponse("checkout session without wave_launch_url".into())
                })?;
                Ok(Initiated::Redirect(Redirect {
                    psp_reference: session.id,
                    url,
                }))
            }
            // Refused because of us (key, path, throttling): not the customer's refusal.
            401 | 403 | 404 | 429 => Err(unexpected(&resp)),
            400..=499 => Ok(Initiated::Refused(transformers::refusal(
                resp.status,
                &resp.body,
            ))),
            _ => Err(unexpected(&resp)),
        }
    }

    fn confirm_otp(_payment: OperationRef, _otp: String) -> Result<OtpOutcome, AdapterError> {
        Err(AdapterError::NotSupported(
            "Wave payments are made on Wave's checkout page".into(),
        ))
    }

    fn status(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        let api = Api::of(&payment.operator)?;
        match api.session(&payment)? {
            Some(s) => transformers::session_status(&s).map_err(AdapterError::InvalidResponse),
            // No session under our id: the creating request never reached Wave, or is
            // still in flight (the caller decides when this is final).
            None => Ok(PspStatus::NotFound),
        }
    }

    /// Expires the checkout session so it can no longer be paid. If Wave
    /// refuses (already paid or expired), report the session as it is.
    fn cancel(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        let api = Api::of(&payment.operator)?;
        let Some(session) = api.session(&payment)? else {
            return Ok(PspStatus::NotFound);
        };
        let resp = api.send(
            "POST",
            &format!("/v1/checkout/sessions/{}/expire", session.id),
            Vec::new(),
            None,
        )?;
        match resp.status {
            200 | 204 => Ok(PspStatus::Failed(Failure {
                code: "cancelled".into(),
                message: "The Wave checkout session was expired at the merchant's request.".into(),
            })),
            400..=499 => {
                let now: Session = api.get(
                    "checkout session",
                    &format!("/v1/checkout/sessions/{}", session.id),
                )?;
                transformers::session_status(&now).map_err(AdapterError::InvalidResponse)
            }
            _ => Err(unexpected(&resp)),
        }
    }

    fn refund(req: RefundRequest) -> Result<Started, AdapterError> {
        let api = Api::of(&req.payment.operator)?;
        if req.amount != req.payment.amount {
            return Err(AdapterError::NotSupported(
                "Wave refunds whole checkout sessions only, not part of one".into(),
            ));
        }
        // Finding the session is a read: if it fails, no refund was sent.
        let session = api
            .session(&req.payment)
            .map_err(|e| AdapterError::NotSent(format!("{e:?}")))?
            .ok_or_else(|| {
                AdapterError::Rejected("no Wave checkout session for this payment".into())
            })?;
        let resp = api.send(
            "POST",
            &format!("/v1/checkout/sessions/{}/refund", session.id),
            Vec::new(),
            None,
        )?;
        match resp.status {
            // Synchronous at Wave: a 200 means the whole session's money went back.
            200 | 204 => Ok(Started {
                status: PspStatus::Completed(
                    session.settled().map_err(AdapterError::InvalidResponse)?,
                ),
                psp_reference: session.id,
            }),
            _ => Err(unexpected(&resp)),
        }
    }

    fn refund_status(_refund: OperationRef) -> Result<PspStatus, AdapterError> {
        Err(AdapterError::NotSupported(
            "Wave refunds are synchronous and have no status to query; check a timed-out refund in the Wave Business Portal".into(),
        ))
    }

    fn payout(req: PayoutRequest) -> Result<Started, AdapterError> {
        let api = Api::payouts(&req.operator)?;
        let body = transformers::CreatePayout {
            currency: req.currency.clone(),
            receive_amount: req.amount.to_string(),
            mobile: req.phone.clone(),
            name: req.beneficiary_name.clone(),
            client_reference: req.payout_id.clone(),
            payment_reason: req.reference.chars().take(40).collect(),
        };
        // The same key on a retry returns the same payout instead of paying twice.
        let resp = api.send(
            "POST",
            "/v1/payout",
            vec![("idempotency-key".into(), req.payout_id.clone())],
            Some(serde_json::to_vec(&body).expect("wire types serialise")),
        )?;
        match resp.status {
            200 | 201 => {
                let payout: Payout = transformers::parse("payout", &resp.body)
                    .map_err(AdapterError::InvalidResponse)?;
                Ok(Started {
                    status: transformers::payout_status(&payout)
                        .map_err(AdapterError::InvalidResponse)?,
                    psp_reference: payout.id,
                })
            }
            _ => Err(unexpected(&resp)),
        }
    }

    fn payout_status(payout: OperationRef) -> Result<PspStatus, AdapterError> {
        let api = Api::payouts(&payout.operator)?;
        let found: Option<Payout> = match &payout.psp_reference {
            Some(id) => Some(api.get("payout", &format!("/v1/payout/{id}"))?),
            None => api
                .get::<Search<Payout>>(
                    "payout search",
                    &format!(
                        "/v1/payouts/search?client_reference={}",
                        http::encode_component(&payout.id)
                    ),
                )?
                .result
                .pop(),
        };
        match found {
            Some(p) => transformers::payout_status(&p).map_err(AdapterError::InvalidResponse),
            None => Ok(PspStatus::NotFound),
        }
    }

    /// A signed webhook. Checkout events carry the session: we report its
    /// state (a failed attempt in an open session stays pending). Other event
    /// types are acknowledged and ignored so Wave stops resending them.
    /// This provider offers no prediction.
    fn predict(_phone: String) -> Result<Option<String>, AdapterError> {
        Ok(None)
    }

    fn parse_callback(req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        if req.method != "POST" {
            return Err(AdapterError::Rejected(format!(
                "Wave webhooks are POST, not {}",
                req.method
            )));
        }
        verify_signature(&req)?;
        let event: transformers::Event =
            transformers::parse("webhook", &req.body).map_err(AdapterError::InvalidResponse)?;
        if !event.kind.starts_with("checkout.session.") {
            log::log(
                log::Level::Info,
                &format!("Wave event {} of type {} ignored", event.id, event.kind),
            );
            return Ok(Vec::new());
        }
        let session: Session = serde_json::from_value(event.data).map_err(|e| {
            AdapterError::InvalidResponse(format!(
                "Wave event {}: unreadable session: {e}",
                event.id
            ))
        })?;
        Ok(vec![CallbackUpdate {
            kind: SubjectKind::Payment,
            id: session.client_reference.clone(),
            status: transformers::session_status(&session)
                .map_err(AdapterError::InvalidResponse)?,
            psp_reference: Some(session.id),
        }])
    }
}

export!(Wave);
