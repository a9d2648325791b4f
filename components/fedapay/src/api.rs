//! FedaPay's API for one served operator: its objects found by FedaPay's id
//! or by ours (search, then the list read until absence is proven), the
//! drafts that move no money (a transaction, its token, a payout) and the
//! payout start that does.

use mmc_adapter_kit::exchange::{Endpoint, OrUnknown, before_sending, json};
use mmc_adapter_kit::types::*;
use mmc_adapter_kit::{lookup, started, wire};
use mmc_domain::{Operator, http};

use crate::transformers::{self, Kind, Payout, Record, Token, Transaction};
use crate::{ACCEPT, FEDAPAY, SPEC, iso_of};

/// How far FedaPay's lists are read for an operation its search did not
/// find: a few pages when our id says nothing of its time, more when it
/// does (UUIDv7: the scan then stops at our creation, whatever the account
/// did before); and the clock difference allowed between our id's time and
/// FedaPay's `created_at`.
const LIST_PAGES: u32 = 5;
const LIST_PAGES_SINCE: u32 = 50;
const LIST_PER_PAGE: u32 = 100;
const CLOCK_MARGIN_MS: u64 = 10 * 60 * 1000;

/// FedaPay ids are integers; anything else was not issued by FedaPay.
fn fedapay_id(reference: Option<&str>) -> Option<&str> {
    reference.filter(|r| !r.is_empty() && r.len() <= 20 && r.bytes().all(|b| b.is_ascii_digit()))
}

/// FedaPay's API for one served operator.
pub struct Api {
    pub op: &'static Operator,
    pub endpoint: Endpoint,
}

impl Api {
    pub fn of(operator: &str) -> Result<Api, AdapterError> {
        let market = SPEC.market(operator)?;
        Ok(Api {
            endpoint: market.bearer_endpoint(&FEDAPAY, "secret_key")?.with(ACCEPT),
            op: market.op,
        })
    }

    /// `GET path`, answered 200 with a readable list of `T`s.
    fn list<K: Kind>(&self, path: &str) -> Result<Vec<Record<K>>, AdapterError> {
        let class = format!("{}s", K::CLASS);
        self.endpoint
            .get_with(path, |body| transformers::many(&class, body))
    }

    /// A transaction or payout of ours: by FedaPay's id when we have it, else
    /// by our id (e.g. after a call whose answer was lost): the documented
    /// search, keeping only what carries our id in `custom_metadata` (several
    /// would be our bug; a final one wins), then the list.
    pub fn find<K: Kind>(
        &self,
        our_id: &str,
        reference: Option<&str>,
    ) -> Result<Option<Record<K>>, AdapterError> {
        let class = K::CLASS;
        if let Some(id) = fedapay_id(reference) {
            let resp = self
                .endpoint
                .send("GET", &format!("/v1/{class}s/{id}"), &[], None)?;
            return FEDAPAY.found(resp, |body| transformers::one(class, body));
        }
        let mine = |t: &Record<K>| t.ours().as_deref() == Some(our_id);
        let search = http::encode_component(our_id);
        let found = self
            .list(&format!("/v1/{class}s/search?search={search}"))
            .map(|all| lookup::pick(all.into_iter().filter(&mine).collect(), Record::is_final));
        match found {
            Ok(Some(t)) => Ok(Some(t)),
            // How the search matches is not documented (nor that it exists
            // on every account): an answer without us proves nothing yet.
            Ok(None) | Err(AdapterError::Rejected(_)) => self.listed(our_id, mine),
            Err(e) => Err(e),
        }
    }

