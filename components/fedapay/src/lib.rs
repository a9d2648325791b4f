//! Live adapter for FedaPay (a Benin aggregator, API v1): by default
//! `celtiis-bj` (no-redirect push, mode `sbin`) and `coris-bj` (FedaPay's
//! payment page), and with the `operators` setting any operator FedaPay
//! documents for collection: MTN, Moov, Celtiis, Coris Money in Benin; Moov
//! and Mixx by Yas in Togo; MTN, Moov, Wave, Orange in Côte d'Ivoire.
//!
//! - A payment is a FedaPay transaction: created (`POST /v1/transactions`,
//!   our id in `custom_metadata`), given a token (`POST …/{id}/token`), then
//!   either pushed to the phone (`POST /v1/{mode}`, the no-redirect modes) or
//!   paid on FedaPay's page (the token's `url`, everything else: FedaPay does
//!   not document a no-redirect mode or an OTP flow for Coris Money, Moov CI,
//!   Wave or Orange). Creating and tokenising move no money, so their
//!   failures are `not-sent`; the push is the money-moving call and its
//!   failures follow the money rule.
//! - FedaPay ids are its own integers. FedaPay documents no lookup by a
//!   merchant reference: a payment whose push answer was lost is found with
//!   the transaction search (`GET /v1/transactions/search`), keeping only
//!   the transaction whose `custom_metadata` carries our id, and, since how
//!   that search matches is not documented, then in the transaction list,
//!   read back to the payment's creation before "not found" is said.
//! - Webhooks are set once in FedaPay's dashboard (one URL for every
//!   operator) and signed `X-FEDAPAY-SIGNATURE: t=<ts>,s=<hex>` =
//!   HMAC-SHA256(webhook secret, `<ts>.<raw body>`), as FedaPay's official
//!   libraries verify. The signed entity is believed; only final states are
//!   reported (a `pending` event says nothing about a push).
//! - No refund API and no way to withdraw a transaction are documented:
//!   `refund` is `not-supported`, `cancel` reports the status.
//!
//! Settings: `base_url` (required), `timeout_ms`, `operators`, `mode.<slug>`
//! (FedaPay's mode name, or `page`), `payout_mode.<slug>`,
//! `approval_window_ms`, `webhook_tolerance_seconds`. Secrets: `secret_key`,
//! `webhook_secret`.

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
use mmc::platform::{cache, clock, config, log, signing};
use mmc_domain::{Operator, http};
use transformers::{Payout, Token, Transaction};

/// Every operator FedaPay documents for collection in our three countries.
const DOCUMENTED: &[&str] = &[
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
];

/// Served without an `operators` setting: the ones nobody else routes.
const DEFAULT_SERVED: &[&str] = &["celtiis-bj", "coris-bj"];

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

/// `GET /v1/currencies` gets at most this long (`describe` must answer).
const CURRENCIES_TIMEOUT_MS: u32 = 3_000;
/// How long its answer is kept in the host's cache (setting `currencies_ttl_ms`).
const DEFAULT_CURRENCIES_TTL_MS: u64 = 300_000;

