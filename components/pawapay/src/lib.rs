//! Live adapter for pawaPay's v2 API where pawaPay really serves: Moov in
//! Benin, Togocom (Mixx by Yas) and Moov in Togo, Orange and Moov in Côte
//! d'Ivoire (MTN and Wave have adapters of their own). How its protocol is
//! mapped (PREAUTH codes, active configuration, provider prediction,
//! unsignable callbacks taken as hints), its settings and secret:
//! `docs/operators.md`.

pub mod transformers;

use std::collections::BTreeMap;

use mmc_adapter_kit::books::{Balance, BooksInfo, Page, Preparing, StatementPage};
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

/// The account's API, for what is not about one operator (its books).
fn account_api() -> Result<(Endpoint, Vec<transformers::Wallet>), AdapterError> {
    let served = SPEC.served();
    let endpoint = SPEC
        .account_market()?
        .bearer_endpoint(&PAWAPAY, "api_token")?;
    let mut wallets: Vec<transformers::Wallet> = Vec::new();
    for op in &served {
        let country = transformers::alpha3(op.country).to_string();
        if !wallets.iter().any(|w| w.country == country) {
            let currency = op.currency().to_string();
            wallets.push(transformers::Wallet { country, currency });
        }
    }
    Ok((endpoint, wallets))
}

/// Rows of a statement returned a page at a time.
const STATEMENT_PAGE: usize = 1000;

/// How long to wait before asking again about a statement being prepared
/// (`statement_poll_ms`, 2 s by default).
fn statement_poll_ms() -> u64 {
    settings::setting("statement_poll_ms")
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000)
}

/// Where a statement read stands, as its cursor says: the wallet (by its
/// place among the served countries), the statement pawaPay prepares for
/// it (none: not asked yet) and the row the next page starts at (none: not
/// ready when last asked). `<wallet>|<statement id>|<row>`.
struct StatementCursor {
    wallet: usize,
    statement: Option<String>,
    row: Option<usize>,
}

impl StatementCursor {
    fn read(cursor: Option<&str>) -> Result<StatementCursor, AdapterError> {
        let Some(cursor) = cursor else {
            return Ok(StatementCursor {
                wallet: 0,
                statement: None,
                row: None,
            });
        };
        let bad =
            || AdapterError::NotSent(format!("not a statement cursor of this adapter: {cursor}"));
        let mut parts = cursor.split('|');
        let wallet = parts.next().and_then(|w| w.parse().ok()).ok_or_else(bad)?;
        let statement = parts.next().filter(|s| !s.is_empty()).map(str::to_string);
        let row = match parts.next().filter(|r| !r.is_empty()) {
            Some(r) => Some(r.parse().map_err(|_| bad())?),
            None => None,
        };
        Ok(StatementCursor {
            wallet,
            statement,
            row,
        })
    }

    fn write(&self) -> String {
        let row = self.row.map(|r| r.to_string()).unwrap_or_default();
        format!(
            "{}|{}|{row}",
            self.wallet,
            self.statement.clone().unwrap_or_default()
        )
    }
}

