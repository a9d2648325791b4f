//! Live adapter for Wave Côte d'Ivoire (`wave-ci`): Checkout for payments
//! (hosted even in `direct` mode: `initiate` answers `redirect` to Wave's
//! `wave_launch_url`), Payout for payouts. How its protocol is mapped, its
//! settings and secrets: `docs/operators.md`.

pub mod transformers;

use mmc_adapter_kit::books::{Balance, BooksInfo, Page, StatementPage};
use mmc_adapter_kit::exchange::{
    Endpoint, OrUnknown, Provider, before_sending, coded_refusal, json,
};
use mmc_adapter_kit::spec::Spec;
use mmc_adapter_kit::types::*;
use mmc_adapter_kit::webhook::{self, Hmac};
use mmc_adapter_kit::{Adapter, cache, failure, log, lookup, redirect, settings, started, wire};
use mmc_domain::http;
use transformers::{Payout, Search, Session};

static SPEC: Spec = Spec {
    provider: "Wave",
    family: &["wave-ci"],
    default_served: None,
    // A checkout session can be paid until it expires at Wave (`when_expires`,
    // 30 minutes by default) unless we expire it first, which cancel and expiry do.
    approval_window_ms: 30 * 60 * 1000,
    status_per_second: 0,
};

static WAVE: Provider = Provider {
    name: "Wave",
    credential: Some("API key"),
    refusal: |status, body| coded_refusal("Wave", status, body),
};

/// `Wave-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]`, signed over the
/// timestamp immediately followed by the raw body.
const SIGNATURE: Hmac = Hmac {
    header: "Wave-Signature",
    signature_key: "v1",
    separator: "",
};

pub struct Wave;

/// The Checkout API (collections, refunds, expiry) for a served operator.
fn checkout(operator: &str) -> Result<Endpoint, AdapterError> {
    SPEC.market(operator)?.bearer_endpoint(&WAVE, "api_key")
}

/// The Payout API. Wave scopes each API key to the APIs chosen for it in
/// the Business Portal: `payout_api_key` when the payout key is another one,
/// else `api_key` (a key allowed both).
fn payouts(operator: &str) -> Result<Endpoint, AdapterError> {
    let own_key = settings::market_secret(operator, "payout_api_key").is_some();
    let key = if own_key { "payout_api_key" } else { "api_key" };
    SPEC.market(operator)?.bearer_endpoint(&WAVE, key)
}

/// The Balance & Reconciliation API of the wallet the served operator's key
/// is bound to: `balance_api_key` when that key is another one.
fn balance_api() -> Result<(Endpoint, &'static str), AdapterError> {
    let market = SPEC.account_market()?;
    let slug = market.op.slug;
    let own_key = settings::market_secret(slug, "balance_api_key").is_some();
    let key = if own_key {
        "balance_api_key"
    } else {
        "api_key"
    };
    Ok((market.bearer_endpoint(&WAVE, key)?, slug))
}

/// Where a statement read stands: the day (Wave lists one per call) and the
/// page after which to go on, as `<date>[ <after>]`.
fn statement_cursor(cursor: Option<&str>, from_ms: u64) -> (String, Option<String>) {
    match cursor.map(|c| c.split_once(' ')) {
        Some(Some((date, after))) => (date.to_string(), Some(after.to_string())),
        Some(None) => (cursor.unwrap_or_default().to_string(), None),
        None => (mmc_adapter_kit::mmc_domain::time::date(from_ms), None),
    }
}

/// Where Wave keeps one kind of object (checkout sessions, payouts).
struct Resource {
    /// As errors name it.
    what: &'static str,
    /// `{path}/{Wave's id}`.
    path: &'static str,
    /// `{search}?client_reference={our id}`.
    search: &'static str,
}

const SESSIONS: Resource = Resource {
    what: "checkout session",
    path: "/v1/checkout/sessions",
    search: "/v1/checkout/sessions/search",
};

const PAYOUTS: Resource = Resource {
    what: "payout",
    path: "/v1/payout",
    search: "/v1/payouts/search",
};