    /// `PUT /v1/payouts/start` for a created payout: the call that sends money.
    pub fn start_payout(&self, id: u64) -> Result<Started, AdapterError> {
        let start = transformers::StartPayouts {
            payouts: vec![transformers::StartItem { id, send_now: true }],
        };
        let read = |b: &[u8]| transformers::many::<Payout>("payouts", b);
        let answer = self
            .endpoint
            .send("PUT", "/v1/payouts/start", &[], json(&start))
            .and_then(|resp| FEDAPAY.answer(resp, 200..=299, read));
        let status = match answer {
            Ok(Ok(started)) => match started.iter().find(|p| p.id == id) {
                Some(p) => p.status(&iso_of).or_unknown()?,
                None => PspStatus::Pending,
            },
            // Refused: the payout was never started, nothing was sent.
            Ok(Err(refused)) => PspStatus::Failed(refused),
            // The start's answer was lost: it may have been carried out. Its
            // FedaPay id is known, so it is followed by that id (a read that
            // always ends), never looked for again by ours.
            Err(
                e @ (AdapterError::Timeout(_)
                | AdapterError::Unavailable(_)
                | AdapterError::InvalidResponse(_)),
            ) => {
                mmc_adapter_kit::log::log(
                    mmc_adapter_kit::log::Level::Warn,
                    &format!(
                        "FedaPay payout {id}: the start's answer was lost ({e:?}); followed by its id"
                    ),
                );
                PspStatus::Pending
            }
            Err(e) => return Err(e),
        };
        Ok(started(id.to_string(), status))
    }

    /// Ours in FedaPay's list (`GET /v1/{class}s`, `per_page`, `page`), read
    /// until absence is proven ([`lookup::Scan`]): ids that are UUIDv7, like
    /// payment ids, carry their creation time.
    fn listed<K: Kind>(
        &self,
        our_id: &str,
        mine: impl Fn(&Record<K>) -> bool,
    ) -> Result<Option<Record<K>>, AdapterError> {
        let class = K::CLASS;
        let since = lookup::uuid7_ms(our_id)
            .map(|ms| mmc_domain::time::rfc3339(ms.saturating_sub(CLOCK_MARGIN_MS)));
        let scan = lookup::Scan {
            list: &format!("FedaPay's {class} list"),
            our_id,
            pages: if since.is_some() {
                LIST_PAGES_SINCE
            } else {
                LIST_PAGES
            },
            since: since.as_deref().map(|s| &s[..19]),
        };
        scan.find(
            |page| {
                self.list(&format!(
                    "/v1/{class}s?per_page={LIST_PER_PAGE}&page={page}"
                ))
            },
            mine,
            |t| lookup::utc_second(t.created_at.as_deref()),
        )
    }

    /// A call made before the one that moves money (creating a transaction,
    /// its token, a payout): FedaPay's object, a refusal, or an error that
    /// is never unknown (nothing was asked of the customer).
    pub fn draft<T>(
        &self,
        what: &str,
        path: &str,
        body: &impl serde::Serialize,
        read: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<Result<T, Failure>, AdapterError> {
        let answer = self.endpoint.submit(path, body, [200, 201], read);
        answer.map_err(before_sending(what))
    }

    /// Creates the transaction and its token: both move no money.
    pub fn prepare(
        &self,
        req: &InitiateRequest,
    ) -> Result<Result<(u64, Token), Failure>, AdapterError> {
        let described = req.description.as_deref().filter(|d| !d.trim().is_empty());
        let body = transformers::CreateTransaction {
            description: wire::clip(described.unwrap_or(&req.reference), 255),
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
        let what = "creating the FedaPay transaction";
        let read = |b: &[u8]| transformers::one("transaction", b);
        let created: Transaction = match self.draft(what, "/v1/transactions", &body, read)? {
            Ok(t) => t,
            Err(refused) => return Ok(Err(refused)),
        };
        let what = "getting the FedaPay payment token";
        let path = format!("/v1/transactions/{}/token", created.id);
        let read = |b: &[u8]| transformers::parse::<Token>("token", b);
        let token = self.draft(what, &path, &serde_json::json!({}), read)?;
        Ok(token.map(|t| (created.id, t)))
    }
}