/// pawaPay's statement time: `2025-05-10T10:00:00Z`.
fn statement_time(ms: u64) -> String {
    let t = mmc_domain::time::rfc3339(ms);
    format!("{}Z", &t[..19])
}

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
    /// pawaPay prepares a wallet's statement on request and publishes it as
    /// a CSV to download (its data for today up to an hour behind).
    fn books_info() -> BooksInfo {
        BooksInfo {
            statement: true,
            final_after_ms: 60 * 60 * 1000,
            max_period_ms: 31 * 24 * 60 * 60 * 1000,
        }
    }

    fn balances() -> Result<Vec<Balance>, AdapterError> {
        let (api, _) = account_api()?;
        let read: transformers::WalletBalances =
            api.get("wallet balances", "/v2/wallet-balances")?;
        Ok(read
            .balances
            .into_iter()
            .map(|b| Balance {
                // A country's wallet pays out to its operators (a provider's
                // wallet, where pawaPay keeps one, to that provider's).
                pays_out: SPEC
                    .served()
                    .iter()
                    .filter(|op| transformers::alpha3(op.country) == b.country)
                    .filter(|op| b.provider.as_ref().is_none_or(|p| *p == provider_of(op)))
                    .map(|op| op.slug.to_string())
                    .collect(),
                wallet: match b.provider {
                    Some(p) => format!("{} {p}", b.country),
                    None => b.country,
                },
                currency: b.currency,
                available: b.balance,
                reserved: None,
            })
            .collect())
    }

    /// Each served country's wallet in turn: its statement asked for, waited
    /// on while pawaPay prepares it, then read from its CSV a page at a time.
    fn statement(
        from_ms: u64,
        to_ms: u64,
        cursor: Option<String>,
    ) -> Result<StatementPage, AdapterError> {
        let (api, wallets) = account_api()?;
        let mut at = StatementCursor::read(cursor.as_deref())?;
        let Some(wallet) = wallets.get(at.wallet) else {
            return Ok(StatementPage::Page(Page {
                movements: vec![],
                next: None,
            }));
        };
        let preparing = |at: &StatementCursor| {
            StatementPage::Preparing(Preparing {
                cursor: at.write(),
                retry_after_ms: statement_poll_ms(),
            })
        };
        let Some(statement) = at.statement.clone() else {
            let body = transformers::StatementRequest {
                wallet: wallet.clone(),
                start_date: statement_time(from_ms),
                end_date: statement_time(to_ms),
                compressed: false,
            };
            let read =
                |b: &[u8]| wire::parse::<transformers::StatementAccepted>("pawaPay statement", b);
            let asked = PAWAPAY
                .answer(api.post("/v2/statements", &body)?, [200, 201, 202], read)?
                .map_err(|refused| AdapterError::Rejected(refused.message))?;
            return match (asked.status.as_str(), asked.statement_id) {
                ("ACCEPTED", Some(id)) => {
                    at.statement = Some(id);
                    Ok(preparing(&at))
                }
                _ => Err(AdapterError::Rejected(format!(
                    "pawaPay refused the statement of {}: {}",
                    wallet.country,
                    transformers::failure(asked.failure_reason.as_ref()).message
                ))),
            };
        };
        let check: transformers::StatementCheck =
            api.get("statement status", &format!("/v2/statements/{statement}"))?;
        let data = match (check.status.as_str(), check.data) {
            ("FOUND", Some(data)) => data,
            _ => {
                return Err(AdapterError::InvalidResponse(format!(
                    "pawaPay does not know the statement {statement} it accepted"
                )));
            }
        };
        let url = match (data.status.as_str(), data.download_url) {
            ("COMPLETED", Some(url)) => url,
            ("FAILED", _) => {
                return Err(AdapterError::Unavailable(format!(
                    "pawaPay could not prepare the statement of {}: {}",
                    wallet.country,
                    transformers::failure(data.failure_reason.as_ref()).message
                )));
            }
            _ => return Ok(preparing(&at)),
        };
        // The CSV is at its own address, signed in the URL: no token goes with it.
        let download = Endpoint {
            provider: &PAWAPAY,
            base_url: String::new(),
            headers: Vec::new(),
            timeout_ms: api.timeout_ms,
        };
        let resp = download.send("GET", &url, &[], None)?;
        if resp.status != 200 {
            return Err(PAWAPAY.unexpected(&resp));
        }
        let row = at.row.unwrap_or(0);
        let (movements, more) =
            transformers::statement_rows(&resp.body, &wallet.country, (row, STATEMENT_PAGE))
                .map_err(AdapterError::InvalidResponse)?;
        let next = if more {
            Some(
                StatementCursor {
                    row: Some(row + STATEMENT_PAGE),
                    ..at
                }
                .write(),
            )
        } else if at.wallet + 1 < wallets.len() {
            Some(
                StatementCursor {
                    wallet: at.wallet + 1,
                    statement: None,
                    row: None,
                }
                .write(),
            )
        } else {
            None
        };
        let in_period = movements
            .into_iter()
            .filter(|m| (from_ms..to_ms).contains(&m.at_ms))
            .collect();
        Ok(StatementPage::Page(Page {
            movements: in_period,
            next,
        }))
    }

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