impl Resource {
    /// An object of ours: by Wave's id when we have it, else by our id
    /// (`client_reference`), e.g. after a timed-out initiation. Several under
    /// one id of ours would be our bug; `prefer` picks among them.
    fn find<T: serde::de::DeserializeOwned>(
        &self,
        api: &Endpoint,
        op: &OperationRef,
        prefer: impl Fn(&T) -> bool,
    ) -> Result<Option<T>, AdapterError> {
        lookup::find(
            op.psp_reference.as_deref(),
            &op.id,
            |id| api.get(self.what, &format!("{}/{id}", self.path)).map(Some),
            |ours| {
                let query = http::encode_component(ours);
                let path = format!("{}?client_reference={query}", self.search);
                let found: Search<T> = api.get(&format!("{} search", self.what), &path)?;
                Ok(found.result)
            },
            prefer,
        )
    }
}

/// The checkout session of a payment; a paid one wins.
fn session(api: &Endpoint, payment: &OperationRef) -> Result<Option<Session>, AdapterError> {
    SESSIONS.find(api, payment, Session::paid)
}

/// How Wave proves a webhook is its own, as chosen for the webhook in Wave's
/// Business Portal (`webhook_security`).
#[derive(Debug, PartialEq, Eq)]
pub enum WebhookSecurity {
    /// `Wave-Signature`: an HMAC of a timestamp and the body (the default).
    Signing,
    /// The secret itself as `Authorization: Bearer …`: nothing ties it to a
    /// body or a moment, so whoever has seen one header can send any
    /// notification for ever (each still only a hint, asked back at Wave).
    SharedSecret,
}

impl WebhookSecurity {
    pub fn of(setting: Option<&str>) -> WebhookSecurity {
        match setting {
            Some("shared_secret") => WebhookSecurity::SharedSecret,
            _ => WebhookSecurity::Signing,
        }
    }

    fn configured() -> WebhookSecurity {
        WebhookSecurity::of(settings::setting("webhook_security").as_deref())
    }

    /// What is logged when this strategy is in force, if anything.
    pub fn warning(&self) -> Option<&'static str> {
        match self {
            WebhookSecurity::Signing => None,
            WebhookSecurity::SharedSecret => Some(
                "Wave webhooks are checked by a shared secret (webhook_security = shared_secret): \
                 a captured Authorization header lets anyone send notifications for ever; \
                 choose signing in Wave's Business Portal and remove the setting",
            ),
        }
    }
}

/// The weaker strategy is said at load, and again each day while it stays
/// (the host asks `describe` every minute: the cache keeps it to once).
fn warn_of_webhook_security() {
    const SAID: &str = "webhook_security_warned";
    let Some(warning) = WebhookSecurity::configured().warning() else {
        return;
    };
    if cache::get(SAID).is_some() {
        return;
    }
    log::log(log::Level::Warn, warning);
    log::count("webhook_security_shared_secret");
    cache::set(SAID, b"1", 24 * 60 * 60 * 1000);
}

/// Checks a webhook by its security strategy.
fn verify_signature(req: &Inbound) -> Result<(), AdapterError> {
    match WebhookSecurity::configured() {
        WebhookSecurity::SharedSecret => webhook::bearer_secret(req),
        WebhookSecurity::Signing => SIGNATURE.verify(req),
    }
}

impl Adapter for Wave {
    const NO_OTP: &'static str = "payments are made on Wave's checkout page";

    const SPEC: &'static Spec = &SPEC;

    fn describe() -> Vec<OperatorInfo> {
        warn_of_webhook_security();
        SPEC.describe()
    }

    fn initiate(req: InitiateRequest) -> Result<Initiated, AdapterError> {
        let api = checkout(&req.operator)?;
        let Some(return_url) = req.return_url.clone() else {
            return Err(AdapterError::Rejected(
                "Wave needs a return URL for the customer".into(),
            ));
        };
        let restrict = settings::market_setting(&req.operator, "restrict_payer_mobile")
            .is_some_and(|v| v == "true");
        let body = transformers::CreateSession {
            amount: req.amount.to_string(),
            currency: req.currency.clone(),
            success_url: return_url.clone(),
            error_url: return_url,
            client_reference: req.payment_id.clone(),
            restrict_payer_mobile: req.phone.clone().filter(|_| restrict),
        };
        let read = |b: &[u8]| wire::parse::<Session>("Wave checkout session", b);
        let session = match api.submit("/v1/checkout/sessions", &body, [200, 201], read)? {
            Ok(session) => session,
            Err(refused) => return Ok(Initiated::Refused(refused)),
        };
        let url = session.wave_launch_url.ok_or_else(|| {
            AdapterError::InvalidResponse("checkout session without wave_launch_url".into())
        })?;
        Ok(redirect(session.id, url))
    }