/// The modes FedaPay lists for XOF on this account; `None` when they cannot
/// be had (never an error: `describe` must answer, and the operator table
/// then stands). FedaPay publishes no limits or operational status, only
/// these modes.
fn xof_modes() -> Option<Vec<String>> {
    let modes = currencies().and_then(|c| transformers::xof_modes(&c));
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

/// The account's currencies, from the cache or `GET /v1/currencies`; `None`
/// when they cannot be had.
fn currencies() -> Option<Vec<transformers::CurrencyModes>> {
    let base_url = setting("base_url")?;
    let base_url = base_url.trim_end_matches('/');
    let key = secret("secret_key")?;
    // Per base URL and key (hashed: the cache is no place for secrets).
    let account: String = signing::sha256(key.as_bytes())[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let cache_key = format!("currencies:{base_url}:{account}");
    if let Some(listed) = cache::get(&cache_key).and_then(|b| serde_json::from_slice(&b).ok()) {
        return Some(listed);
    }
    let req = HttpRequest {
        method: "GET".into(),
        url: format!("{base_url}/v1/currencies"),
        headers: vec![
            ("Authorization".into(), format!("Bearer {key}")),
            ("Accept".into(), "application/json".into()),
        ],
        body: Vec::new(),
        timeout_ms: CURRENCIES_TIMEOUT_MS,
    };
    let read = match outbound_http::send(&req) {
        Ok(resp) if resp.status == 200 => {
            transformers::many::<transformers::CurrencyModes>("currencies", &resp.body)
        }
        Ok(resp) => Err(format!(
            "FedaPay answered {} to GET /v1/currencies: {}",
            resp.status,
            http::excerpt(&resp.body)
        )),
        Err(e) => Err(format!("GET /v1/currencies failed: {e:?}")),
    };
    match read {
        Ok(listed) => {
            let ttl = setting("currencies_ttl_ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(DEFAULT_CURRENCIES_TTL_MS);
            if let Ok(bytes) = serde_json::to_vec(&listed) {
                cache::set(&cache_key, &bytes, ttl);
            }
            Some(listed)
        }
        Err(e) => {
            log::log(
                log::Level::Warn,
                &format!("FedaPay's currencies unavailable: {e}"),
            );
            None
        }
    }
}

/// FedaPay does not say how long a pending transaction can still be paid
/// (its page stays usable and a prompt may be approved late): a wide window,
/// so expiry never gives up on a payment that may still be approved.
/// Setting `approval_window_ms`.
const DEFAULT_APPROVAL_WINDOW_MS: u64 = 30 * 60 * 1000;
const DEFAULT_TOLERANCE_S: u64 = 300;
/// How far FedaPay's lists are read for an operation its search did not
/// find, and the clock difference allowed between our id's time and
/// FedaPay's `created_at`.
const LIST_PAGES: u32 = 5;
const LIST_PER_PAGE: u32 = 100;
const CLOCK_MARGIN_MS: u64 = 10 * 60 * 1000;

struct FedaPay;

fn failure(code: &str, message: &str) -> Failure {
    Failure {
        code: code.into(),
        message: message.into(),
    }
}

fn setting(key: &str) -> Option<String> {
    config::get(key).filter(|v| !v.trim().is_empty())
}

fn secret(key: &str) -> Option<String> {
    config::secret(key).filter(|v| !v.is_empty())
}

fn served() -> Vec<&'static Operator> {
    let wanted = setting("operators");
    DOCUMENTED
        .iter()
        .filter(|slug| match wanted.as_deref() {
            Some(w) => w.split(',').any(|s| s.trim() == **slug),
            None => DEFAULT_SERVED.contains(slug),
        })
        .filter_map(|slug| mmc_domain::operators::find(slug))
        .collect()
}

/// How a served operator is paid: pushed in one of FedaPay's no-redirect
/// modes, or on FedaPay's page.
enum Route {
    Push(String),
    Page,
}

fn route(op: &Operator) -> Route {
    let mode = setting(&format!("mode.{}", op.slug))
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
    setting(&format!("payout_mode.{}", op.slug)).or(match route(op) {
        Route::Push(mode) => Some(mode),
        Route::Page => None,
    })
}

/// FedaPay ids are integers; anything else was not issued by FedaPay.
fn fedapay_id(reference: Option<&str>) -> Option<&str> {
    reference.filter(|r| !r.is_empty() && r.len() <= 20 && r.bytes().all(|b| b.is_ascii_digit()))
}

/// Refused because of us (wrong key, path or pace): nothing was performed,
/// and it is not the customer's refusal either.
fn refused_because_of_us(status: u16) -> bool {
    matches!(status, 401 | 403 | 404 | 429)
}

fn unexpected(resp: &HttpResponse) -> AdapterError {
    match resp.status {
        401 | 403 => AdapterError::Rejected(format!(
            "FedaPay refused our secret key ({}): {}",
            resp.status,
            http::excerpt(&resp.body)
        )),
        400..=499 => AdapterError::Rejected(transformers::refusal(resp.status, &resp.body).message),
        s => AdapterError::InvalidResponse(format!(
            "FedaPay answered {s} unexpectedly: {}",
            http::excerpt(&resp.body)
        )),
    }
}

/// A failure of a call made before the money-moving one: nothing can have
/// been paid, whatever the error says.
fn before_money(what: &'static str) -> impl Fn(AdapterError) -> AdapterError {
    move |e| match e {
        AdapterError::NotSupported(_) | AdapterError::NotSent(_) | AdapterError::Rejected(_) => e,
        e => AdapterError::NotSent(format!(
            "{what} failed, so nothing was asked of the customer: {e:?}"
        )),
    }
}

/// FedaPay's API for one served operator.
struct Api {
    op: &'static Operator,
    base_url: String,
    key: String,
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
        let key = secret("secret_key")
            .ok_or_else(|| AdapterError::NotSent("secret secret_key not configured".into()))?;
        Ok(Api {
            op,
            base_url: base_url.trim_end_matches('/').to_string(),
            key,
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
        let mut headers = vec![
            ("Authorization".into(), format!("Bearer {}", self.key)),
            ("Accept".into(), "application/json".into()),
        ];
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
        mmc_domain::exchange!(outbound_http::send(&req), "FedaPay", method, path;
            CapabilityError, AdapterError)
    }

    fn post(&self, path: &str, body: &impl serde::Serialize) -> Result<HttpResponse, AdapterError> {
        self.send(
            "POST",
            path,
            Some(serde_json::to_vec(body).expect("wire types serialise")),
        )
    }

    /// `GET /v1/{kind}s/{id}` (`kind`: `transaction`, `payout`); 404: none.
    fn get<T: serde::de::DeserializeOwned>(
        &self,
        kind: &str,
        id: &str,
    ) -> Result<Option<T>, AdapterError> {
        let resp = self.send("GET", &format!("/v1/{kind}s/{id}"), None)?;
        match resp.status {
            200 => transformers::one(kind, &resp.body)
                .map(Some)
                .map_err(AdapterError::InvalidResponse),
            404 => Ok(None),
            _ => Err(unexpected(&resp)),
        }
    }

    /// The `kind` whose `custom_metadata` carries `our_id`, found with the
    /// documented search. Several would be our bug; a final one wins.
    fn search<T: serde::de::DeserializeOwned>(
        &self,
        kind: &str,
        our_id: &str,
        metadata: impl Fn(&T) -> &Option<serde_json::Value>,
        is_final: impl Fn(&T) -> bool,
    ) -> Result<Option<T>, AdapterError> {
        let path = format!(
            "/v1/{kind}s/search?search={}",
            http::encode_component(our_id)
        );
        let resp = self.send("GET", &path, None)?;
        if resp.status != 200 {
            return Err(unexpected(&resp));
        }
        let found: Vec<T> = transformers::many(&format!("{kind}s"), &resp.body)
            .map_err(AdapterError::InvalidResponse)?;
        let mut ours: Vec<T> = found
            .into_iter()
            .filter(|t| transformers::our_id(metadata(t)).as_deref() == Some(our_id))
            .collect();
        Ok(match ours.iter().position(&is_final) {
            Some(i) => Some(ours.swap_remove(i)),
            None => ours.pop(),
        })
    }

    /// The transaction of a payment: by FedaPay's id when we have it, else by
    /// our id (e.g. after a push whose answer was lost): FedaPay's search,
    /// then its list.
    fn transaction(&self, payment: &OperationRef) -> Result<Option<Transaction>, AdapterError> {
        if let Some(id) = fedapay_id(payment.psp_reference.as_deref()) {
            return self.get("transaction", id);
        }
        let metadata = Transaction::metadata;
        let found = self.search("transaction", &payment.id, metadata, |t| {
            transformers::transaction_final(t)
        });
        match found {
            Ok(Some(t)) => Ok(Some(t)),
            // How the search matches is not documented (nor that it exists
            // on every account): an answer without us proves nothing yet.
            Ok(None) | Err(AdapterError::Rejected(_)) => {
                self.listed("transaction", &payment.id, metadata, Transaction::created)
            }
            Err(e) => Err(e),
        }
    }

    /// `PUT /v1/payouts/start` for a created payout: the call that sends money.
    fn start_payout(&self, id: u64) -> Result<Started, AdapterError> {
        let start = transformers::StartPayouts {
            payouts: vec![transformers::StartItem { id, send_now: true }],
        };
        let resp = self.send(
            "PUT",
            "/v1/payouts/start",
            Some(serde_json::to_vec(&start).expect("wire types serialise")),
        )?;
        let status = match resp.status {
            200..=299 => match transformers::many::<Payout>("payouts", &resp.body)
                .map_err(AdapterError::InvalidResponse)?
                .iter()
                .find(|p| p.id == id)
            {
                Some(p) => transformers::payout_status(p, &iso_of)
                    .map_err(AdapterError::InvalidResponse)?,
                None => PspStatus::Pending,
            },
            s if refused_because_of_us(s) => return Err(unexpected(&resp)),
            // Refused: the payout was never started, nothing was sent.
            400..=499 => PspStatus::Failed(transformers::refusal(resp.status, &resp.body)),
            _ => return Err(unexpected(&resp)),
        };
        Ok(Started {
            psp_reference: id.to_string(),
            status,
        })
    }

    fn payout(&self, payout: &OperationRef) -> Result<Option<Payout>, AdapterError> {
        if let Some(id) = fedapay_id(payout.psp_reference.as_deref()) {
            return self.get("payout", id);
        }
        let metadata = Payout::metadata;
        let found = self.search("payout", &payout.id, metadata, |p| {
            transformers::payout_final(p)
        });
        match found {
            Ok(Some(p)) => Ok(Some(p)),
            Ok(None) | Err(AdapterError::Rejected(_)) => {
                self.listed("payout", &payout.id, metadata, Payout::created)
            }
            Err(e) => Err(e),
        }
    }

    /// Ours in FedaPay's list (`GET /v1/{kind}s`, `per_page`, `page`). Only
    /// a list read to its end, or (ids that are UUIDv7, like payment ids,
    /// carry their creation time) back past our creation in newest-first
    /// order, proves it absent; otherwise the answer stays unknown.
    fn listed<T: serde::de::DeserializeOwned + Clone>(
        &self,
        kind: &str,
        our_id: &str,
        metadata: impl Fn(&T) -> &Option<serde_json::Value>,
        created_at: impl Fn(&T) -> Option<&str>,
    ) -> Result<Option<T>, AdapterError> {
        let since = transformers::uuid7_ms(our_id)
            .map(|ms| mmc_domain::time::rfc3339(ms.saturating_sub(CLOCK_MARGIN_MS)));
        let since = since.as_deref().map(|s| &s[..19]);
        let mut previous: Option<String> = None;
        for page in 1..=LIST_PAGES {
            let path = format!("/v1/{kind}s?per_page={LIST_PER_PAGE}&page={page}");
            let resp = self.send("GET", &path, None)?;
            if resp.status != 200 {
                return Err(unexpected(&resp));
            }
            let items: Vec<T> = transformers::many(&format!("{kind}s"), &resp.body)
                .map_err(AdapterError::InvalidResponse)?;
            if let Some(t) = items
                .iter()
                .find(|t| transformers::our_id(metadata(t)).as_deref() == Some(our_id))
            {
                return Ok(Some(t.clone()));
            }
            if items.is_empty() {
                return Ok(None); // the whole list was read
            }
            let Some(since) = since else {
                continue;
            };
            let times: Option<Vec<&str>> = items
                .iter()
                .map(|t| transformers::utc_second(created_at(t)))
                .collect();
            let in_order = times.filter(|ts| {
                ts.windows(2).all(|w| w[0] >= w[1])
                    && previous.as_deref().is_none_or(|p| p >= ts[0])
            });
            let Some(times) = in_order else {
                return Err(AdapterError::InvalidResponse(format!(
                    "FedaPay's {kind} list is not newest first in UTC: the absence of {our_id} cannot be told"
                )));
            };
            let oldest = times[times.len() - 1];
            if oldest < since {
                return Ok(None); // read back past our creation
            }
            previous = Some(oldest.to_string());
        }
        Err(AdapterError::InvalidResponse(format!(
            "no FedaPay {kind} for {our_id} in its search nor in its {} most recent: not known yet",
            LIST_PAGES * LIST_PER_PAGE
        )))
    }

    /// Creates the transaction and its token: both move no money.
    fn prepare(
        &self,
        req: &InitiateRequest,
    ) -> Result<Result<(u64, Token), Failure>, AdapterError> {
        let body = transformers::CreateTransaction {
            description: req
                .description
                .clone()
                .filter(|d| !d.trim().is_empty())
                .unwrap_or_else(|| req.reference.clone())
                .chars()
                .take(255)
                .collect(),
            amount: req.amount,
            currency: transformers::Currency {
                iso: req.currency.clone(),
            },
            callback_url: req.return_url.clone(),
            customer: req.phone.as_deref().map(|p| transformers::Customer {
                phone_number: Some(transformers::PhoneNumber::new(p, &req.country)),
                ..Default::default()
            }),
            custom_metadata: transformers::metadata(&req.payment_id),
        };
        let resp = self
            .post("/v1/transactions", &body)
            .map_err(before_money("creating the FedaPay transaction"))?;
        let created: Transaction = match resp.status {
            200 | 201 => transformers::one("transaction", &resp.body).map_err(|e| {
                before_money("creating the FedaPay transaction")(AdapterError::InvalidResponse(e))
            })?,
            s if refused_because_of_us(s) => return Err(unexpected(&resp)),
            400..=499 => return Ok(Err(transformers::refusal(resp.status, &resp.body))),
            _ => {
                return Err(before_money("creating the FedaPay transaction")(
                    unexpected(&resp),
                ));
            }
        };
        let resp = self
            .send(
                "POST",
                &format!("/v1/transactions/{}/token", created.id),
                Some(b"{}".to_vec()),
            )
            .map_err(before_money("getting the FedaPay payment token"))?;
        match resp.status {
            200 | 201 => transformers::parse::<Token>("token", &resp.body)
                .map(|t| Ok((created.id, t)))
                .map_err(|e| {
                    before_money("getting the FedaPay payment token")(
                        AdapterError::InvalidResponse(e),
                    )
                }),
            s if refused_because_of_us(s) => Err(unexpected(&resp)),
            400..=499 => Ok(Err(transformers::refusal(resp.status, &resp.body))),
            _ => Err(before_money("getting the FedaPay payment token")(
                unexpected(&resp),
            )),
        }
    }
}

/// Checks `X-FEDAPAY-SIGNATURE` against the raw body and the clock.
fn verify_signature(req: &Inbound) -> Result<(), AdapterError> {
    let refuse = |m: &str| Err(AdapterError::Unauthenticated(m.into()));
    let Some(secret) = secret("webhook_secret") else {
        // Never accept what we cannot check.
        return refuse("webhook_secret not configured");
    };
    let Some(header) = req
        .headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("x-fedapay-signature"))
        .map(|(_, v)| v.as_str())
    else {
        return refuse("no X-FEDAPAY-SIGNATURE header");
    };
    let Some((timestamp, signatures)) = transformers::parse_signature_header(header) else {
        return refuse("malformed X-FEDAPAY-SIGNATURE header");
    };
    let tolerance = setting("webhook_tolerance_seconds")
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_TOLERANCE_S);
    let sent_s: u64 = timestamp.parse().unwrap_or(0);
    if (clock::now_ms() / 1000).abs_diff(sent_s) > tolerance {
        return refuse(
            "X-FEDAPAY-SIGNATURE timestamp outside the tolerance (replayed or clock skew)",
        );
    }
    // Signed: the timestamp, a dot, then the raw body byte for byte.
    let mut message = timestamp.into_bytes();
    message.push(b'.');
    message.extend_from_slice(&req.body);
    let expected = hex::encode(signing::hmac_sha256(secret.as_bytes(), &message));
    if signatures
        .iter()
        .any(|s| http::constant_time_eq(s.as_bytes(), expected.as_bytes()))
    {
        Ok(())
    } else {
        refuse("X-FEDAPAY-SIGNATURE does not match")
    }
}

impl Guest for FedaPay {
    fn describe() -> Vec<OperatorInfo> {
        let ops = served();
        let modes = if ops.is_empty() { None } else { xof_modes() };
        ops.into_iter()
            .map(|op| OperatorInfo {
                slug: op.slug.into(),
                name: op.name.into(),
                aliases: op.aliases.iter().map(|a| a.to_string()).collect(),
                country: op.country.code().into(),
                currency: op.currency().into(),
                // No FedaPay mode takes a one-time code: a Coris payment is
                // confirmed on FedaPay's page, never with `confirm-otp`, and
                // the catalogue says what the provider does.
                requires_otp: false,
                modes: vec!["direct".into(), "hosted".into()],
                min_amount: op.min_amount,
                max_amount: op.max_amount,
                // A push mode FedaPay does not list for XOF on this account would be
                // refused: closed, so nothing is sent. The page picks among the listed ones.
                status: match (&modes, route(op)) {
                    (Some(listed), Route::Push(mode)) if !listed.contains(&mode) => "closed",
                    _ => "operational",
                }
                .into(),
                approval_window_ms: setting("approval_window_ms")
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(DEFAULT_APPROVAL_WINDOW_MS),
                status_per_second: 0,
            })
            .collect()
    }

    fn initiate(req: InitiateRequest) -> Result<Initiated, AdapterError> {
        let api = Api::of(&req.operator)?;
        let route = route(api.op);
        if matches!(route, Route::Push(_)) && req.phone.is_none() {
            return Ok(Initiated::Refused(failure(
                "phone_required",
                "Mobile money needs the customer's phone number.",
            )));
        }
        let (id, token) = match api.prepare(&req)? {
            Ok(prepared) => prepared,
            Err(refused) => return Ok(Initiated::Refused(refused)),
        };
        let mode = match route {
            Route::Page => {
                return Ok(Initiated::Redirect(Redirect {
                    psp_reference: id.to_string(),
                    url: token.url,
                }));
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
        let resp = api.post(&format!("/v1/{mode}"), &push)?;
        match resp.status {
            200..=299 => {
                // Its body is not used, but an unreadable one is not an answer.
                transformers::parse::<serde_json::Value>("push answer", &resp.body)
                    .map_err(AdapterError::InvalidResponse)?;
                Ok(Initiated::AwaitingCustomer(id.to_string()))
            }
            s if refused_because_of_us(s) => Err(unexpected(&resp)),
            400..=499 => Ok(Initiated::Refused(transformers::refusal(
                resp.status,
                &resp.body,
            ))),
            _ => Err(unexpected(&resp)),
        }
    }

    fn confirm_otp(_payment: OperationRef, _otp: String) -> Result<OtpOutcome, AdapterError> {
        Err(AdapterError::NotSupported(
            "FedaPay payments are approved on the phone or on FedaPay's page, not with a one-time code sent here".into(),
        ))
    }

    fn status(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        let api = Api::of(&payment.operator)?;
        match api.transaction(&payment)? {
            Some(t) => {
                transformers::transaction_status(&t, &iso_of).map_err(AdapterError::InvalidResponse)
            }
            // Nothing under our id: never created, or still in flight (the
            // caller decides when this is final).
            None => Ok(PspStatus::NotFound),
        }
    }

    /// FedaPay documents no way to withdraw a transaction: report where it
    /// stands (pending means the customer may still pay it).
    fn cancel(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        Self::status(payment)
    }

    fn refund(_req: RefundRequest) -> Result<Started, AdapterError> {
        Err(AdapterError::NotSupported(
            "FedaPay documents no refund API: refund from FedaPay's dashboard".into(),
        ))
    }

    fn refund_status(_refund: OperationRef) -> Result<PspStatus, AdapterError> {
        Err(AdapterError::NotSupported(
            "FedaPay documents no refund API".into(),
        ))
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
        let earlier = api
            .payout(&OperationRef {
                id: req.payout_id.clone(),
                operator: req.operator.clone(),
                environment: req.environment.clone(),
                psp_reference: None,
                phone: Some(req.phone.clone()),
                amount: req.amount,
                currency: req.currency.clone(),
            })
            .map_err(|e| {
                AdapterError::Unavailable(format!(
                    "could not tell whether an earlier attempt created this FedaPay payout: {e:?}"
                ))
            })?;
        if let Some(p) = earlier {
            if p.status != "pending" {
                return Ok(Started {
                    psp_reference: p.id.to_string(),
                    status: transformers::payout_status(&p, &iso_of)
                        .map_err(AdapterError::InvalidResponse)?,
                });
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
            description: req.reference.chars().take(255).collect(),
            custom_metadata: transformers::metadata(&req.payout_id),
        };
        // Creating a payout sends nothing: only starting it does.
        let resp = api
            .post("/v1/payouts", &body)
            .map_err(before_money("creating the FedaPay payout"))?;
        let created: Payout = match resp.status {
            200 | 201 => transformers::one("payout", &resp.body).map_err(|e| {
                before_money("creating the FedaPay payout")(AdapterError::InvalidResponse(e))
            })?,
            _ => {
                return Err(before_money("creating the FedaPay payout")(unexpected(
                    &resp,
                )));
            }
        };
        api.start_payout(created.id)
    }

    fn payout_status(payout: OperationRef) -> Result<PspStatus, AdapterError> {
        let api = Api::of(&payout.operator)?;
        match api.payout(&payout)? {
            Some(p) => {
                transformers::payout_status(&p, &iso_of).map_err(AdapterError::InvalidResponse)
            }
            None => Ok(PspStatus::NotFound),
        }
    }

    /// A signed webhook. Final transaction (or payout) states are reported
    /// with our id from `custom_metadata`; other events are acknowledged
    /// and ignored.
    /// This provider offers no prediction.
    fn predict(_phone: String) -> Result<Option<String>, AdapterError> {
        Ok(None)
    }

    fn parse_callback(req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        if req.method != "POST" {
            return Err(AdapterError::Rejected(format!(
                "FedaPay webhooks are POST, not {}",
                req.method
            )));
        }
        verify_signature(&req)?;
        let event: transformers::Event =
            transformers::parse("webhook", &req.body).map_err(AdapterError::InvalidResponse)?;
        let name = event.name.or(event.kind).unwrap_or_default();
        let entity = event.entity.unwrap_or_default();
        let unreadable = |e: serde_json::Error| {
            AdapterError::InvalidResponse(format!("FedaPay event {name}: unreadable entity: {e}"))
        };
        let (kind, id, psp_reference, status) = if name.starts_with("transaction.") {
            let t: Transaction = serde_json::from_value(entity).map_err(unreadable)?;
            let status = transformers::transaction_status(&t, &iso_of)
                .map_err(AdapterError::InvalidResponse)?;
            (
                SubjectKind::Payment,
                transformers::our_id(&t.custom_metadata),
                t.id,
                status,
            )
        } else if name.starts_with("payout.") {
            let p: Payout = serde_json::from_value(entity).map_err(unreadable)?;
            let status =
                transformers::payout_status(&p, &iso_of).map_err(AdapterError::InvalidResponse)?;
            (
                SubjectKind::Payout,
                transformers::our_id(&p.custom_metadata),
                p.id,
                status,
            )
        } else {
            log::log(log::Level::Info, &format!("FedaPay event {name} ignored"));
            return Ok(Vec::new());
        };
        // `created`/`updated` while pending: nothing final, and no proof a
        // push was ever sent.
        if matches!(status, PspStatus::Pending) {
            return Ok(Vec::new());
        }
        Ok(vec![CallbackUpdate {
            kind,
            id,
            psp_reference: Some(psp_reference.to_string()),
            status,
        }])
    }
}

export!(FedaPay);