    fn status(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        let api = checkout(&payment.operator)?;
        lookup::status_of(session(&api, &payment)?, transformers::session_status)
    }

    /// Expires the checkout session so it can no longer be paid. If Wave
    /// refuses (already paid or expired), report the session as it is.
    fn cancel(payment: OperationRef) -> Result<PspStatus, AdapterError> {
        let api = checkout(&payment.operator)?;
        let Some(session) = session(&api, &payment)? else {
            return Ok(PspStatus::NotFound);
        };
        let path = format!("/v1/checkout/sessions/{}", session.id);
        let resp = api.send("POST", &format!("{path}/expire"), &[], None)?;
        match resp.status {
            200 | 204 => Ok(PspStatus::Failed(failure(
                "cancelled",
                "The Wave checkout session was expired at the merchant's request.",
            ))),
            400..=499 => {
                let now: Session = api.get("checkout session", &path)?;
                transformers::session_status(&now).or_unknown()
            }
            _ => Err(WAVE.unexpected(&resp)),
        }
    }

    fn refund(req: RefundRequest) -> Result<Started, AdapterError> {
        let api = checkout(&req.payment.operator)?;
        if req.amount != req.payment.amount {
            return Err(AdapterError::NotSupported(
                "Wave refunds whole checkout sessions only, not part of one".into(),
            ));
        }
        // Finding the session is a read: if it fails, no refund was sent.
        let session = session(&api, &req.payment)
            .map_err(before_sending("finding the Wave checkout session"))?
            .ok_or_else(|| {
                AdapterError::Rejected("no Wave checkout session for this payment".into())
            })?;
        let path = format!("/v1/checkout/sessions/{}/refund", session.id);
        let resp = api.send("POST", &path, &[], None)?;
        match resp.status {
            // Synchronous at Wave: a 200 means the whole session's money went back.
            200 | 204 => {
                let settled = session.settled().or_unknown()?;
                Ok(started(session.id, PspStatus::Completed(settled)))
            }
            _ => Err(WAVE.unexpected(&resp)),
        }
    }

    fn refund_status(_refund: OperationRef) -> Result<PspStatus, AdapterError> {
        Err(AdapterError::NotSupported(
            "Wave refunds are synchronous and have no status to query; check a timed-out refund in the Wave Business Portal".into(),
        ))
    }

    fn payout(req: PayoutRequest) -> Result<Started, AdapterError> {
        let api = payouts(&req.operator)?;
        let body = transformers::CreatePayout {
            currency: req.currency.clone(),
            receive_amount: req.amount.to_string(),
            mobile: req.phone.clone(),
            name: req.beneficiary_name.clone(),
            client_reference: req.payout_id.clone(),
            payment_reason: wire::clip(&req.reference, 40),
        };
        // The same key on a retry returns the same payout instead of paying twice.
        let key = [("idempotency-key".to_string(), req.payout_id.clone())];
        let resp = api.send("POST", "/v1/payout", &key, json(&body))?;
        let read = |b: &[u8]| wire::parse::<Payout>("Wave payout", b);
        let payout = WAVE
            .answer(resp, [200, 201], read)?
            .map_err(|refused| AdapterError::Rejected(refused.message))?;
        let status = transformers::payout_status(&payout).or_unknown()?;
        Ok(started(payout.id, status))
    }

    fn payout_status(payout: OperationRef) -> Result<PspStatus, AdapterError> {
        let api = payouts(&payout.operator)?;
        let found = PAYOUTS.find(&api, &payout, |_: &Payout| false)?;
        lookup::status_of(found, transformers::payout_status)
    }

    /// Wave lists a day's transactions as it executes them.
    fn books_info() -> BooksInfo {
        BooksInfo {
            statement: true,
            final_after_ms: 10 * 60 * 1000,
            max_period_ms: 0,
        }
    }

    fn balances() -> Result<Vec<Balance>, AdapterError> {
        let (api, wallet) = balance_api()?;
        let balance: transformers::Balance = api.get("balance", "/v1/balance")?;
        Ok(vec![Balance {
            wallet: wallet.into(),
            currency: balance.currency,
            available: balance.amount,
            reserved: None,
            // The one wallet collects and pays out.
            pays_out: SPEC.served().iter().map(|op| op.slug.to_string()).collect(),
        }])
    }

    /// One page of one day at a time; the cursor moves on to the next day
    /// after a day's last page, until the period's last day.
    fn statement(
        from_ms: u64,
        to_ms: u64,
        cursor: Option<String>,
    ) -> Result<StatementPage, AdapterError> {
        use mmc_adapter_kit::mmc_domain::time;
        let (api, wallet) = balance_api()?;
        let (date, after) = statement_cursor(cursor.as_deref(), from_ms);
        let mut path = format!("/v1/transactions?date={}", http::encode_component(&date));
        if let Some(after) = &after {
            path.push_str(&format!("&after={}", http::encode_component(after)));
        }
        let list: transformers::TransactionList = api.get("transaction list", &path)?;
        let movements = list
            .items
            .into_iter()
            .map(|t| transformers::movement(t, wallet))
            .collect::<Result<Vec<_>, _>>()
            .map_err(AdapterError::InvalidResponse)?
            .into_iter()
            .filter(|m| (from_ms..to_ms).contains(&m.at_ms))
            .collect();
        let next = match (list.page_info.has_next_page, list.page_info.end_cursor) {
            (true, Some(end)) => Some(format!("{date} {end}")),
            (true, None) => {
                return Err(AdapterError::InvalidResponse(
                    "Wave said another page follows but gave no cursor".into(),
                ));
            }
            (false, _) => {
                let next_day = time::day_of(&date).map(|d| (d as u64 + 1) * 86_400_000);
                next_day.filter(|&ms| ms < to_ms).map(time::date)
            }
        };
        Ok(StatementPage::Page(Page { movements, next }))
    }

    /// A signed webhook. Checkout events carry the session: we report its
    /// state as the event claims it (a failed attempt in an open session
    /// stays pending), which the service takes as a hint and reads back by
    /// `status`. Other event types are acknowledged and ignored so Wave stops
    /// resending them.
    fn parse_callback(req: Inbound) -> Result<Vec<CallbackUpdate>, AdapterError> {
        webhook::method(&req, &["POST"], "Wave webhooks")?;
        verify_signature(&req)?;
        let event: transformers::Event = WAVE.read("webhook", &req.body)?;
        if !event.kind.starts_with("checkout.session.") {
            return Ok(webhook::ignored(&format!(
                "Wave event {} of type {}",
                event.id, event.kind
            )));
        }
        let what = format!("Wave event {}'s session", event.id);
        let session: Session = wire::from_value(&what, event.data).or_unknown()?;
        let status = transformers::session_status(&session).or_unknown()?;
        let (id, reference) = (session.client_reference, session.id);
        Ok(webhook::report(SubjectKind::Payment, id, reference, status))
    }
}

mmc_adapter_kit::export!(Wave);

#[cfg(test)]
mod tests {
    use super::WebhookSecurity;

    #[test]
    fn signing_is_the_default_and_only_the_shared_secret_is_warned_of() {
        for setting in [None, Some("signing"), Some("shared-secret"), Some("")] {
            assert_eq!(WebhookSecurity::of(setting), WebhookSecurity::Signing);
            assert_eq!(WebhookSecurity::of(setting).warning(), None);
        }
        let shared = WebhookSecurity::of(Some("shared_secret"));
        assert_eq!(shared, WebhookSecurity::SharedSecret);
        assert!(shared.warning().unwrap().contains("for ever"));
    }
}
